"""Deliberately broken hybrid sliding-window allocators: one bug each, on kvpool's allocator.

``BROKEN_HYBRID`` lists each with the page sizes that reach the bug and the one clause the
oracle reports it under; ``test_oracle_hybrid.py`` asserts that the hybrid oracle catches each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from kvpool.impl import SWATokenToKVPoolAllocator
from kvpool.oracle.families.hybrid.targets import FULL, HybridCapabilities


class SlideFreesFull(SWATokenToKVPoolAllocator):
    """A window slide that also releases the full side of the slid-out tokens."""

    def free_swa(self, free_index: torch.Tensor) -> None:
        super().free_swa(free_index)
        if free_index.numel():
            self.full_attn_allocator.free(free_index)


class MappingNotCleared(SWATokenToKVPoolAllocator):
    """``free_swa`` releases the SWA pages but leaves the pairs in the mapping (B11)."""

    def free_swa(self, free_index: torch.Tensor) -> None:
        saved = self.full_to_swa_index_mapping.clone()
        super().free_swa(free_index)
        self.full_to_swa_index_mapping.copy_(saved)

    def free_full(self, free_index: torch.Tensor) -> None:
        if free_index.numel():
            self.full_attn_allocator.free(free_index)  # no peer check: the pairs are stale


class OnlyNamedSlotsCleared(SWATokenToKVPoolAllocator):
    """B9: a paged ``free_swa`` clears the pairs of the named slots only, not of their pages."""

    def free_swa(self, free_index: torch.Tensor) -> None:
        if free_index.numel() == 0:
            return
        peers = self._pairs.take(free_index)
        self._release_swa(peers)


class GroupDoubleRelease(SWATokenToKVPoolAllocator):
    """Inside a free group, the SWA page ids are queued twice and released twice at the end."""

    def _release_swa_page_ids(self, pages: torch.Tensor) -> None:
        super()._release_swa_page_ids(pages)
        if self.free_group is not None:
            self.swa_page_ids_group.append(pages.clone())


class DecodeLeaksFullSide(SWATokenToKVPoolAllocator):
    """B14: ``alloc_decode`` allocates the full side before checking the SWA side."""

    def alloc_decode(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor
    ) -> torch.Tensor | None:
        swa_last_loc = self._pairs.gather(last_loc)
        full = self.full_attn_allocator.alloc_decode(seq_lens, seq_lens_cpu, last_loc)
        swa = self.swa_attn_allocator.alloc_decode(seq_lens, seq_lens_cpu, swa_last_loc)
        if full is None or swa is None:
            return None
        self._pairs.set(full, swa)
        return full


class FreeFullOfLivePair(SWATokenToKVPoolAllocator):
    """Checked mode that lets ``free_full`` of a slot with a live SWA peer through (SWA-12)."""

    def free_full(self, free_index: torch.Tensor) -> None:
        if free_index.numel():
            self.full_attn_allocator.free(free_index)


class TranslateIgnoresRelease(SWATokenToKVPoolAllocator):
    """``translate_loc_from_full_to_swa`` answers from a copy of the mapping taken at alloc."""

    def alloc_extend(self, *args: Any, **kwargs: Any) -> torch.Tensor | None:
        out = super().alloc_extend(*args, **kwargs)
        self._stale = self.full_to_swa_index_mapping.clone()
        return out

    def alloc(self, need_size: int) -> torch.Tensor | None:
        out = super().alloc(need_size)
        self._stale = self.full_to_swa_index_mapping.clone()
        return out

    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
        stale = getattr(self, "_stale", self.full_to_swa_index_mapping)
        super().translate_loc_from_full_to_swa(kv_indices)
        return stale[kv_indices].to(torch.int32)


class GroupKeepsCallerTensor(SWATokenToKVPoolAllocator):
    """Inside a free group, ``free_full`` keeps the caller's own tensor (no copy) and releases
    what it holds at ``free_group_end`` (GROUP-3: the caller may overwrite it meanwhile)."""

    def free_full(self, free_index: torch.Tensor) -> None:
        if self.free_group is not None and free_index.numel():
            super().free_full(free_index.clone()[:0])  # the checks, nothing released
            self._kept = [*getattr(self, "_kept", []), free_index]
            return
        super().free_full(free_index)

    def free_group_end(self) -> None:
        kept, self._kept = getattr(self, "_kept", []), []
        if self.free_group is not None:
            for x in kept:
                self.full_attn_allocator.free(x)
        super().free_group_end()


@dataclass(frozen=True)
class BrokenHybrid:
    """One broken allocator, the page sizes that reach its bug and the clause it is reported
    under (a 1-tuple)."""

    cls: type[SWATokenToKVPoolAllocator]
    page_sizes: tuple[int, ...]
    clauses: tuple[str, ...]

    def factory(self) -> Any:
        cls = self.cls

        def make(
            *, size: int, size_swa: int, page_size: int, need_sort: bool, device: str = "cpu"
        ) -> Any:
            return cls(
                size, size_swa, page_size, torch.float16, device, None, need_sort, checked=True
            )

        make.__qualname__ = make.__name__ = cls.__name__
        make.kvpool_hybrid_capabilities = self.caps()  # type: ignore[attr-defined]
        return make

    def caps(self) -> HybridCapabilities:
        return FULL.replace(page_sizes=self.page_sizes, need_sort=(False,))


BROKEN_HYBRID = (
    BrokenHybrid(SlideFreesFull, (4,), ("INV-1",)),
    BrokenHybrid(MappingNotCleared, (1, 4), ("SWA-2",)),
    BrokenHybrid(OnlyNamedSlotsCleared, (4,), ("SWA-2",)),
    BrokenHybrid(GroupDoubleRelease, (4,), ("SWA-19",)),
    BrokenHybrid(DecodeLeaksFullSide, (4,), ("INV-1",)),
    BrokenHybrid(FreeFullOfLivePair, (1, 4), ("SWA-12",)),
    BrokenHybrid(TranslateIgnoresRelease, (1, 4), ("SWA-16",)),
    BrokenHybrid(GroupKeepsCallerTensor, (1, 4), ("GROUP-3",)),
)

# a module-level factory, for ``python -m kvpool.oracle hybrid broken_hybrid:slide_frees_full``
slide_frees_full = BROKEN_HYBRID[0].factory()
slide_frees_full.__qualname__ = slide_frees_full.__name__ = "slide_frees_full"  # its trace replays
