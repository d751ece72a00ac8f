"""SGLang 0.5.23's unified full + Mamba composite on a CPU, built by SGLang's own pool builder.

``init_unified_mamba_pools`` (``sglang.srt.mem_cache.unified_memory_pool``) lays one byte buffer
out as ``[ mamba state (grow-up end) | full (grow-down end) ]`` and returns a bundle whose
``token_to_kv_pool_allocator`` is ``UnifiedMambaTokenToKVPoolAllocator``. The geometry here: one
full-attention layer of :data:`ENTRY_BYTES` a token (K and V, one head of dim 8, fp16) and one
Mamba layer of :data:`STATE_BYTES` a slot (conv ``(3, 8)`` bf16, temporal ``(1, 4, 8)`` fp32),
as SGLang's own tri-pool fixture. The sub-pool kernels run on SGLang's torch fallbacks
(:func:`kvpool.oracle.families.unified.peer.load_unified`).
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

from kvpool.spec.unified_state import SubPoolState, UnifiedState

from ...engine.report import OracleError
from ..unified.peer import load_unified

POOLS = "sglang.srt.mem_cache.unified_memory_pool"
ENTRY_BYTES = 32  # one full-attention token of one layer
STATE_BYTES = 176  # one Mamba state slot of one layer
MAX_STATE_SLOTS = 8  # the builder's max_mamba_cache_size


def build_unified_mamba(*, total_bytes: int, page_size: int, lazy: bool) -> Any:
    """SGLang's ``UnifiedMambaTokenToKVPoolAllocator`` over a buffer of ``total_bytes`` plus
    the ``MAX_STATE_SLOTS * STATE_BYTES`` SGLang's builder adds for the state end (the
    allocator's ``unified_buffer.total_bytes`` is the whole buffer).

    Raises:
        PeerUnavailable: SGLang or its CPU runtime cannot be imported.
    """
    return build_unified_mamba_bundle(total_bytes=total_bytes, page_size=page_size,
                                      lazy=lazy).token_to_kv_pool_allocator


def build_unified_mamba_bundle(*, total_bytes: int, page_size: int, lazy: bool) -> Any:
    """SGLang's whole pool bundle of :func:`build_unified_mamba` (its
    ``token_to_kv_pool_allocator``, ``token_to_kv_pool``, ``req_to_token_pool`` with the state
    slots' ``mamba_allocator`` and ``mamba_pool``)."""
    import torch

    load_unified()
    pools = importlib.import_module(POOLS)
    config = SimpleNamespace(
        shape=SimpleNamespace(conv=[(3, 8)], temporal=(1, 4, 8)),
        dtype=SimpleNamespace(conv=torch.bfloat16, temporal=torch.float32), layers=[1])
    bundle = pools.init_unified_mamba_pools(
        device="cpu", kv_cache_dtype=torch.float16, head_num=1, head_dim=8, v_head_dim=8,
        page_size=page_size, start_layer=0, end_layer=2, is_draft_worker=False,
        use_mla_backend=False, mamba_layer_ids=[1], full_attention_layer_ids=[0],
        mamba2_cache_params=config, model_context_len=64 * page_size, extra_max_context_len=1,
        max_total_num_tokens=100 * page_size, max_mamba_cache_size=MAX_STATE_SLOTS,
        max_num_reqs=4, enable_memory_saver=False, enable_mamba_extra_buffer=False,
        enable_mamba_extra_buffer_lazy=False, speculative_num_draft_tokens=None,
        disable_overlap_schedule=True, need_sort=False, lazy_compaction=lazy,
        unified_total_bytes=total_bytes)
    return bundle


# -- SGLang's composite, read (the only place of the family that reads its private fields) ------
MEMBERS = (("state", "mamba_allocator"), ("full", "full_attn_allocator"))
COMPOSITE = "sglang.srt.mem_cache.allocator.unified_mamba"
CLASS = "UnifiedMambaTokenToKVPoolAllocator"


def is_sglang_unified_mamba(target: Any) -> bool:
    """Whether ``target`` is SGLang's ``UnifiedMambaTokenToKVPoolAllocator`` (its module
    already imported: nothing is imported here)."""
    import sys

    cls = getattr(sys.modules.get(COMPOSITE), CLASS, None)
    return isinstance(cls, type) and isinstance(target, cls)


def _end_state(name: str, sub: Any) -> SubPoolState:
    """One ``MultiEndedAllocator`` end in the protocol's terms: its span runs from its end to
    its frontier (``[min_page, watermark)`` growing up, ``(watermark, num_pages)`` growing
    down), its holes are ``_free_phys_pages`` and the pages ``_pending_reuse`` holds back, its
    bindings the live rows of ``virtual_to_physical`` (the anchor 0 and the sentinel aside)."""
    held = tuple(sorted(int(p) for p in sub._pending_reuse_pages_cpu))
    holes = [int(p) for p in sub._free_phys_pages.tolist()]
    v2p = sub.virtual_to_physical.tolist()
    if sub.grow_direction == "up":
        low, high = int(sub.min_page_index), int(sub.watermark_physical)
    else:
        low, high = int(sub.watermark_physical) + 1, int(sub.num_pages)
    return SubPoolState(
        name=name, grow=str(sub.grow_direction), page_bytes=int(sub.entry_bytes_per_page),
        num_pages=int(sub.num_pages), min_page=int(sub.min_page_index), span_low=low,
        span_high=high, holes=tuple(sorted(holes + list(held))),
        bindings={v: int(p) for v, p in enumerate(v2p[1:-1], start=1) if p >= 0},
        lazy=bool(sub.lazy_compaction), drains=not sub.moves_blocked(), held_back=held)


def sglang_mamba_state(target: Any) -> UnifiedState:
    """SGLang's composite as a :class:`~kvpool.spec.unified_state.UnifiedState` with sides
    ``{"state", "full"}`` (``free_virtual``: the full end's free virtual page ids)."""
    sides = {name: _end_state(name, getattr(target, attr)) for name, attr in MEMBERS}
    full = target.full_attn_allocator
    free = full.free_virtual_ids
    return UnifiedState(
        page_size=int(target.page_size), total_bytes=int(target.unified_buffer.total_bytes),
        sides=sides, free_virtual=tuple(int(v) for v in free.tolist()) if free is not None
        else (), full_static_tokens=int(target.size_full), swa_static_tokens=0)


def free_state_ids(target: Any) -> list[int] | None:
    """The state end's free slot ids in hand-out order: kvpool's ``free_state_ids()`` where it
    has one, SGLang's ``mamba_allocator.free_virtual_ids``; None when neither shows them."""
    own = getattr(target, "free_state_ids", None)
    if callable(own):
        return [int(s) for s in own()]
    if is_sglang_unified_mamba(target):
        free = target.mamba_allocator.free_virtual_ids
        return [] if free is None else [int(s) for s in free.tolist()]
    return None


def mamba_state_of(target: Any) -> UnifiedState:
    """``target``'s introspection snapshot: its ``unified_state()``, else SGLang's adapter.

    Raises:
        OracleError: the target provides no ``unified_state()`` and is not SGLang's composite.
    """
    own = getattr(target, "unified_state", None)
    if callable(own):
        state = own()
        if not isinstance(state, UnifiedState):
            raise OracleError(f"{type(target).__name__}.unified_state() returned "
                              f"{type(state).__name__}, not UnifiedState")
        return state
    if is_sglang_unified_mamba(target):
        return sglang_mamba_state(target)
    raise OracleError(
        f"{type(target).__module__}.{type(target).__name__} provides no unified_state(): the "
        "unified_mamba family reads a target's two ends (spans, holes, bindings) through "
        "kvpool.spec.unified_state.UnifiedState (docs/unified-mamba.md)")


def plant_sglang(target: Any, fault: str) -> bool:
    """Put SGLang's composite into the unhealthy state ``fault`` by writing its tables:
    ``frontier_cross`` pushes the state end's frontier two slots past full's low frontier;
    ``stale_binding:full`` points the lowest live full virtual page at the next one's physical
    page (False with fewer than two live pages); anything else: False."""
    ma, fa = target.mamba_allocator, target.full_attn_allocator
    if fault == "frontier_cross":
        full_low = (int(fa.watermark_physical) + 1) * int(fa.entry_bytes_per_page)
        ma.watermark_physical = full_low // int(ma.entry_bytes_per_page) + 2
        return True
    if fault != "stale_binding:full":
        return False
    live = sorted(_end_state("full", fa).bindings)
    if len(live) < 2:
        return False
    table = fa.virtual_to_physical
    table[live[0]] = table[live[1]]
    return True
