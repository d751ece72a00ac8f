"""kvpool's unified full + SWA memory pool as SGLang's ``UnifiedSWATokenToKVPoolAllocator``.

:class:`UnifiedSWATokenToKVPoolAllocator` is :class:`kvpool.impl.unified_swa.UnifiedSWAAllocator`
with SGLang 0.5.23's constructor (``unified_buffer=``, ``kvcache=``, ...), built over SGLang's own
``UnifiedKVPool`` / ``UnifiedSWAKVPool``: every page copy and zeroing goes through the
``UnifiedSWAKVPool``'s sub-pools (``move_physical_pages`` / ``zero_physical_pages``), so SGLang's
attention backends read the bytes kvpool placed, and ``get_kvcache()`` is that pool. The pool's
translations (``translate_loc_from_full_to_swa``, the host-transfer translate) are wired to
kvpool's (:class:`SideTranslator`). kvpool owns the allocation, frees, translations, capacity
gate, eviction plan and compaction; SGLang's scheduler-facing hooks that only read those
(:data:`SGLANG_UNIFIED_HOOKS`: the prefill budget, ``can_reserve``, the prealloc checks,
``max_new_tokens_for_memory``, ...) and its base class's remaining hooks are SGLang's own.

``install()`` (:mod:`kvpool.integrations.sglang`) makes SGLang's ``init_unified_swa_pools`` build
this class (the tri-pool and the full + Mamba pool have their own modules). Importing this
module registers the class as a virtual subclass of SGLang's ``UnifiedSWATokenToKVPoolAllocator``
(and so of ``UnifiedSWAAllocatorBase``): SGLang's unified radix cache and index translator test
for them by class. kvpool keeps the page tables on the host, so on another device the class
builds SGLang's own composite and warns
(:class:`~kvpool.integrations.sglang_fallback.SGLangWhereKvpoolCannot`).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch
from kvpool.impl.unified_end import EndSubPool
from kvpool.impl.unified_external import ExternalKVStore
from kvpool.impl.unified_store import SideLayout
from kvpool.impl.unified_swa import UnifiedSWAAllocator
from sglang.srt.mem_cache.allocator.base import BaseTokenToKVPoolAllocator as _Base
from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator as _SglangSWA
from sglang.srt.mem_cache.allocator.unified_hybrid_swa import (
    UnifiedSWAAllocatorBase as _SglangUnifiedBase,
)
from sglang.srt.mem_cache.allocator.unified_hybrid_swa import (
    UnifiedSWATokenToKVPoolAllocator as _SglangUnified,
)

from .sglang_fallback import SGLangWhereKvpoolCannot

__all__ = ["NOT_SERVED", "SGLANG_UNIFIED_HOOKS", "SGLangUnifiedSurface", "SideTranslator",
           "UnifiedSWATokenToKVPoolAllocator", "sglang_hook", "sglang_layouts"]

# SGLang's hooks of its unified composite that read only the composite's public views.
SGLANG_UNIFIED_HOOKS: frozenset[str] = frozenset({
    "can_reserve", "create_prefill_budget", "get_extend_allocation_demand",
    "max_new_tokens_for_memory", "prealloc_ceiling_fits", "prealloc_fits",
    "prealloc_fits_assumes_reclaim", "reclaim_for_prealloc", "swa_capacity_and_available",
    "swa_req_ring", "swa_ring_cost_tokens",
})


# Public names of SGLang 0.5.23's unified composite this class does not serve: nothing outside
# SGLang's allocator package reads them (its own byte views, a static-SWA parent hook).
NOT_SERVED: frozenset[str] = frozenset({
    "new_pages_available", "schedulable_full_available_size", "schedulable_swa_available_size",
})


class SideTranslator:
    """What SGLang's ``UnifiedSWAKVPool`` and unified radix cache ask of a sub-allocator,
    answered from kvpool's side ``pool``: ``translate_kv_loc`` (virtual token ids ->
    physical rows), ``free`` / ``free_segment`` of this side, ``available_size``,
    ``virtual_to_physical`` (the page table as a tensor: on the CPU it shares
    kvpool's memory, so SGLang's in-place edits are kvpool's), ``bind`` (rebinding a physical
    page to another virtual page, the SWA transfer of the radix cache) and
    ``clear_inverse_history`` (nothing to clear); ``entry_bytes`` is one token's bytes."""

    def __init__(self, allocator: UnifiedSWAAllocator, pool: EndSubPool, swa: bool) -> None:
        self.allocator, self.pool, self.swa = allocator, pool, swa
        self.page_size = allocator.page_size
        self.entry_bytes = pool.page_bytes // allocator.page_size

    def translate_kv_loc(self, virt_tokens: torch.Tensor, *,
                         out: torch.Tensor | None = None) -> torch.Tensor:
        if self.swa:
            rows: torch.Tensor = self.allocator.translate_loc_from_full_to_swa(virt_tokens,
                                                                                out=out)
        else:
            rows = self.allocator.translate_kv_loc(virt_tokens, out=out)
        return rows

    @property
    def virtual_to_physical(self) -> torch.Tensor:
        return torch.from_numpy(self.pool.v2p)

    def bind(self, virtual_pages: torch.Tensor, physical_pages: torch.Tensor) -> None:
        """Bind ``virtual_pages[i]`` to ``physical_pages[i]``; a physical page bound to another
        virtual page moves (that one's entry is left for the caller to clear), so the live
        count only grows by pages that were unbound."""
        virtual = virtual_pages.cpu().numpy().astype(np.int64)
        physical = physical_pages.cpu().numpy().astype(np.int64)
        fresh = int((self.pool.p2v[physical] < 0).sum())
        self.pool.v2p[virtual] = physical
        self.pool.p2v[physical] = virtual
        self.pool.live += fresh

    def clear_inverse_history(self) -> None:
        return None

    def free(self, free_index: torch.Tensor) -> None:
        """Release the virtual tokens' pages as SGLang's sub-allocator ``free`` does: at once,
        the freed ids recycled in ascending page order (in the given order under lazy
        compaction at page size 1). The full side releases through the composite's ``free``
        (both sides where the SWA side is still bound: SGLang's tree frees a node's two sides
        one after the other, in either order); the SWA side through ``free_swa``. Inside an
        open free group kvpool's frees wait for its end where SGLang's sub-allocator frees at
        once (SGLang's tree evicts outside groups)."""
        if self.swa:
            self.allocator.free_swa(free_index)
        elif self.page_size == 1 and self.allocator.lazy:
            self.allocator.free_segment(free_index, start_pos=0)
        else:
            self.allocator.free(free_index)

    def free_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        """SGLang's sub-allocator ``free_segment``: :meth:`free` at page size 1, else the
        segment's pages in the given order."""
        if self.swa:
            self.allocator.free_swa_segment(free_index, start_pos=start_pos)
        elif self.page_size == 1:
            self.free(free_index)
        else:
            self.allocator.free_segment(free_index, start_pos=start_pos)

    def available_size(self) -> int:
        """The composite's view of this side (``full_`` / ``swa_available_size``)."""
        if self.swa:
            return int(self.allocator.swa_available_size())
        return int(self.allocator.full_available_size())


def sglang_hook(name: str, *sources: type) -> Any:
    """SGLang's function ``name`` from the first of ``sources`` (default: its full + SWA
    composite, the unified base, the static SWA allocator) that defines it."""
    for source in sources or (_SglangUnified, _SglangUnifiedBase, _SglangSWA):
        if name in vars(source):
            return vars(source)[name]
    raise AttributeError(name)


def sglang_layouts(unified_buffer: Any, names: tuple[str, ...] = ("full", "swa")
                   ) -> dict[str, SideLayout]:
    """kvpool's layout of each token sub-pool of SGLang's ``UnifiedKVPool``: one layer of its
    entry bytes (32-byte aligned).

    Raises:
        ValueError: an entry that is not 32-byte aligned.
    """
    layouts = {}
    for name in names:
        entry = int(unified_buffer.spec(name).entry_bytes())
        layouts[name] = SideLayout(layer_num=1, head_num=1, head_dim=entry // 4)
        if layouts[name].entry_bytes != entry:
            raise ValueError(f"SGLang's {name} entries of {entry} bytes are not 32-byte aligned")
    return layouts


class SGLangUnifiedSurface:
    """What kvpool's unified pools (full + SWA, and the tri-pool) add to sit in SGLang: the
    wiring to SGLang's ``UnifiedSWAKVPool`` (:meth:`_attach_sglang`), the page tables SGLang's
    index translator reads, forward events, and SGLang's views over kvpool's state. Mixed in
    before the kvpool allocator class."""

    full: EndSubPool
    swa: Any
    store: Any
    page_size: int
    device: torch.device
    full_max_tokens: int
    swa_max_tokens: int
    translate_kv_loc: Any
    full_available_size: Any
    swa_available_size: Any

    def _attach_sglang(self, unified_buffer: Any, kvcache: Any, need_sort: bool,
                       swa_cap_given: bool) -> None:
        """Check kvpool's geometry against SGLang's pool, then wire SGLang's pool to kvpool:
        its sub-allocators (:class:`SideTranslator`), host capacities and host-transfer
        translation.

        Raises:
            ValueError: SGLang places a sub-pool's pages other than kvpool's geometry.
        """
        ps = self.page_size
        for name, pool in (("full", self.full), ("swa", self.swa)):
            # SGLang's first page: the sink's slots rounded up to whole pages
            if (unified_buffer.max_slots(name) // ps != pool.num_pages
                    or -(-unified_buffer.min_slot_index(name) // ps) != pool.min_page):
                raise ValueError(f"SGLang's {name} sub-pool: {unified_buffer.max_slots(name)} "
                                 f"slots from {unified_buffer.min_slot_index(name)}, kvpool's "
                                 f"{pool.num_pages} pages from {pool.min_page}")
        if not swa_cap_given:  # SGLang: the SWA side also bounded by the ids
            self.swa_max_tokens = min(self.swa_max_tokens, self.full_max_tokens)
        self.unified_buffer, self._kvcache, self.need_sort = unified_buffer, kvcache, need_sort
        self.external_store = cast(ExternalKVStore, self.store)  # built over kvcache
        self.dtype = unified_buffer.mha_spec("full").store_dtype
        owner = cast(UnifiedSWAAllocator, self)
        self.full_attn_allocator = SideTranslator(owner, self.full, swa=False)
        self.swa_attn_allocator = SideTranslator(owner, self.swa, swa=True)
        kvcache.attach_allocators(full_allocator=self.full_attn_allocator,
                                  swa_allocator=self.swa_attn_allocator)
        for name, tokens in (("full", self.full_max_tokens), ("swa", self.swa_max_tokens)):
            pool = getattr(kvcache, f"{name}_kv_pool")
            pool.host_capacity_tokens = tokens
            pool.host_capacity_bytes = tokens * unified_buffer.spec(name).entry_bytes()
        kvcache.full_kv_pool.host_transfer_translate = self.translate_kv_loc

    def get_kvcache(self) -> Any:
        """SGLang's ``UnifiedSWAKVPool`` this pool drives."""
        return self._kvcache

    # -- what SGLang's model runner, scheduler and index translator call --

    def _page_table(self, table: np.ndarray) -> torch.Tensor:
        if self.device.type != "cpu":
            raise NotImplementedError("kvpool keeps the unified pool's page tables on the host; "
                                      f"SGLang's index translator on {self.device} needs a "
                                      "device copy")
        return torch.from_numpy(table)

    @property
    def full_v2p_page_table(self) -> torch.Tensor:
        """The full side's virtual -> physical page table (``-1`` unbound), a live view of
        kvpool's (host only). Raises NotImplementedError on another device."""
        return self._page_table(self.full.v2p)

    @property
    def swa_v2p_page_table(self) -> torch.Tensor:
        """The SWA side's table, as :attr:`full_v2p_page_table`."""
        return self._page_table(self.swa.v2p)

    @property
    def full_p2v_page_table(self) -> torch.Tensor:
        """The full side's physical -> virtual page table (``-1`` free), host only."""
        return self._page_table(self.full.p2v)

    @property
    def draft_virtual_id_space(self) -> int:
        """Virtual token ids a fused draft model may address (SGLang's: the full side's
        slots less the sink)."""
        return int(self.unified_buffer.max_slots("full")) - 1

    def is_slot_allocated(self, slot: int) -> bool:
        """Whether virtual token id ``slot`` is live (its page bound on the full side)."""
        page = int(slot) // self.page_size
        return 0 <= page < len(self.full.v2p) and bool(self.full.v2p[page] >= 0)

    def allocator_state_str(self) -> str:
        """One line: live pages, holes and frontiers of both sides."""
        return " ".join(f"{pool.name}: live={pool.live} holes={pool.num_holes()} "
                        f"span={pool.span()}" for pool in (self.full, self.swa))

    def set_full_to_swa_mapping(self, full_indices: torch.Tensor,
                                swa_indices: torch.Tensor) -> None:
        """Bind the SWA pages of ``swa_indices`` to the virtual pages of ``full_indices`` (the
        tree's SWA recovery; SGLang's composite does the same through its sub-allocator)."""
        if full_indices.numel():
            ps = self.page_size
            self.swa_attn_allocator.bind(full_indices.to(torch.int64) // ps,
                                         swa_indices.to(torch.int64) // ps)

    def clear_full_to_swa_mapping(self, full_indices: torch.Tensor) -> None:
        """Nothing: the SWA side's page table is the mapping (as SGLang's composite)."""
        return None

    def set_latest_forward_done_event(self, event: Any) -> None:
        """The latest forward's event: page copies and zeroing on a GPU wait for it."""
        self.external_store.set_forward_done_event(event)

    def set_inflight_forward(self, forward_done: Any, out_cache_loc_virtual: Any) -> None:
        """As :meth:`set_latest_forward_done_event` (every move waits for the forward, not
        only those touching its write set: SGLang's finer classification is not kept)."""
        self.external_store.set_forward_done_event(forward_done)

    def prewarm_compaction(self) -> None:
        """On a GPU, launch each sub-pool's page copy once on the reserved sink page 0 (onto
        itself), as SGLang does before sizing the KV cache; nothing on the host."""
        if self.device.type != "cuda":
            return
        sink = torch.zeros(2, dtype=torch.int64, device=self.device)
        for pool in (self._kvcache.full_kv_pool, self._kvcache.swa_kv_pool):
            pool.move_physical_pages(sink, sink, self.page_size)

    # -- SGLang's views over kvpool's state --

    def conserve_full_available_size(self) -> int:
        """The full side's static cap less its live tokens (SGLang's leak-check view)."""
        return int(self.full_max_tokens - self.full.live * self.page_size)

    def conserve_swa_available_size(self) -> int:
        return int(self.swa_max_tokens - self.swa.live * self.page_size)

    @property
    def current_full_capacity(self) -> int:
        return int(self.full_available_size() + self.full.live * self.page_size)

    @property
    def current_swa_capacity(self) -> int:
        return int(self.swa_available_size() + self.swa.live * self.page_size)

class UnifiedSWATokenToKVPoolAllocator(SGLangWhereKvpoolCannot, SGLangUnifiedSurface,
                                       UnifiedSWAAllocator, _Base):  # type: ignore[misc]
    """SGLang's ``UnifiedSWATokenToKVPoolAllocator`` on kvpool's unified pool (same
    signature; module docstring). ``checked`` (kvpool's id validation) is off unless asked for.
    Off the CPU, SGLang's own composite is built (:class:`SGLangWhereKvpoolCannot`).

    Raises:
        ValueError: one of the two legacy capacities given without the other (as SGLang), or
            SGLang's pool places a sub-pool's pages other than kvpool's geometry (a fused draft
            region).
    """

    _swa_req_ring = False  # SGLang's SWA request ring is not used by the unified pool
    _swa_ring_cost = 0
    sglang_class = _SglangUnified

    def __init__(self, *, unified_buffer: Any, kvcache: Any, device: str,
                 full_max_total_num_tokens: int | None = None,
                 swa_max_total_num_tokens: int | None = None, page_size: int = 1,
                 need_sort: bool = False, forward_stream: Any = None,
                 lazy_compaction: bool = False, checked: bool = False) -> None:
        if (full_max_total_num_tokens is None) != (swa_max_total_num_tokens is None):
            raise ValueError("full_max_total_num_tokens and swa_max_total_num_tokens must "
                             "either both be set or both be omitted")
        layouts = sglang_layouts(unified_buffer)
        super().__init__(unified_buffer.total_bytes, page_size, full_layout=layouts["full"],
                         swa_layout=layouts["swa"], lazy=lazy_compaction,
                         full_max_total_num_tokens=full_max_total_num_tokens,
                         swa_max_total_num_tokens=swa_max_total_num_tokens, device=device,
                         checked=checked, need_sort=need_sort, kv_store=kvcache)
        self._attach_sglang(unified_buffer, kvcache, need_sort,
                            swa_max_total_num_tokens is not None)
        self.free_pages = torch.empty(0, dtype=torch.int64, device=device)  # SGLang's leak
        self.release_pages = torch.empty(0, dtype=torch.int64, device=device)  # checker's

    def reclaim_plan(self, full_tokens: int, swa_tokens: int, *,
                     full_evictable_tokens: int = 0, swa_evictable_tokens: int = 0,
                     empty_pool: bool = False, prefer_swa: bool = False
                     ) -> tuple[int, int] | None:
        """kvpool's plan with SGLang's two extra switches: ``empty_pool`` prices compaction
        as allowed whatever the move gate says; ``prefer_swa`` (HiCache storage, a decode
        node) trims the SWA reclaim last instead of the full one."""
        if not (empty_pool or prefer_swa):
            plan: tuple[int, int] | None = super().reclaim_plan(
                full_tokens, swa_tokens, full_evictable_tokens=full_evictable_tokens,
                swa_evictable_tokens=swa_evictable_tokens)
            return plan
        if full_tokens < 0 or swa_tokens < 0:
            return None
        ps = self.page_size
        full_pages, swa_pages = -(-int(full_tokens) // ps), -(-int(swa_tokens) // ps)
        compacted = empty_pool or not self.lazy or not self.moves_blocked()

        def ok(full: int, swa: int) -> bool:
            return bool(self.fits(full_pages, swa_pages, compacted=compacted,
                                  full_reclaim=full, swa_reclaim=swa))

        if ok(0, 0):
            return (0, 0)
        most_full = min(self.full.live, max(0, full_evictable_tokens) // ps)
        most_swa = min(self.swa.live, max(0, swa_evictable_tokens) // ps)
        if not ok(most_full, most_swa):
            return None
        if prefer_swa:
            full = _least(most_full, lambda n: ok(n, most_swa))
            return full * ps, _least(most_swa, lambda n: ok(full, n)) * ps
        swa = _least(most_swa, lambda n: ok(most_full, n))
        return _least(most_full, lambda n: ok(n, swa)) * ps, swa * ps


def _least(high: int, predicate: Any) -> int:
    """The least ``n`` in ``[0, high]`` with ``predicate(n)`` (monotone, true at ``high``)."""
    low = 0
    while low < high:
        mid = (low + high) // 2
        if predicate(mid):
            high = mid
        else:
            low = mid + 1
    return low


for _name in SGLANG_UNIFIED_HOOKS:
    setattr(UnifiedSWATokenToKVPoolAllocator, _name, sglang_hook(_name))

# isinstance(x, SGLang's composite or its base) holds for this class (an ABC registration)
_SglangUnified.register(UnifiedSWATokenToKVPoolAllocator)
