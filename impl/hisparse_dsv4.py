"""kvpool's DeepSeek V4 HiSparse allocator: SGLang 0.5.23's
``DeepSeekV4HiSparseTokenToKVPoolAllocator`` API over a hybrid full + SWA logical side (kvpool's
or SGLang's ``SWATokenToKVPoolAllocator``) and a compressed (C4) device side on one of kvpool's
paged allocators (model: :class:`kvpool.spec.hisparse_dsv4.HiSparseDSV4Model`).

Every fourth position of a row is compressed: full slot ``f`` has compressed id ``f // 4`` when
``(f + 1) % 4 == 0``; the mapping (an int64 tensor of ``c4_logical_size + hps`` zeros and a
trailing ``-1``) binds compressed ids to device slots. The sizes come from the keywords or, as
SGLang reads them, from ``logical_attn_allocator._kvcache`` (its ``c4_kv_pool.size`` /
``.page_size`` and ``c4_logical_size``). A device buffer's size that is not a positive page
multiple, or a device side too short for it, raises ContractViolation (``HSP-16``) before
anything changes (SGLang asserts, or indexes outside the bound slots).
"""

from __future__ import annotations

from typing import Any

import torch
from kvpool.spec import hisparse_sizing as sizing
from kvpool.spec.errors import ContractViolation
from kvpool.spec.layout import num_new_pages

from .paged import PagedTokenToKVPoolAllocator

COMPRESS_RATIO = 4


def compressed_ids(slots: torch.Tensor) -> torch.Tensor:
    """``f // 4`` for each full slot ``f`` with ``(f + 1) % 4 == 0``, in order."""
    return slots[(slots + 1) % COMPRESS_RATIO == 0] // COMPRESS_RATIO


class DeepSeekV4HiSparseAllocator:
    """The DeepSeek V4 HiSparse pair (see the module docstring)."""

    compress_ratio = COMPRESS_RATIO

    def __init__(self, logical_attn_allocator: Any, *, size_hisparse: int | None = None,
                 hisparse_page_size: int | None = None, c4_logical_size: int | None = None
                 ) -> None:
        kvcache: Any = getattr(logical_attn_allocator, "_kvcache", None)
        c4: Any = getattr(kvcache, "c4_kv_pool", None)
        self.logical_attn_allocator = logical_attn_allocator
        self.page_size: int = logical_attn_allocator.page_size
        if self.page_size % COMPRESS_RATIO:
            raise ContractViolation("HSP-12", f"page size {self.page_size}: a multiple of 4")
        self.hisparse_page_size: int = int(hisparse_page_size or c4.page_size)
        self._size_hisparse = int(size_hisparse if size_hisparse is not None else c4.size)
        self.c4_logical_size = int(c4_logical_size if c4_logical_size is not None
                                   else kvcache.c4_logical_size)
        self.device = logical_attn_allocator.device
        self.need_sort = logical_attn_allocator.need_sort
        self.hisparse_attn_allocator = PagedTokenToKVPoolAllocator(
            self._size_hisparse, self.hisparse_page_size, torch.float16, self.device, c4,
            self.need_sort)
        self.full_to_hisparse_device_index_mapping = torch.zeros(
            self.c4_logical_size + self.hisparse_page_size + 1, dtype=torch.int64,
            device=self.device)
        self.free_group: list[torch.Tensor] | None = None
        self.full_free_group: list[torch.Tensor] = []
        self.clear()
        if c4 is not None and hasattr(c4, "register_mapping"):
            c4.register_mapping(self.full_to_hisparse_device_index_mapping)

    # -- views -------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return int(self.logical_attn_allocator.size)

    def _device_tokens(self) -> int:
        return int(self.hisparse_attn_allocator.available_size()) * COMPRESS_RATIO

    def available_size(self) -> int:
        """``min(logical, 4 * device)``."""
        return int(sizing.capacity(int(self.logical_attn_allocator.available_size()),
                                   self._device_tokens()))

    def full_available_size(self) -> int:
        """``min(full side, 4 * device)``."""
        return int(sizing.capacity(int(self.logical_attn_allocator.full_available_size()),
                                   self._device_tokens()))

    def swa_available_size(self) -> int:
        return int(self.logical_attn_allocator.swa_available_size())

    def get_last_loc_compressed(self, last_locs: torch.Tensor) -> torch.Tensor:
        """``(loc - 3) // 4``: the last complete compressed block; ``-1`` stays ``-1``."""
        return (last_locs - (COMPRESS_RATIO - 1)) // COMPRESS_RATIO

    def get_last_loc_hisparse_device(self, last_locs: torch.Tensor) -> torch.Tensor:
        return self.full_to_hisparse_device_index_mapping[self.get_last_loc_compressed(last_locs)]

    # -- allocation --------------------------------------------------------------------------
    def alloc_extend(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                     seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor,
                     extend_num_tokens: int) -> torch.Tensor | None:
        """Both sides, or None with nothing changed when either lacks its pages."""
        ps, hps, c = self.page_size, self.hisparse_page_size, COMPRESS_RATIO
        pre, seq = prefix_lens_cpu.tolist(), seq_lens_cpu.tolist()
        logical_pages = sum(num_new_pages(p, s, ps) for p, s in zip(pre, seq))
        device_pages = sum(num_new_pages(p // c, s // c, hps) for p, s in zip(pre, seq))
        if logical_pages > self.logical_attn_allocator.available_size() // ps:
            return None
        if device_pages > self.hisparse_attn_allocator.available_size() // hps:
            return None
        device_loc = self.get_last_loc_hisparse_device(last_loc)
        logical = self.logical_attn_allocator.alloc_extend(
            prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc, extend_num_tokens)
        assert logical is not None
        dev_pre_cpu, dev_seq_cpu = prefix_lens_cpu // c, seq_lens_cpu // c
        aligned = dev_pre_cpu % hps == 0  # an aligned prefix is laid out as a fresh row
        dev_seq_cpu = torch.where(aligned, dev_seq_cpu - dev_pre_cpu, dev_seq_cpu)
        dev_pre_cpu = torch.where(aligned, torch.zeros_like(dev_pre_cpu), dev_pre_cpu)
        device_loc = torch.where(aligned.to(device_loc.device), torch.full_like(device_loc, -1),
                                 device_loc)
        ids = compressed_ids(logical)
        device = self.hisparse_attn_allocator.alloc_extend(
            dev_pre_cpu.to(self.device), dev_pre_cpu, dev_seq_cpu.to(self.device), dev_seq_cpu,
            device_loc, int(ids.numel()))
        assert device is not None
        self.full_to_hisparse_device_index_mapping[ids] = device
        return logical  # type: ignore[no-any-return]

    def alloc_decode(self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                     last_loc: torch.Tensor) -> torch.Tensor | None:
        """The logical side's decode; nothing is bound."""
        return self.logical_attn_allocator.alloc_decode(  # type: ignore[no-any-return]
            seq_lens, seq_lens_cpu, last_loc)

    def alloc_device_buffer(self, allocated_indices: torch.Tensor, need_size: int
                            ) -> torch.Tensor:
        """The buffer of ``need_size`` device slots from those bound to the compressed ids
        ``allocated_indices`` (see the model); ContractViolation (``HSP-16``) first for a size
        that is not a positive page multiple or too few free device pages."""
        hps = self.hisparse_page_size
        if need_size < hps or need_size % hps:
            raise ContractViolation("HSP-16", f"need_size {need_size}: a page multiple >= {hps}")
        mapping = self.full_to_hisparse_device_index_mapping
        bound = mapping[allocated_indices]
        bound = bound[bound > 0].clone()
        _, pad, extra = sizing.device_buffer_split(int(bound.numel()), need_size, hps)
        if int(bound.numel()) < need_size and \
                extra > self.hisparse_attn_allocator.available_size():
            raise ContractViolation("HSP-16", f"{extra} device slots needed")
        mapping[allocated_indices] = 0
        dbs = need_size - hps
        if bound.numel() > dbs + 1:
            bound[dbs], bound[-1] = bound[-1].clone(), bound[dbs].clone()
        if bound.numel() >= need_size:
            buffer, surplus = bound[:need_size], bound[need_size:]
            if surplus.numel():
                kept = torch.unique(buffer // hps)
                pages = torch.unique(surplus // hps)
                pure = pages[~torch.isin(pages, kept)]
                if pure.numel():
                    self.hisparse_attn_allocator.free(pure * hps)
            return buffer
        tail = torch.arange(1, pad + 1, dtype=torch.int64, device=bound.device)
        padded = torch.cat([bound, bound[-1] + tail]) if pad else bound
        more = self.hisparse_attn_allocator.alloc(extra) if extra else bound[:0]
        assert more is not None
        return torch.cat([padded, more])

    # -- release -----------------------------------------------------------------------------
    def free_hisparse_indices(self, buffer_indices: torch.Tensor) -> None:
        kept = buffer_indices[buffer_indices >= self.hisparse_page_size]
        if kept.numel():
            self.hisparse_attn_allocator.free(kept)

    def _free_now(self, free_index: torch.Tensor) -> None:
        self.logical_attn_allocator.free(free_index)
        ids = compressed_ids(free_index)
        bound = self.full_to_hisparse_device_index_mapping[ids]
        self.free_hisparse_indices(bound[bound > 0])
        self.full_to_hisparse_device_index_mapping[ids] = 0

    def free(self, free_index: torch.Tensor) -> None:
        """Both logical sides and the device slots of the compressed ids among the slots;
        inside a free group, at its end."""
        if free_index.numel() == 0:
            return
        if self.free_group is not None:
            self.free_group.append(free_index.clone())
            return
        self._free_now(free_index)

    def free_full(self, free_index: torch.Tensor) -> None:
        """The logical full side alone; inside a free group, at its end."""
        if free_index.numel() == 0:
            return
        if self.free_group is not None:
            self.full_free_group.append(free_index.clone())
            return
        self.logical_attn_allocator.free_full(free_index)

    def free_swa(self, free_index: torch.Tensor) -> None:
        self.logical_attn_allocator.free_swa(free_index)

    def free_group_begin(self) -> None:
        if self.free_group is not None:
            raise ContractViolation("HSP-15", "free groups cannot be nested")
        self.free_group, self.full_free_group = [], []

    def free_group_end(self) -> None:
        pending, self.free_group = self.free_group or [], None
        if pending:
            self._free_now(torch.cat(pending))
        full, self.full_free_group = self.full_free_group, []
        if full:
            self.free_full(torch.cat(full))

    def clear(self) -> None:
        self.logical_attn_allocator.clear()
        self.hisparse_attn_allocator.clear()
        self.full_to_hisparse_device_index_mapping.fill_(0)
        self.full_to_hisparse_device_index_mapping[-1] = -1
        self.free_group, self.full_free_group = None, []
