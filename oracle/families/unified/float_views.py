"""The tri-pool's capacity views, judged exactly on the float chain (``UNI-14``).

SGLang's tri-pool (``UnifiedMambaSWATokenToKVPoolAllocator``) places its SWA float's span where
its policy chooses (placement the contract leaves free, judged by what must hold); given the
chain's frontiers, every capacity view is fixed (:mod:`kvpool.spec.unified_float`). This module
reads the frontiers off the target (:func:`chain_of`), requires them to agree with the model's
live pages (the float's live pages are the model's SWA-bound ones, the full end's live pages
the model's live ones), and compares the views (:func:`view_problems`). The request pool's
state slots on the mamba end (one per request, not on the token surface) are taken and
released by the ``state_slots`` call (:func:`set_state_slots`, :data:`STATE_CALL`).
"""

from __future__ import annotations

from typing import Any

import torch
from kvpool.spec.unified import UnifiedSWAModel
from kvpool.spec.unified_float import FloatChain, Grid, capacity_views

from ...engine.call import Call

VIEWS = ("available_size", "full_available_size", "swa_available_size",
         "schedulable_full_available_size", "schedulable_swa_available_size")


def _grid(member: Any) -> Grid:
    return Grid(int(member.entry_bytes_per_page), int(member.num_pages),
                int(member.min_page_index))


def _holes(member: Any) -> int:
    return int(member._free_phys_pages.numel()) if member.lazy_compaction else 0


def _drains(member: Any) -> bool:
    return bool(member.lazy_compaction) and not member.moves_blocked()


def chain_of(target: Any) -> FloatChain:
    """The float chain's frontiers as ``target`` (a tri-pool) holds them."""
    fa, sa, ma = target.full_attn_allocator, target.swa_attn_allocator, target.mamba_allocator
    return FloatChain(
        page_size=int(target.page_size), state=_grid(ma), swa=_grid(sa), full=_grid(fa),
        state_high_byte=int(ma.watermark_physical) * int(ma.entry_bytes_per_page),
        state_holes=_holes(ma), state_drains=_drains(ma),
        swa_low_page=int(sa.low_wm_page), swa_high_page=int(sa.high_wm_page),
        swa_holes=int(sa._free_phys_pages.numel()),
        full_low_byte=(int(fa.watermark_physical) + 1) * int(fa.entry_bytes_per_page),
        full_span_pages=max(0, int(fa.num_pages) - 1 - int(fa.watermark_physical)),
        full_holes=_holes(fa), full_drains=_drains(fa),
        full_static_tokens=int(target._full_max_total_num_tokens),
        swa_static_tokens=int(target._swa_max_total_num_tokens),
        full_live_tokens=int(fa.allocated_count()), swa_live_tokens=int(sa.allocated_count()))


def observed_views(target: Any) -> dict[str, int]:
    """The target's capacity views by name (:data:`VIEWS`)."""
    return {name: int(getattr(target, name)()) for name in VIEWS}


def float_available(target: Any) -> int:
    """The ``available_size()`` the float chain's frontiers give ``target`` (``UNI-14``)."""
    return int(capacity_views(chain_of(target))["available_size"])


def view_problems(target: Any, model: UnifiedSWAModel | None = None) -> list[str]:
    """Why ``target``'s capacity views break ``UNI-14`` (empty when they hold): a live-page
    count that is not the model's (when given), then each view unlike the spec's."""
    chain = chain_of(target)
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
    return out


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


def live_state_slots(target: Any) -> list[int]:
    """The mamba end's live state slots (virtual ids bound to a physical slot), ascending."""
    ma = target.mamba_allocator
    bound = (ma.virtual_to_physical != -1).nonzero().flatten().tolist()
    return [int(v) for v in bound if v >= ma.min_page_index]


def set_state_slots(target: Any, count: int) -> None:
    """Take state slots on ``target``'s mamba end (``prepare_mamba_allocation`` for the
    missing ones, which may move the SWA float away, then ``mamba_allocator.alloc(1)`` each, as
    SGLang's request pool does per request) or release its lowest live ones until ``count``
    are live; a take the end refuses stops there."""
    ma = target.mamba_allocator
    live = live_state_slots(target)
    for v in live[:max(0, len(live) - count)]:
        ma.free(torch.tensor([v], dtype=torch.int64))
    if count > len(live):  # as SGLang's radix cache does before taking state slots
        target.prepare_mamba_allocation(count - len(live))
    for _ in range(count - len(live)):
        if ma.alloc(1) is None:
            return


def _state_target(target: Any, args: Any, device: str) -> tuple[None, list[torch.Tensor]]:
    set_state_slots(target, args["count"])
    return None, []  # the call's result is None, like the model's


STATE_CALL = Call(
    "state_slots", "state", ("count",),
    spec=lambda m, a: None,  # the model has no state end: UNI-14 judges its bytes' effect
    target=_state_target,
    source=lambda a, var: [f"set_state_slots(a, {a['count']})"],
    raise_clause="UNI-14", order_clause="UNI-14")
