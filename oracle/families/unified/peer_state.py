"""How the unified family reads and drives a target beyond its allocator API: the protocol, or
SGLang 0.5.23's composite through its own fields.

The family judges a unified target through :class:`kvpool.spec.unified_state.UnifiedState`
(``unified_state()``) and its optional hooks (``unified_plant``, ``set_state_slots``). SGLang's
composites (``UnifiedSWATokenToKVPoolAllocator``, the tri-pool
``UnifiedMambaSWATokenToKVPoolAllocator``) do not provide them; this module is the one place of
the family that reads their private fields to supply them (:func:`sglang_state`, and the
planters and state-slot driver below). Every function takes the target and dispatches:

- :func:`state_of`: the target's ``unified_state()``, else SGLang's adapter, else
  :class:`~kvpool.oracle.engine.report.OracleError` naming the protocol;
- :func:`plant_fault`: the target's ``unified_plant(fault)``, else SGLang's planter, else False
  (the census probe is skipped);
- :func:`set_state_slots`: the target's ``set_state_slots(count)``, else SGLang's request-pool
  sequence, else ``OracleError``.

A repro for any target may import and call these (``a`` is the target).
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from kvpool.spec.unified_state import PLANTABLE, SubPoolState, UnifiedState

from ...engine.report import OracleError

__all__ = ["is_sglang_unified", "plant_fault", "set_state_slots", "sglang_state",
           "state_available", "state_of"]

COMPOSITES = "sglang.srt.mem_cache.allocator.unified_hybrid_swa"
BASE_CLASS = "UnifiedSWAAllocatorBase"  # both of SGLang's unified composites derive from it
# SGLang's member attribute of each sub-pool, by the protocol's name
MEMBERS = (("state", "mamba_allocator"), ("swa", "swa_attn_allocator"),
           ("full", "full_attn_allocator"))


def is_sglang_unified(target: Any) -> bool:
    """Whether ``target`` is one of SGLang's unified composites (its module already imported:
    nothing is imported here)."""
    module = sys.modules.get(COMPOSITES)
    base = getattr(module, BASE_CLASS, None)
    return isinstance(base, type) and isinstance(target, base)


def state_of(target: Any) -> UnifiedState:
    """``target``'s introspection snapshot.

    Raises:
        OracleError: the target provides no ``unified_state()`` and is not SGLang's composite
            (the family cannot read its spans, holes and bindings).
    """
    own = getattr(target, "unified_state", None)
    if callable(own):
        state = own()
        if not isinstance(state, UnifiedState):
            raise OracleError(f"{type(target).__name__}.unified_state() returned "
                              f"{type(state).__name__}, not kvpool.spec.unified_state."
                              "UnifiedState")
        return state
    if is_sglang_unified(target):
        return sglang_state(target)
    raise OracleError(
        f"{type(target).__module__}.{type(target).__name__} provides no unified_state(): the "
        "unified family reads a target's sub-pools (spans, holes, bindings) through the "
        "introspection protocol kvpool.spec.unified_state.UnifiedState (see "
        "docs/unified-own-allocator.md)")


# -- SGLang's composite, read ---------------------------------------------------------------------
def _span(sub: Any) -> tuple[int, int]:
    """``[low, high)``: ``[min_page, watermark)`` growing up, ``(watermark, num_pages)`` growing
    down, ``[low_wm, high_wm)`` for a float pool."""
    if sub.grow_direction == "float":
        return int(sub.low_wm_page), int(sub.high_wm_page)
    if sub.grow_direction == "up":
        return int(sub.min_page_index), int(sub.watermark_physical)
    return int(sub.watermark_physical) + 1, int(sub.num_pages)


def _sub_state(name: str, sub: Any) -> SubPoolState:
    """One ``MultiEndedAllocator`` in the protocol's terms: its holes are ``_free_phys_pages``
    and the pages ``_pending_reuse`` holds back; its bindings the live rows of
    ``virtual_to_physical`` (the padding anchor 0 and the trailing sentinel aside)."""
    held = tuple(sorted(int(p) for p in sub._pending_reuse_pages_cpu))
    holes = [int(p) for p in sub._free_phys_pages.tolist()]
    v2p = sub.virtual_to_physical.tolist()
    low, high = _span(sub)
    return SubPoolState(
        name=name, grow=str(sub.grow_direction), page_bytes=int(sub.entry_bytes_per_page),
        num_pages=int(sub.num_pages), min_page=int(sub.min_page_index), span_low=low,
        span_high=high, holes=tuple(sorted(holes + list(held))),  # one named twice stays twice
        bindings={v: int(p) for v, p in enumerate(v2p[1:-1], start=1) if p >= 0},
        lazy=bool(sub.lazy_compaction), drains=not sub.moves_blocked(), held_back=held)


def sglang_state(target: Any) -> UnifiedState:
    """SGLang's composite (two-member or tri-pool) as a :class:`UnifiedState`."""
    sides = {name: _sub_state(name, getattr(target, attr)) for name, attr in MEMBERS
             if getattr(target, attr, None) is not None}
    full = target.full_attn_allocator
    free = full.free_virtual_ids
    return UnifiedState(
        page_size=int(target.page_size), total_bytes=int(full.unified_buffer.total_bytes),
        sides=sides, free_virtual=tuple(int(v) for v in free.tolist()) if free is not None
        else (), full_static_tokens=int(target._full_max_total_num_tokens),
        swa_static_tokens=int(target._swa_max_total_num_tokens))


# -- faults, planted ------------------------------------------------------------------------------
def plant_fault(target: Any, fault: str) -> bool:
    """Put ``target`` into the unhealthy state ``fault`` (one of
    :data:`~kvpool.spec.unified_state.PLANTABLE`): through its ``unified_plant`` hook, else on
    SGLang's composite by writing its tables; False when it cannot be planted (no hook, or
    fewer than two live pages a side).

    Raises:
        ValueError: ``fault`` is not plantable.
    """
    if fault not in PLANTABLE:
        raise ValueError(f"unknown fault {fault!r}; plantable: {PLANTABLE}")
    hook = getattr(target, "unified_plant", None)
    if callable(hook):
        return bool(hook(fault))
    if not is_sglang_unified(target):
        return False
    if fault == "frontier_cross":
        full, swa = target.full_attn_allocator, target.swa_attn_allocator
        if swa.grow_direction != "up":
            return False
        swa.watermark_physical = full.watermark_physical + 3  # two pages past its frontier
        return True
    side = fault.partition(":")[2]
    sub = getattr(target, f"{side}_attn_allocator")
    live = sorted(_sub_state(side, sub).bindings)
    if len(live) < 2:
        return False
    table = sub.virtual_to_physical
    table[live[0]] = table[live[1]]  # two live virtual pages, one physical page
    return True


# -- state slots on the tri-pool's state end ----------------------------------------------------
def state_available(target: Any) -> int | None:
    """The state slots ``target``'s state end takes now (``UNI-16``): its
    ``state_available_size()``, else SGLang's ``mamba_allocator.available_size()``; None when
    it shows neither."""
    own = getattr(target, "state_available_size", None)
    if callable(own):
        return int(own())
    ma = getattr(target, "mamba_allocator", None)
    return int(ma.available_size()) if is_sglang_unified(target) and ma is not None else None



def set_state_slots(target: Any, count: int) -> None:
    """Take or release state slots on ``target``'s state end until ``count`` are live: its
    ``set_state_slots`` hook, else on SGLang's tri-pool as its request pool does
    (``prepare_mamba_allocation`` for the missing ones, which may move the SWA float away, then
    ``mamba_allocator.alloc(1)`` each; releases free the lowest live slots first); a take the
    end refuses stops there.

    Raises:
        OracleError: the target has neither the hook nor SGLang's state end.
    """
    hook = getattr(target, "set_state_slots", None)
    if callable(hook):
        hook(count)
        return
    ma = getattr(target, "mamba_allocator", None)
    if not is_sglang_unified(target) or ma is None:
        raise OracleError(f"{type(target).__name__} has no set_state_slots(count) hook: the "
                          "unified family cannot drive its state end (float_chain)")
    live = sorted(_sub_state("state", ma).bindings)
    for v in live[:max(0, len(live) - count)]:
        ma.free(torch.tensor([v], dtype=torch.int64))
    if count > len(live):  # as SGLang's radix cache does before taking state slots
        target.prepare_mamba_allocation(count - len(live))
    for _ in range(count - len(live)):
        if ma.alloc(1) is None:
            return
