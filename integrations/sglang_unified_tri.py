"""kvpool's tri-pool as SGLang's ``UnifiedMambaSWATokenToKVPoolAllocator``.

:class:`UnifiedMambaSWATokenToKVPoolAllocator` is :class:`kvpool.impl.unified_tri.
UnifiedMambaSWAAllocator` with SGLang 0.5.23's constructor (``unified_buffer=``, ``kvcache=``,
``mamba_kvcache=``, ...), built over SGLang's own ``UnifiedKVPool``, ``UnifiedSWAKVPool`` and
``UnifiedMambaPool``: every full and SWA page copy and zeroing goes through the
``UnifiedSWAKVPool``'s sub-pools, every state slot copy through the ``UnifiedMambaPool``'s
``move_physical_pages``, so SGLang's attention backends and Mamba layers read the bytes kvpool
placed. The full and SWA wiring is the full + SWA composite's
(:class:`~kvpool.integrations.sglang_unified.SGLangUnifiedSurface`); the state end is
:attr:`~UnifiedMambaSWATokenToKVPoolAllocator.mamba_allocator`, a
:class:`~kvpool.integrations.sglang_state_end.SGLangStateEnd` with
the surface SGLang's ``UnifiedMambaSlotAllocator`` (the request pool's ``mamba_allocator``), its
scheduler and invariant checker read. SGLang's scheduler-facing hooks of its tri-pool that read
only public views (:data:`SGLANG_TRI_HOOKS`) are SGLang's own; the page-demand test they call
(``_fits_page_demand``) is kvpool's (``spec.unified_float.fits_on_chain``).

``install()`` (:mod:`kvpool.integrations.sglang`) makes SGLang's ``init_unified_mamba_swa_pools``
build this class. Importing this module registers it as a virtual subclass of SGLang's
``UnifiedMambaSWATokenToKVPoolAllocator`` (and so of ``UnifiedSWAAllocatorBase``). Off the CPU
the class builds SGLang's own tri-pool and warns
(:class:`~kvpool.integrations.sglang_fallback.SGLangWhereKvpoolCannot`).
"""

from __future__ import annotations

from typing import Any

import torch
from kvpool.impl.unified_tri import UnifiedMambaSWAAllocator
from kvpool.spec.unified_float import fits_on_chain
from sglang.srt.mem_cache.allocator.base import BaseTokenToKVPoolAllocator as _Base
from sglang.srt.mem_cache.allocator.unified_hybrid_swa import (
    UnifiedMambaSWATokenToKVPoolAllocator as _SglangTri,
)

from .sglang_fallback import SGLangWhereKvpoolCannot
from .sglang_state_end import SGLangStateEnd
from .sglang_unified import SGLANG_UNIFIED_HOOKS, SGLangUnifiedSurface, sglang_hook, sglang_layouts

__all__ = ["SGLANG_TRI_HOOKS", "TRI_NOT_SERVED", "UnifiedMambaSWATokenToKVPoolAllocator"]

# SGLang's hooks of its tri-pool (resolved as on SGLang's class) that read only public views
# and ``_fits_page_demand``.
SGLANG_TRI_HOOKS: frozenset[str] = SGLANG_UNIFIED_HOOKS | frozenset({
    "can_reserve", "create_prefill_budget", "get_extend_allocation_demand",
    "max_new_tokens_for_memory", "prealloc_fits", "swa_capacity_and_available"})

# Public names of SGLang 0.5.23's tri-pool this class does not serve: nothing outside SGLang's
# allocator package reads it (a static-SWA parent hook).
TRI_NOT_SERVED: frozenset[str] = frozenset({"new_pages_available"})


class UnifiedMambaSWATokenToKVPoolAllocator(
        SGLangWhereKvpoolCannot, SGLangUnifiedSurface,
        UnifiedMambaSWAAllocator, _Base):  # type: ignore[misc]
    """SGLang's ``UnifiedMambaSWATokenToKVPoolAllocator`` on kvpool's tri-pool (same
    signature; module docstring). ``checked`` (kvpool's id validation) is off unless asked for.
    Off the CPU, SGLang's own tri-pool is built (:class:`SGLangWhereKvpoolCannot`).

    Raises:
        ValueError: SGLang's pool places a sub-pool's pages other than kvpool's geometry (a
            fused draft region), or its entries are not 32-byte aligned.
    """

    _swa_req_ring = False  # SGLang's SWA request ring is not used by the unified pool
    _swa_ring_cost = 0
    sglang_class = _SglangTri

    def __init__(self, *, unified_buffer: Any, kvcache: Any, mamba_kvcache: Any, device: str,
                 full_max_total_num_tokens: int, swa_max_total_num_tokens: int,
                 page_size: int = 1, need_sort: bool = False, forward_stream: Any = None,
                 lazy_compaction: bool = False, checked: bool = False) -> None:
        layouts = sglang_layouts(unified_buffer)
        super().__init__(unified_buffer.total_bytes, page_size, full_layout=layouts["full"],
                         swa_layout=layouts["swa"],
                         state_bytes=int(unified_buffer.spec("mamba").entry_bytes()),
                         lazy=lazy_compaction,
                         full_max_total_num_tokens=full_max_total_num_tokens,
                         swa_max_total_num_tokens=swa_max_total_num_tokens, device=device,
                         checked=checked, need_sort=need_sort, kv_store=kvcache,
                         state_store=mamba_kvcache)
        if (unified_buffer.max_slots("mamba") != self.state.num_pages
                or unified_buffer.min_slot_index("mamba") != self.state.min_page):
            raise ValueError(f"SGLang's mamba sub-pool: {unified_buffer.max_slots('mamba')} "
                             f"slots from {unified_buffer.min_slot_index('mamba')}, kvpool's "
                             f"{self.state.num_pages} from {self.state.min_page}")
        self._attach_sglang(unified_buffer, kvcache, need_sort, swa_cap_given=True)
        self.mamba_kvcache = mamba_kvcache
        self.mamba_allocator = SGLangStateEnd(self)
        # None, as SGLang's tri-pool: its leak checker skips a census that would mix ids
        self.free_pages: torch.Tensor | None = None
        self.release_pages: torch.Tensor | None = None

    def _fits_page_demand(self, full_pages: int, swa_pages: int) -> bool:
        """Whether ``full_pages`` / ``swa_pages`` new pages fit the chain as it stands (SGLang's
        hooks' page-demand test; ``UNI-14``)."""
        return bool(fits_on_chain(self.float_chain(), full_pages, swa_pages))

    def full_tokens_before_mamba_recheck(self, target_size: int) -> int:
        """A lower bound of the full tokens to release before ``target_size`` state slots can
        fit: 0 when they fit the state end's schedulable view (as SGLang's)."""
        missing = max(0, target_size - int(self.state_schedulable_size()))
        if missing == 0:
            return 0
        full_entry = self.full.page_bytes // self.page_size
        return int(-(-((missing - 1) * self.state_bytes + 1) // full_entry))

    def mamba_full_cache_donor(self) -> UnifiedMambaSWATokenToKVPoolAllocator:
        """Itself: it flushes deferred full frees, bounds the full tokens before a state
        recheck and prepares state allocations (SGLang's ``MambaFullCacheDonor``)."""
        return self


for _name in SGLANG_TRI_HOOKS:
    setattr(UnifiedMambaSWATokenToKVPoolAllocator, _name,
            sglang_hook(_name, *_SglangTri.__mro__))

# isinstance(x, SGLang's tri-pool or its base) holds for this class (an ABC registration)
_SglangTri.register(UnifiedMambaSWATokenToKVPoolAllocator)
