"""Replay a JSON trace (``Trace.to_json``) against any target.

In ``exact`` order the recorded arguments are used as they are. In ``contract`` order another
allocator may hand out other slots, so each slot of a recorded result is mapped to the slot the
replayed target returned at the same position, and later arguments are translated through that
map (a renaming that every contract-conformant allocator admits).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .call import map_slots
from .declaration import exception_class
from .families import family
from .report import Failure, OracleFailure
from .target import Config, Target
from .trace import Trace


def replay(
    trace: Trace, target: Target, *, order: str | None = None, remap: bool = False
) -> Failure | None:
    """Run ``trace`` on ``target``; the first divergence, or None when every step conforms.

    A target that declares no error types is judged by the ones the trace was recorded with
    (its rejected steps expect them). ``remap``: map recorded results to the replayed ones in
    exact order too (the minimizer's changed traces, whose pools or batches moved the slots)."""
    mode = order or trace.order
    if trace.error_types and not target.caps.error_types:
        types = tuple(exception_class(name) for name in trace.error_types)
        target = dataclasses.replace(target, caps=target.caps.with_source("trace", checked=types))
    fam = family(trace.family)
    if target.family != trace.family:
        raise ValueError(f"a {trace.family} trace cannot replay on a {target.family} target")
    ex = fam.executor(target, Config(trace.page_size, trace.need_sort, trace.device, mode))
    ex.data_plane = ex.trace.data_plane = ex.data_plane or trace.data_plane
    slots: dict[int, int] = {}
    end = len(trace.steps) if trace.failing_step is None else trace.failing_step + 1
    try:
        for step in trace.steps[:end]:
            if step.call == "create":
                ex.create_from(step.args)
                continue
            args = (
                map_slots(
                    step.args,
                    fam.calls[step.call].slot_args,
                    lambda s: slots.get(s, s),
                    trace.page_size,
                )
                if slots
                else step.args
            )
            if step.raises is not None:
                ex.call_bad(step.call, **args)
                continue
            got = ex.call(step.call, clobber=step.clobber, **args)
            alloc = fam.calls[step.call].kind == "alloc"
            if (mode == "contract" or remap) and alloc and got and step.expect:
                slots.update(zip(step.expect, got))
    except OracleFailure as err:
        return err.failure
    return None


def replay_file(path: str | Path, target: Target, *, order: str | None = None) -> Failure | None:
    """``replay`` of the trace stored at ``path``."""
    return replay(Trace.from_json(Path(path).read_text()), target, order=order)
