"""kvpool's HiSparse allocator: SGLang 0.5.23's ``HiSparseTokenToKVPoolAllocator`` API (a
logical pool ``host_to_device_ratio`` times larger than a device-buffer pool, and the full ->
device mapping) on two of kvpool's paged allocators, with its caller errors checked
(``HSP-*``, SPEC.md section 20; model: :class:`kvpool.spec.hisparse.HiSparseModel`).

Both sides are :class:`~kvpool.impl.paged.PagedTokenToKVPoolAllocator` (SGLang's exact free
order); the mapping is an int64 tensor on ``device`` with SGLang's shape (``size * ratio +
page_size`` zeros and a trailing ``-1``) that ``kvcache.register_mapping`` receives, as
SGLang's constructor hands it. ``checked`` (default True) validates every call first on host
copies of the mapping and the free lists (O(pool) per call: a checking mode, not a fast path)
and raises ContractViolation naming the clause before anything changes (``ERR-1``).
"""

from __future__ import annotations

from typing import Any

import torch
from kvpool.spec import hisparse_sizing as sizing
from kvpool.spec.errors import ContractViolation
from kvpool.spec.hisparse import check_ratio
from kvpool.spec.layout import num_new_pages

from .hisparse_checks import HiSparseChecks
from .paged import PagedTokenToKVPoolAllocator


class HiSparseTokenToKVPoolAllocator(HiSparseChecks):
    """The HiSparse pair (see the module docstring). ``kvcache`` may be None; otherwise its
    ``register_mapping(mapping)`` is called once, as SGLang's constructor does."""

    def __init__(self, size: int, page_size: int, dtype: torch.dtype, device: Any,
                 kvcache: Any, need_sort: bool, host_to_device_ratio: int = 2, *,
                 checked: bool = True) -> None:
        if checked:
            check_ratio(size, page_size, host_to_device_ratio)
        self._kvcache = kvcache
        self._size_hisparse, self.ratio = size, host_to_device_ratio
        self._size_full: int = sizing.logical_size(size, host_to_device_ratio)
        self.compress_ratio = 1
        self.page_size, self.dtype, self.device = page_size, dtype, device
        self.need_sort, self.checked = need_sort, checked
        self.logical_attn_allocator: PagedTokenToKVPoolAllocator = PagedTokenToKVPoolAllocator(
            self._size_full, page_size, dtype, device, kvcache, need_sort)
        self.hisparse_attn_allocator: PagedTokenToKVPoolAllocator = PagedTokenToKVPoolAllocator(
            size, page_size, dtype, device, kvcache, need_sort)
        length = sizing.mapping_len(size, host_to_device_ratio, page_size)
        self.full_to_hisparse_device_index_mapping = torch.zeros(length, dtype=torch.int64,
                                                                 device=device)
        self.free_group: list[torch.Tensor] | None = None
        self._buffers: set[int] = set()  # device pages held as buffers (checked mode)
        self.clear()
        if kvcache is not None:
            kvcache.register_mapping(self.full_to_hisparse_device_index_mapping)

    # -- views -------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """The logical side's slots (``HSP-1``)."""
        return self._size_full

    @property
    def size_full(self) -> int:
        return self._size_full

    def available_size(self) -> int:
        """The smaller side's free tokens (``HSP-2``)."""
        return int(sizing.capacity(self.logical_attn_allocator.available_size(),
                                   self.hisparse_attn_allocator.available_size()))

    def get_kvcache(self) -> Any:
        return self._kvcache

    def get_last_loc_compressed(self, last_locs: torch.Tensor) -> torch.Tensor:
        """The identity (compress ratio 1, ``HSP-10``)."""
        return last_locs

    def get_last_loc_hisparse_device(self, last_locs: torch.Tensor) -> torch.Tensor:
        """``mapping[last_locs]``; ``-1`` reads the trailing ``-1`` (``HSP-10``)."""
        if self.checked:
            self._check_locs(last_locs)
        return self.full_to_hisparse_device_index_mapping[last_locs]

    # -- allocation --------------------------------------------------------------------------
    def alloc(self, need_size: int) -> torch.Tensor | None:
        """Page size 1: logical slots, then device slots, bound pairwise (``HSP-4``); a device
        shortage frees the logical slots again and returns None."""
        if self.page_size != 1 or need_size < 0:
            raise ContractViolation("HSP-4", f"alloc({need_size}) at page size {self.page_size}: "
                                             "page size 1 and a count >= 0 only")
        logical = self.logical_attn_allocator.alloc(need_size)
        if logical is None:
            return None
        device = self.hisparse_attn_allocator.alloc(need_size)
        if device is None:
            self.logical_attn_allocator.free(logical)
            return None
        self.full_to_hisparse_device_index_mapping[logical] = device
        return logical

    def alloc_extend(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                     seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor,
                     extend_num_tokens: int) -> torch.Tensor | None:
        """Both sides, the device ``last_loc`` read through the mapping, new slots bound in
        order; None, nothing changed, when either side lacks the batch's pages (``HSP-5``)."""
        if self.checked:
            self._check_extend(prefix_lens_cpu, seq_lens_cpu, last_loc, extend_num_tokens,
                               bind=True)
        ps = self.page_size
        need = sum(num_new_pages(int(p), int(s), ps)
                   for p, s in zip(prefix_lens_cpu.tolist(), seq_lens_cpu.tolist()))
        if (need > self.logical_attn_allocator.available_size() // ps
                or need > self.hisparse_attn_allocator.available_size() // ps):
            return None
        logical = self.logical_attn_allocator.alloc_extend(
            prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc, extend_num_tokens)
        assert logical is not None
        device_loc = self.full_to_hisparse_device_index_mapping[last_loc]
        # an aligned prefix's device last_loc is never read; the allocator's guard wants -1
        aligned = (prefix_lens % ps == 0)
        device_loc = torch.where(aligned & (prefix_lens > 0), torch.full_like(device_loc, -1),
                                 device_loc)
        zero = torch.zeros_like(prefix_lens)
        dev_prefix = torch.where(aligned, zero, prefix_lens)
        dev_seq = torch.where(aligned, seq_lens - prefix_lens, seq_lens)
        dev_prefix_cpu = torch.where(prefix_lens_cpu % ps == 0, torch.zeros_like(prefix_lens_cpu),
                                     prefix_lens_cpu)
        dev_seq_cpu = seq_lens_cpu - (prefix_lens_cpu - dev_prefix_cpu)
        device = self.hisparse_attn_allocator.alloc_extend(
            dev_prefix, dev_prefix_cpu, dev_seq, dev_seq_cpu, device_loc, int(logical.numel()),
            num_new_pages=need)
        assert device is not None
        self.full_to_hisparse_device_index_mapping[logical] = device
        return logical

    def alloc_logical_only(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                           seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                           last_loc: torch.Tensor, extend_num_tokens: int) -> torch.Tensor | None:
        """The logical side's ``alloc_extend`` only; the slots stay unbound (``HSP-6``)."""
        if self.checked:
            self._check_extend(prefix_lens_cpu, seq_lens_cpu, last_loc, extend_num_tokens,
                               bind=False)
        return self.logical_attn_allocator.alloc_extend(
            prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc, extend_num_tokens)

    def alloc_decode(self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                     last_loc: torch.Tensor) -> torch.Tensor | None:
        """The logical side's ``alloc_decode`` only; the slots stay unbound (``HSP-6``)."""
        if self.checked:
            self._check_decode(seq_lens_cpu, last_loc)
        return self.logical_attn_allocator.alloc_decode(seq_lens, seq_lens_cpu, last_loc)

    def alloc_device_buffer(self, allocated_indices: torch.Tensor, need_size: int
                            ) -> torch.Tensor:
        """The request's device buffer of ``need_size`` slots (``HSP-7``): its bound device
        slots unbound and reused in order, the surplus pages freed, or the last page padded and
        whole pages added."""
        mapping = self.full_to_hisparse_device_index_mapping
        if self.checked:
            self._check_device_buffer(allocated_indices, need_size)
        elif need_size % self.page_size:
            raise ContractViolation("HSP-7", f"need_size {need_size} is not a page multiple")
        bound = mapping[allocated_indices]
        bound = bound[bound > 0]
        surplus, pad, extra = sizing.device_buffer_split(int(bound.numel()), need_size,
                                                         self.page_size)
        more = self.hisparse_attn_allocator.alloc(extra) if extra else bound[:0]
        if more is None:
            free = self.hisparse_attn_allocator.available_size()
            raise ContractViolation("HSP-7", f"{extra} device slots needed, {free} free")
        mapping[allocated_indices] = 0
        if surplus or int(bound.numel()) == need_size:
            buffer = bound[:need_size].clone()
            self.free_hisparse_indices(bound[need_size:], _internal=True)
        else:
            tail = torch.arange(1, pad + 1, dtype=torch.int64, device=bound.device)
            padded = bound[-1] + tail if pad else bound[:0]
            buffer = torch.cat([bound, padded, more])
        if self.checked:
            self._buffers |= set((buffer // self.page_size).tolist())
        return buffer

    # -- release -----------------------------------------------------------------------------
    def free_hisparse_indices(self, buffer_indices: torch.Tensor, *,
                              _internal: bool = False) -> None:
        """Release the device pages of a held buffer; slots below ``page_size`` are skipped
        (``HSP-9``)."""
        kept = buffer_indices[buffer_indices >= self.page_size]
        if self.checked and not _internal:
            self._check_buffer_free(kept)
        if kept.numel():
            self.hisparse_attn_allocator.free(kept)
            if self.checked and not _internal:
                self._buffers -= set((kept // self.page_size).tolist())

    def free(self, free_index: torch.Tensor) -> None:
        """Release logical pages and the device pages of their bound slots, unbinding them
        (``HSP-8``); empty: nothing."""
        if free_index.numel() == 0:
            return
        if self.checked:
            self._check_free(free_index)
        mapping = self.full_to_hisparse_device_index_mapping
        bound = mapping[free_index]
        bound = bound[bound > 0]
        self.logical_attn_allocator.free(free_index)
        if bound.numel():
            self.hisparse_attn_allocator.free(bound[bound >= self.page_size])
        mapping[free_index] = 0

    def free_group_begin(self) -> None:
        """No deferral: every free is immediate (``HSP-11``)."""

    def free_group_end(self) -> None:
        """Nothing deferred to release (``HSP-11``)."""

    def clear(self) -> None:
        """Both sides whole, the mapping 0 but its trailing ``-1``, no buffers (``HSP-11``)."""
        self.logical_attn_allocator.clear()
        self.hisparse_attn_allocator.clear()
        self.full_to_hisparse_device_index_mapping.fill_(0)
        self.full_to_hisparse_device_index_mapping[-1] = -1
        self._buffers.clear()
        self.free_group = None

