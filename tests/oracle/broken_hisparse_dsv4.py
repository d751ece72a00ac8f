"""Deliberately broken DeepSeek V4 HiSparse allocators: one bug each, on kvpool's
``DeepSeekV4HiSparseAllocator``, each with the one ``HSP-12..16`` clause the HiSparse family
reports it under at its default budget (``BROKEN_HISPARSE_DSV4``; ``test_oracle_hisparse.py``
runs them). Each has a module-level factory (its name in lower case) that a printed repro
imports."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from broken_hisparse import BrokenHiSparse
from kvpool.impl.hisparse_dsv4 import DeepSeekV4HiSparseAllocator
from kvpool.oracle.families.hisparse.targets import DSV4


class ClearKeepsMapping(DeepSeekV4HiSparseAllocator):
    """``clear()`` makes every side whole but leaves the compressed ids bound (HSP-12)."""

    def clear(self) -> None:
        kept = self.full_to_hisparse_device_index_mapping.clone()
        super().clear()
        self.full_to_hisparse_device_index_mapping.copy_(kept)


class FullCapacityUncompressed(DeepSeekV4HiSparseAllocator):
    """``full_available_size()`` counts a device slot as one token, not four (HSP-13)."""

    def full_available_size(self) -> int:
        return min(int(self.logical_attn_allocator.full_available_size()),
                   int(self.hisparse_attn_allocator.available_size()))


class ExtendSkipsLastId(DeepSeekV4HiSparseAllocator):
    """``alloc_extend`` leaves the newest compressed id of the batch unbound (its device slot
    is taken but never named) (HSP-14)."""

    def alloc_extend(self, *args: Any) -> torch.Tensor | None:
        out = super().alloc_extend(*args)
        if out is not None:
            ids = out[(out + 1) % 4 == 0] // 4
            if ids.numel():
                self.full_to_hisparse_device_index_mapping[ids[-1]] = 0
        return out


class FreeFullNotDeferred(DeepSeekV4HiSparseAllocator):
    """``free_full`` inside a free group frees the full side at once (HSP-15)."""

    def free_full(self, free_index: torch.Tensor) -> None:
        if free_index.numel():
            self.logical_attn_allocator.free_full(free_index)


class BufferKeepsBinding(DeepSeekV4HiSparseAllocator):
    """``alloc_device_buffer`` hands the bound slots out but leaves the ids bound (HSP-16)."""

    def alloc_device_buffer(self, allocated_indices: torch.Tensor, need_size: int
                            ) -> torch.Tensor:
        mapping = self.full_to_hisparse_device_index_mapping
        kept = mapping[allocated_indices].clone()
        out = super().alloc_device_buffer(allocated_indices, need_size)
        mapping[allocated_indices] = kept
        return out


BROKEN_HISPARSE_DSV4 = (
    BrokenHiSparse(ClearKeepsMapping, ("HSP-12",), module="broken_hisparse_dsv4"),
    BrokenHiSparse(FullCapacityUncompressed, ("HSP-13",), module="broken_hisparse_dsv4"),
    BrokenHiSparse(ExtendSkipsLastId, ("HSP-14",), module="broken_hisparse_dsv4"),
    BrokenHiSparse(FreeFullNotDeferred, ("HSP-15",), module="broken_hisparse_dsv4"),
    BrokenHiSparse(BufferKeepsBinding, ("HSP-16",), module="broken_hisparse_dsv4"),
)


def _factory(cls: type[DeepSeekV4HiSparseAllocator]) -> Callable[..., Any]:
    def factory(*, size: int, size_swa: int, page_size: int, need_sort: bool,
                size_hisparse: int, hisparse_page_size: int, c4_logical_size: int,
                device: str = "cpu") -> Any:
        from kvpool.impl import SWATokenToKVPoolAllocator

        logical = SWATokenToKVPoolAllocator(size, size_swa, page_size, torch.float16, device,
                                            None, need_sort, checked=True)
        return cls(logical, size_hisparse=size_hisparse, hisparse_page_size=hisparse_page_size,
                   c4_logical_size=c4_logical_size)

    factory.__name__ = factory.__qualname__ = cls.__name__.lower()
    factory.kvpool_hisparse_capabilities = DSV4  # type: ignore[attr-defined]
    return factory


for _broken in BROKEN_HISPARSE_DSV4:
    globals()[_broken.name] = _factory(_broken.cls)
