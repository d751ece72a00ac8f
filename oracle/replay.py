"""Replay a JSON trace (``Trace.to_json``) against any target.

In ``exact`` order the recorded arguments are used as they are. In ``contract`` order another
allocator may hand out other slots, so each slot of a recorded result is mapped to the slot the
replayed target returned at the same position, and later arguments are translated through that
map (a renaming that every contract-conformant allocator admits).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .calls import ALLOC_CALLS
from .executor import Executor
from .report import Failure, OracleFailure
from .runner import Target
from .trace import Trace


def _translate(value: Any, key: str, slots: dict[int, int]) -> Any:
    if not slots:
        return value
    if key in ("free_index", "last_loc"):
        return [slots.get(s, s) for s in value]
    if key == "segments":
        return [[[slots.get(s, s) for s in idx], start] for idx, start in value]
    if key == "entries":
        return [[slots.get(s, s) for s in e] for e in value]
    return value


def replay(trace: Trace, target: Target, *, order: str | None = None) -> Failure | None:
    """Run ``trace`` on ``target``; the first divergence, or None when every step conforms.

    Page maps of a replayed failure label owned pages by the step that allocated them.
    """
    mode = order or trace.order
    ex: Executor

    def owners() -> dict[int, str]:
        """Pages by the call that handed them out last: ``A`` = step 1, ``B`` = step 2, ..."""
        out: dict[int, str] = {}
        for i, s in enumerate(ex.trace.steps):
            if s.call in ALLOC_CALLS and s.raises is None and isinstance(s.expect, list):
                out.update((slot // trace.page_size, chr(ord("A") + i % 26)) for slot in s.expect)
        return out

    ex = Executor(
        target.factory,
        target.caps,
        target_path=target.path,
        page_size=trace.page_size,
        need_sort=trace.need_sort,
        device=trace.device,
        order=mode,
        owners=owners,
    )
    slots: dict[int, int] = {}
    end = len(trace.steps) if trace.failing_step is None else trace.failing_step + 1
    try:
        for step in trace.steps[:end]:
            if step.call == "create":
                ex.create(step.args["size"])
                continue
            args = {k: _translate(v, k, slots) for k, v in step.args.items()}
            if step.raises is not None:
                ex.call_bad(step.call, **args)
                continue
            got = ex.call(step.call, clobber=step.clobber, **args)
            if mode == "contract" and step.call in ALLOC_CALLS and got and step.expect:
                slots.update(zip(step.expect, got))
    except OracleFailure as err:
        return err.failure
    return None


def replay_file(path: str | Path, target: Target, *, order: str | None = None) -> Failure | None:
    """``replay`` of the trace stored at ``path``."""
    return replay(Trace.from_json(Path(path).read_text()), target, order=order)
