"""The idle-time compaction ``flush_opportunistic()`` of a unified composite (``UNI-6``).

Under lazy compaction, which holes an allocation reuses is placement the contract leaves free,
so the spec model's physical pages may differ from the target's while every count agrees
(``UNI-5``: span, live pages, holes). What an idle-time flush does depends on where the holes
are (it absorbs those touching the frontier, then moves the live pages nearest it into the
holes farthest from it), so before it the model adopts the target's placement
(:func:`adopt_placement`, from its introspection snapshot) and then flushes
(:meth:`~kvpool.spec.unified.UnifiedSWAModel.flush_opportunistic`): the pages moved, the
frontier and the holes left are then the spec's, and are judged like any other call's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kvpool.spec.unified import UnifiedSWAModel
from kvpool.spec.unified_state import UnifiedState

from ...engine.call import Call
from ..single.calls import plain_call

__all__ = ["FLUSH_CALL", "adopt_placement"]


def adopt_placement(model: Any, state: UnifiedState, ends: tuple[str, ...] = ("full", "swa")
                    ) -> None:
    """Rebind the model's live pages, holes and frontiers on its ``ends`` (end pools named as
    the snapshot's sides) to the target's (lazy compaction only; under eager placement is fixed
    and left as is), where an end's live virtual pages and span size agree with the model's; an
    end that disagrees is left for the checks to report."""
    if not model.lazy:
        return
    for pool in (getattr(model, name) for name in ends):
        side = state.sides[pool.name]
        bindings = {int(v): int(p) for v, p in side.bindings.items()}
        span = side.span_high - side.span_low
        if set(bindings) != set(pool.v2p) or span != pool.span_pages():
            continue
        pool.v2p = dict(bindings)
        pool.p2v = {p: v for v, p in bindings.items()}
        pool.content = dict(pool.p2v)
        pool.holes = sorted(int(h) for h in side.holes)
        pool.watermark = side.span_high if pool.grows_up else side.span_low - 1


def _spec(model: UnifiedSWAModel, args: Mapping[str, Any]) -> int:
    """The spec's ``flush_opportunistic()`` on the target's placement (``args["state"]``, the
    target's snapshot before the call, which the executor passes)."""
    state = args.get("state")
    if state is not None:
        adopt_placement(model, state)
    return int(model.flush_opportunistic())


FLUSH_CALL: Call = dataclasses.replace(
    plain_call("flush_opportunistic", "state", "UNI-6", "UNI-6"),
    spec=_spec, result_clause="UNI-6",
    source=lambda a, var: [f"{var} = a.flush_opportunistic()"],
    checks=lambda a, e, var: [f"assert {var} == {e!r}  # [UNI-6]"])
