"""The tri-pool's capacity views, judged exactly on the float chain (``UNI-14``).

A tri-pool (SGLang's ``UnifiedMambaSWATokenToKVPoolAllocator``, or any target whose
introspection snapshot has a ``"state"`` end below an SWA float below full) places its SWA
float's span where its policy chooses (placement the contract leaves free, judged by what must
hold); given the chain's frontiers, every capacity view is fixed
(:mod:`kvpool.spec.unified_float`). This module reads the frontiers off the target's
:class:`~kvpool.spec.unified_state.UnifiedState` (:func:`chain_from`, :func:`chain_of`),
requires them to agree with the model's live pages (the float's live pages are the model's
SWA-bound ones, the full end's live pages the model's live ones), and compares the views
(:func:`view_problems`), the state end's available slots too where the target shows them
(``UNI-16``). The request pool's state slots on the state end (one per request, not
on the token surface) are taken and released by the ``state_slots`` call
(:func:`~.peer_state.set_state_slots`, :data:`STATE_CALL`).
"""

from __future__ import annotations

from typing import Any

import torch
from kvpool.spec.unified import UnifiedSWAModel
from kvpool.spec.unified_float import FloatChain, Grid, capacity_views, state_available_slots
from kvpool.spec.unified_state import SubPoolState, UnifiedState

from ...engine.call import Call
from ...engine.report import OracleError
from .peer_state import set_state_slots, state_available, state_of

__all__ = ["STATE_CALL", "STATE_VIEW", "VIEWS", "chain_from", "chain_of", "float_available",
           "observed_views", "promised_alloc", "set_state_slots", "view_clause", "view_problems"]

VIEWS = ("available_size", "full_available_size", "swa_available_size",
         "schedulable_full_available_size", "schedulable_swa_available_size")
CHAIN = (("state", "up"), ("swa", "float"), ("full", "down"))  # the members, bottom to top
STATE_VIEW = "state slots available"  # the state end's view (UNI-16), named in its problems


def _grid(sub: SubPoolState) -> Grid:
    return Grid(sub.page_bytes, sub.num_pages, sub.min_page)


def _end_holes(sub: SubPoolState) -> int:
    """An end's drainable holes (lazy compaction; none under eager)."""
    return sub.drainable_holes if sub.lazy else 0


def chain_from(state: UnifiedState) -> FloatChain:
    """The float chain's frontiers as the snapshot ``state`` of a tri-pool holds them.

    Raises:
        OracleError: ``state`` is not a tri-pool's (a ``"state"`` end growing up, an ``"swa"``
            float, a ``"full"`` end growing down).
    """
    found = tuple((name, state.sides[name].grow) for name, _ in CHAIN if name in state.sides)
    if found != CHAIN:
        raise OracleError(f"float_chain needs sub-pools {CHAIN} (name, grow); the target's "
                          f"unified_state() has {found}")
    ma, sa, fa = (state.sides[name] for name, _ in CHAIN)
    ps = state.page_size
    return FloatChain(
        page_size=ps, state=_grid(ma), swa=_grid(sa), full=_grid(fa),
        state_high_byte=ma.span_high * ma.page_bytes, state_holes=_end_holes(ma),
        state_drains=ma.lazy and ma.drains,
        swa_low_page=sa.span_low, swa_high_page=sa.span_high, swa_holes=sa.drainable_holes,
        full_low_byte=fa.span_low * fa.page_bytes,
        full_span_pages=max(0, fa.span_high - fa.span_low),
        full_holes=_end_holes(fa), full_drains=fa.lazy and fa.drains,
        full_static_tokens=state.full_static_tokens, swa_static_tokens=state.swa_static_tokens,
        full_live_tokens=fa.live_pages * ps, swa_live_tokens=sa.live_pages * ps)


def chain_of(target: Any) -> FloatChain:
    """The float chain's frontiers as ``target`` (a tri-pool) holds them."""
    return chain_from(state_of(target))


def observed_views(target: Any) -> dict[str, int]:
    """The target's capacity views by name (:data:`VIEWS`)."""
    return {name: int(getattr(target, name)()) for name in VIEWS}


def float_available(target: Any, state: UnifiedState | None = None) -> int:
    """The ``available_size()`` the float chain's frontiers give ``target`` (``UNI-14``), read
    from ``state`` when given (its snapshot now)."""
    return int(capacity_views(chain_from(state or state_of(target)))["available_size"])


def view_problems(target: Any, model: UnifiedSWAModel | None = None,
                  state: UnifiedState | None = None) -> list[str]:
    """Why ``target``'s capacity views break ``UNI-14`` (empty when they hold): a live-page
    count that is not the model's (when given), then each view unlike the spec's. ``state``:
    the target's snapshot now (read when not given)."""
    chain = chain_from(state or state_of(target))
    out: list[str] = []
    if model is not None:
        ps = model.page_size
        live = (chain.full_live_tokens // ps, chain.swa_live_pages)
        want = (len(model.full.v2p), len(model.swa.v2p))
        if live != want:
            out.append(f"live pages (full, SWA float) are {live}, the model holds {want}")
    want_views = capacity_views(chain)
    got = observed_views(target)
    out += [f"{name}() is {got[name]}, the float chain's frontiers give {want_views[name]}"
            for name in VIEWS if got[name] != want_views[name]]
    slots, want_slots = state_available(target), state_available_slots(chain)
    if slots is not None and slots != want_slots:
        out.append(f"{STATE_VIEW}: {slots}, the float chain's frontiers give {want_slots}")
    return out


def view_clause(detail: str) -> str:
    """The clause a problem of :func:`view_problems` breaks: ``UNI-16`` for the state end's
    view, else ``UNI-14``."""
    return "UNI-16" if detail.startswith(STATE_VIEW) else "UNI-14"


def promised_alloc(target: Any, model: UnifiedSWAModel, call: str,
                   args: dict[str, Any]) -> int | None:
    """``target``'s ``available_size()`` before an ``alloc(need_size)`` it covers (``UNI-14``:
    such an allocation must succeed; one beyond it may, after the float moves), when it covers
    it and the free virtual ids do too; None for any other call."""
    if call != "alloc":
        return None
    need, available = int(args["need_size"]), int(target.available_size())
    pages = -(-need // model.page_size)
    return available if need <= available and pages <= len(model.free_virtual) else None


def _state_target(target: Any, args: Any, device: str) -> tuple[None, list[torch.Tensor]]:
    set_state_slots(target, args["count"])
    return None, []  # the call's result is None, like the model's


STATE_CALL = Call(
    "state_slots", "state", ("count",),
    spec=lambda m, a: None,  # the model has no state end: UNI-14 judges its bytes' effect
    target=_state_target,
    source=lambda a, var: [f"set_state_slots(a, {a['count']})"],
    raise_clause="UNI-14", order_clause="UNI-14")
