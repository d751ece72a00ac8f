"""``SWATokenToKVPoolAllocator``: the hybrid sliding-window allocator on kvpool's engines.

Drop-in for SGLang 0.5.23's class, call for call equal to :class:`kvpool.spec.HybridModel`.
"""

from __future__ import annotations

from typing import Any

import torch
from kvpool.spec import hybrid_rules as hr
from kvpool.spec import rules
from kvpool.spec.errors import ContractViolation

from .checked import host_list
from .hooks import EvictRequest, SglangSurface
from .numpy_ops import check_host_batch
from .ownership import continued_decode, continued_extend
from .paged import PagedTokenToKVPoolAllocator
from .swa_census import HybridDiagnostics
from .swa_pairs import PairTable
from .swa_segments import SwaSegmentFrees
from .swa_tail import SwaTailAllocation
from .token import TokenToKVPoolAllocator


class SWATokenToKVPoolAllocator(HybridDiagnostics, SwaTailAllocation, SwaSegmentFrees,
                                SglangSurface):
    """Two kvpool allocators (full and SWA; token at page size 1, paged above) paged in step,
    joined by ``full_to_swa_index_mapping`` (:class:`~kvpool.impl.swa_pairs.PairTable`).

    Why: a sliding-window layer's KV dies when the token leaves the window while the full
    layers' KV lives on, so a token holds a slot in each pool with two lifetimes. Order: each
    side keeps its own reference order (token FIFO, paged LIFO, ``need_sort`` staging); the
    SWA side's releases follow SGLang's order exactly (``SWA-10``, ``SWA-14``, ``SWA-15``).

    Costs are O(slots moved) per call, never O(pool): ``free_swa`` gathers and clears the pairs
    of the full pages touched (O(k * page_size)) and releases the SWA pages into a preallocated
    free list. A refused ``alloc_decode`` changes neither side (``SWA-9``; SGLang 0.5.23 leaks
    the full side). No host-device sync in ``alloc_extend`` / ``alloc_decode`` /
    ``free_swa_segment`` / ``free_segment(s)`` when unchecked.

    What kvpool needs of ``kvcache`` (may be None): ``full_kv_pool`` and ``swa_kv_pool``
    (optional, handed to the two sides), ``register_mapping(tensor)`` (called with the mapping
    at construction and after ``resize``) and ``swa_req_ring_size`` absent or None: the
    per-request SWA ring mode is not supported (NotImplementedError). Translation reads the
    mapping directly (``mapping[idx]``, int64, as SGLang 0.5.23's ``SWAKVPool`` does), so kvpool
    never calls the pool's ``translate_loc_from_full_to_swa``. ``alloc_extend_swa_tail`` (PD
    decode pre-allocation, ``SWA-20``) comes from :class:`~kvpool.impl.swa_tail.SwaTailAllocation`,
    the segment frees (``SWA-12``, ``SWA-14``) from
    :class:`~kvpool.impl.swa_segments.SwaSegmentFrees`.

    ``checked=True``: every caller error (``FREE-*``, ``EXTEND-*``, ``SEG-*``, ``SWA-8/11/12/16``)
    raises ContractViolation before anything changes (host reads).
    """

    # The classes of the two sides (an integration substitutes its subclasses of these).
    token_allocator_class: type[TokenToKVPoolAllocator] = TokenToKVPoolAllocator
    paged_allocator_class: type[PagedTokenToKVPoolAllocator] = PagedTokenToKVPoolAllocator

    def __init__(self, size: int, size_swa: int, page_size: int, dtype: torch.dtype,
                 device: Any, kvcache: Any, need_sort: bool, req_to_token_pool: Any = None,
                 *, checked: bool = False) -> None:
        if getattr(kvcache, "swa_req_ring_size", None) is not None:
            raise NotImplementedError("kvpool's SWA allocator does not support the per-request "
                                      "SWA ring (kvcache.swa_req_ring_size is set)")
        self.page_size, self.dtype, self.device = page_size, dtype, device
        self.need_sort, self.checked = need_sort, checked
        self._kvcache, self._req_to_token_pool = kvcache, req_to_token_pool
        full_pool = getattr(kvcache, "full_kv_pool", None)
        swa_pool = getattr(kvcache, "swa_kv_pool", None)
        self.full_attn_allocator: TokenToKVPoolAllocator | PagedTokenToKVPoolAllocator
        self.swa_attn_allocator: TokenToKVPoolAllocator | PagedTokenToKVPoolAllocator
        if page_size == 1:
            token = self.token_allocator_class
            self.full_attn_allocator = token(size, dtype, device, full_pool, need_sort,
                                             checked=checked)
            self.swa_attn_allocator = token(size_swa, dtype, device, swa_pool, need_sort)
        else:
            paged = self.paged_allocator_class
            self.full_attn_allocator = paged(size, page_size, dtype, device, full_pool,
                                             need_sort, checked=checked)
            self.swa_attn_allocator = paged(size_swa, page_size, dtype, device, swa_pool,
                                            need_sort)
        self._pairs = PairTable(size, page_size, device)
        self.clear()

    # -- lifecycle (SWA-18) ------------------------------------------------------------------
    @property
    def full_to_swa_index_mapping(self) -> torch.Tensor:
        """SGLang's mapping tensor (``SWA-1``; registered with the KV pool at construction)."""
        return self._pairs.mapping

    @full_to_swa_index_mapping.setter
    def full_to_swa_index_mapping(self, mapping: torch.Tensor) -> None:
        """Use ``mapping`` (same shape, int64, same device) as the mapping from now on, as an
        assignment does on SGLang's allocator: the KV pool keeps the tensor it was given until
        ``register_mapping`` is called again. ContractViolation (``SWA-1``) otherwise."""
        self._pairs.rebind(mapping)

    def clear(self) -> None:
        """Both sides cleared, every pair released, no open group. O(size)."""
        self.swa_attn_allocator.clear()
        self.full_attn_allocator.clear()
        self._pairs.clear()
        self.free_group: list[torch.Tensor] | None = None
        self.swa_free_group: list[torch.Tensor] = []
        self.swa_page_ids_group: list[torch.Tensor] = []
        if self._kvcache is not None and hasattr(self._kvcache, "register_mapping"):
            self._kvcache.register_mapping(self._pairs.mapping)

    def resize(self, config: Any) -> None:
        """Sizes from ``config.full_max_total_num_tokens`` / ``swa_max_total_num_tokens``, then
        ``clear()``; the mapping is rebuilt (and registered again) for the new full size."""
        size, size_swa = int(config.full_max_total_num_tokens), int(config.swa_max_total_num_tokens)
        if self.checked:
            for value, name in ((size, "full size"), (size_swa, "swa size")):
                if value < 0:
                    raise ContractViolation("LIFE-2", f"{name} must be >= 0, got {value}")
        self.full_attn_allocator.size, self.swa_attn_allocator.size = size, size_swa
        self._pairs = PairTable(size, self.page_size, self.device)
        self.clear()

    # -- queries (SWA-5, SWA-16) -------------------------------------------------------------
    @property
    def size(self) -> int:  # type: ignore[override]  # read-only here, as in SGLang
        """``min(size_full, size_swa)`` (``SWA-5``)."""
        return min(self.size_full, self.size_swa)

    @property
    def size_full(self) -> int:
        return self.full_attn_allocator.size

    @property
    def size_swa(self) -> int:
        return self.swa_attn_allocator.size

    @property
    def swa_req_ring(self) -> bool:
        return False

    @property
    def swa_ring_cost_tokens(self) -> int:
        return 0

    def full_available_size(self) -> int:
        return self.full_attn_allocator.available_size()

    def swa_available_size(self) -> int:
        return self.swa_attn_allocator.available_size()

    def available_size(self) -> int:
        """``min(full, swa)`` (``SWA-5``). O(1)."""
        return min(self.full_available_size(), self.swa_available_size())

    def new_pages_available(self, num_full_pages: int, num_swa_pages: int) -> bool:
        """Whether both sides hold that many free + staged pages (host counters)."""
        ps = self.page_size
        return (num_full_pages <= self.full_available_size() // ps
                and num_swa_pages <= self.swa_available_size() // ps)

    def get_all_free_pages(self) -> None:
        """None, as SGLang's composite: each side has its own census."""
        return None

    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
        """``mapping[kv_indices]``, int64 whatever the input's dtype (SGLang 0.5.23's
        ``SWAKVPool``): 0 where released, -1 for -1 (``SWA-16``). O(k)."""
        if self.checked:
            table = self.full_attn_allocator._table
            assert table is not None
            hr.check_translate(host_list(kv_indices), table.status_of, self.page_size,
                               self.full_attn_allocator.num_pages)
        return self._pairs.mapping[kv_indices.to(torch.int64)]

    def translate_swa_indices_for_transfer(self, kv_indices: torch.Tensor) -> torch.Tensor:
        return self.translate_loc_from_full_to_swa(kv_indices)

    def set_full_to_swa_mapping(self, full_indices: torch.Tensor,
                                swa_indices: torch.Tensor) -> None:
        """Pair ``full_indices`` with ``swa_indices`` (SGLang's HiCache load-back path)."""
        assert full_indices.numel() == swa_indices.numel()
        self._pairs.set(full_indices, swa_indices)

    def clear_full_to_swa_mapping(self, full_indices: torch.Tensor) -> None:
        """Release the pairs of ``full_indices`` without freeing anything."""
        if full_indices.numel():
            self._pairs.take(full_indices)

    # -- allocation (SWA-6, SWA-7, SWA-9) ----------------------------------------------------
    def alloc(self, need_size: int) -> torch.Tensor | None:
        """Page size 1: slots on both sides, paired in order; None iff a side is short."""
        if self.page_size != 1:
            raise NotImplementedError("SWA-6: the hybrid alloc() is for page size 1")
        if self.checked:
            rules.check_alloc(need_size, 1)
        if need_size > self.full_available_size() or need_size > self.swa_available_size():
            return None
        full = self.full_attn_allocator.alloc(need_size)
        swa = self.swa_attn_allocator.alloc(need_size)
        assert full is not None and swa is not None
        self._pairs.set(full, swa)
        return full

    def alloc_extend(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                     seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor,
                     extend_num_tokens: int) -> torch.Tensor | None:
        """Both sides extend by the same pages; None iff a side is short, nothing changed."""
        if self.page_size == 1:
            raise NotImplementedError("SWA-7: alloc_extend is for page size > 1")
        full_side = self.full_attn_allocator
        if self.checked:  # the full side's rules, then SWA-8, before anything moves (ERR-1)
            assert full_side._table is not None
            full_side._table.check_extend(prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu,
                                          last_loc, extend_num_tokens, self.page_size)
            self._check_last_loc(host_list(prefix_lens_cpu), host_list(seq_lens_cpu), last_loc)
        elif full_side._owners is not None:  # the guard, on both sides before either moves
            check_host_batch(prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc,
                             extend_num_tokens)
            self._check_takes(continued_extend(prefix_lens, seq_lens, self.page_size), last_loc,
                              "EXTEND-3")
        num_new_pages = full_side._ops.extend_new_pages(prefix_lens_cpu, seq_lens_cpu)
        if not self.new_pages_available(num_new_pages, num_new_pages):
            return None
        swa_last_loc = self._pairs.gather(last_loc)
        full = full_side.alloc_extend(prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu,
                                      last_loc, extend_num_tokens, num_new_pages=num_new_pages)
        swa = self.swa_attn_allocator.alloc_extend(prefix_lens, prefix_lens_cpu, seq_lens,
                                                   seq_lens_cpu, swa_last_loc, extend_num_tokens,
                                                   num_new_pages=num_new_pages)
        assert full is not None and swa is not None
        self._pairs.set(full, swa)
        return full

    def alloc_decode(self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                     last_loc: torch.Tensor) -> torch.Tensor | None:
        """One slot per request on both sides; a refusal changes neither side (``SWA-9``)."""
        if self.page_size == 1:
            raise NotImplementedError("SWA-9: alloc_decode is for page size > 1")
        full_side = self.full_attn_allocator
        if self.checked:
            seq = host_list(seq_lens_cpu)
            assert full_side._table is not None
            full_side._table.check_decode(seq_lens, seq_lens_cpu, last_loc, self.page_size)
            self._check_last_loc([s - 1 for s in seq], seq, last_loc)
        elif full_side._owners is not None:  # the guard, on both sides before either moves
            check_host_batch(seq_lens, None, seq_lens, seq_lens_cpu, last_loc, None)
            self._check_takes(continued_decode(seq_lens, self.page_size), last_loc, "DECODE-3")
        num_new_pages = full_side._ops.decode_new_pages(seq_lens_cpu)
        if not self.new_pages_available(num_new_pages, num_new_pages):
            return None
        swa_last_loc = self._pairs.gather(last_loc)
        full = full_side.alloc_decode(seq_lens, seq_lens_cpu, last_loc)
        swa = self.swa_attn_allocator.alloc_decode(seq_lens, seq_lens_cpu, swa_last_loc)
        assert full is not None and swa is not None
        self._pairs.set(full, swa)
        return full

    def _check_takes(self, continued: Any, last_loc: torch.Tensor, clause: str) -> None:
        """Each side's guard on the ``last_loc`` its layout continues from (the SWA side's: the
        full slot's peer), before either side takes a page."""
        self.full_attn_allocator.check_take(continued, last_loc, clause)
        self.swa_attn_allocator.check_take(continued, self._pairs.gather(last_loc), clause)

    def _check_last_loc(self, prefix: list[int], seq: list[int], last_loc: torch.Tensor) -> None:
        hr.check_swa_last_loc(prefix, seq, self._peers(last_loc), self.page_size)

    def _peers(self, slots: torch.Tensor) -> list[int]:
        """Host copy of the mapped values of ``slots`` (checked mode; a sync on CUDA)."""
        return host_list(self._pairs.gather(slots))

    # -- release (SWA-10..15) ----------------------------------------------------------------
    def free_swa(self, free_index: torch.Tensor) -> None:
        """Release the SWA peers of the full pages ``free_index`` touches; clear their pairs."""
        if free_index.numel() == 0:
            return
        if self.checked:
            self._check_swa_release(free_index, "free_swa")
        else:  # the guard: live full pages, before the pairs or either side change
            self.full_attn_allocator.check_release_of(free_index)
        self._free_swa(free_index)

    def _free_swa(self, free_index: torch.Tensor) -> None:
        if self.page_size == 1:
            self._release_swa_page_ids(self._pairs.take(free_index))
            return
        if self.free_group is None:
            pages = self._pairs.take_peer_pages(free_index)
            if pages is not None:  # CPU: the sorted distinct pages, as the paged free() takes
                self.swa_attn_allocator.free_page_ids(pages)
                return
        peers = self._pairs.take(self._pairs.expand_to_full_pages(free_index))
        if self.free_group is not None:
            self.swa_free_group.append(peers)
        else:
            self._release_swa(peers)

    def free_full(self, free_index: torch.Tensor) -> None:
        """The full side alone; every slot's SWA peer must be gone (``SWA-12``)."""
        if free_index.numel() == 0:
            return
        if self.checked:
            slots = host_list(free_index)
            hr.check_slots(slots, self.page_size, self.full_attn_allocator.num_pages)
            hr.check_peers_released(slots, self._peers(free_index), "free_full")
        self.full_attn_allocator.free(free_index)  # guarded there, before any change

    def free(self, free_index: torch.Tensor) -> None:
        """``free_swa`` then ``free_full``, validated as one call (``SWA-13``)."""
        if free_index.numel() == 0:
            return
        if self.checked:
            self._check_swa_release(free_index, "free")
            table = self.full_attn_allocator._table
            assert table is not None
            table.check_free(free_index, paged=self.page_size > 1, page_size=self.page_size,
                             group_open=self.free_group is not None)
        elif self.free_group is None:  # the guard: the full side first, before any change
            self.full_attn_allocator.check_release_of(free_index)
        self._free_swa(free_index)
        self.full_attn_allocator.free(free_index)

    def _release_swa(self, peers: torch.Tensor) -> None:
        """Paged ``free()`` of the mapped peers (released entries dropped; a sync on CUDA)."""
        self.swa_attn_allocator.free(peers[peers > 0])

    def free_group_begin(self) -> None:
        """Open a group on both sides (``GROUP-1``, also unchecked)."""
        if self.free_group is not None:
            raise ContractViolation("GROUP-1", "free groups cannot be nested")
        self.full_attn_allocator.free_group_begin()
        self.free_group, self.swa_free_group, self.swa_page_ids_group = [], [], []

    def free_group_end(self) -> None:
        """SWA page ids, then SWA ``free()`` pages, then the full side (``SWA-15``)."""
        if self.free_group is None:
            return
        self.full_attn_allocator.check_group_end()  # the guard: before either side changes
        page_ids, freed = self.swa_page_ids_group, self.swa_free_group
        self.free_group, self.swa_free_group, self.swa_page_ids_group = None, [], []
        if page_ids:
            self.swa_attn_allocator.free_page_ids(torch.cat(page_ids))
        if freed:
            self._release_swa(torch.cat(freed))
        self.full_attn_allocator.free_group_end()

    # -- capacity hooks (SWA-17) -------------------------------------------------------------
    def evict_to_free_tokens(self, tree_cache: Any, num_tokens: int) -> None:
        """One eviction request with both shortfalls, only when one is positive.

        A cache with SGLang's ``evict_for_alloc`` gets ``EvictParams(num_tokens=,
        swa_num_tokens=)`` (an :class:`EvictRequest`); one without prefix sharing is not asked;
        the spec's protocol gets ``evict(full_shortfall, swa_shortfall)``.
        """
        if tree_cache is None:
            return
        sharing = getattr(tree_cache, "supports_prefix_sharing", None)
        if sharing is not None and not sharing():
            return
        full = max(0, num_tokens - self.full_available_size())
        swa = max(0, num_tokens - self.swa_available_size())
        if not (full or swa):
            return
        evict_for_alloc = getattr(tree_cache, "evict_for_alloc", None)
        if evict_for_alloc is not None:
            evict_for_alloc(EvictRequest(num_tokens=full, swa_num_tokens=swa))
        else:
            tree_cache.evict(full, swa)

    def check_decode_capacity(self, *, num_tokens: int, tree_cache: Any, requests: Any = None,
                              spec_algorithm: Any = None) -> bool:
        """Evict for ``num_tokens``, then whether both sides fit them (``SWA-17``)."""
        self.evict_to_free_tokens(tree_cache, num_tokens)
        return self.available_size() >= num_tokens
