"""Deliberately broken hybrid sliding-window allocators: one bug each, on kvpool's allocator.

``BROKEN_HYBRID`` lists each with the page sizes that reach the bug and the one clause the
oracle reports it under; ``test_oracle_hybrid.py`` asserts that the hybrid oracle catches each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from kvpool.impl import SWATokenToKVPoolAllocator
from kvpool.impl.swa_pure import PureSWATokenToKVPoolAllocator
from kvpool.impl.token import TokenToKVPoolAllocator
from kvpool.oracle.families.hybrid.targets import FULL, PURE, HybridCapabilities
from kvpool.spec import ContractViolation


class SlideFreesFull(SWATokenToKVPoolAllocator):
    """A window slide that also releases the full side of the slid-out tokens (SWA-10: a slide
    releases the SWA peers only)."""

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
    """B9: a paged ``free_swa`` clears the pairs of the named slots only, not of their pages
    (inside a free group deferred as the correct one does: that bug alone)."""

    def free_swa(self, free_index: torch.Tensor) -> None:
        if free_index.numel() == 0:
            return
        peers = self._pairs.take(free_index)
        if self.free_group is not None:
            self.swa_free_group.append(peers)
        else:
            self._release_swa(peers)


class SwaTailWholeRow(SWATokenToKVPoolAllocator):
    """SWA-20: ``alloc_extend_swa_tail`` gives the whole row SWA pages, not its window tail only
    (its head keeps SWA peers the window never reads)."""

    def alloc_extend_swa_tail(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                              seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                              last_loc: torch.Tensor, extend_num_tokens: int,
                              swa_tail_len: int) -> torch.Tensor | None:
        return super().alloc_extend_swa_tail(prefix_lens, prefix_lens_cpu, seq_lens,
                                             seq_lens_cpu, last_loc, extend_num_tokens,
                                             extend_num_tokens)


class SwaTailReturnsTail(SWATokenToKVPoolAllocator):
    """SWA-20: ``alloc_extend_swa_tail`` returns the full slots of the window tail only, not of
    the whole extend (the caller's row then misses its head)."""

    def alloc_extend_swa_tail(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                              seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                              last_loc: torch.Tensor, extend_num_tokens: int,
                              swa_tail_len: int) -> torch.Tensor | None:
        out = super().alloc_extend_swa_tail(prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu,
                                            last_loc, extend_num_tokens, swa_tail_len)
        return None if out is None else out[out.numel() - swa_tail_len:]


class GroupDoubleRelease(SWATokenToKVPoolAllocator):
    """Inside a free group, the SWA page ids are queued twice and released twice at the end
    (SWA-15: the end releases them once)."""

    def _release_swa_page_ids(self, pages: torch.Tensor) -> None:
        super()._release_swa_page_ids(pages)
        if self.free_group is not None:
            self.swa_page_ids_group.append(pages.clone())


class DecodeLeaksFullSide(SWATokenToKVPoolAllocator):
    """B14: ``alloc_decode`` allocates the full side before checking the SWA side (SWA-9: a
    None leaves neither side changed)."""

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
        return stale[kv_indices.to(torch.int64)]


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


class MappingWithoutTrailingEnd(SWATokenToKVPoolAllocator):
    """``clear()`` zeroes the whole mapping, its trailing ``-1`` included (SWA-1): translating
    the ``last_loc`` of ``-1`` of an empty prefix then reads SWA slot 0, the padding slot."""

    def clear(self) -> None:
        super().clear()
        self.full_to_swa_index_mapping.zero_()


class AvailableFullSideOnly(SWATokenToKVPoolAllocator):
    """``available_size()`` reports the full side's free slots and forgets the SWA side's
    (SWA-5: the minimum of both)."""

    def available_size(self) -> int:
        return self.full_available_size()


class AllocChecksSwaSideOnly(SWATokenToKVPoolAllocator):
    """Page size 1: ``alloc`` checks only the SWA side's free slots (as if the SWA pool were
    always the smaller one); a full side short of slots hands back None into the pairing."""

    def alloc(self, need_size: int) -> torch.Tensor | None:
        if need_size > self.swa_available_size():
            return None
        full = self.full_attn_allocator.alloc(need_size)
        swa = self.swa_attn_allocator.alloc(need_size)
        self._pairs.set(full, swa)  # the planted bug: full may be None
        return full


class NewPagesOffByOne(SWATokenToKVPoolAllocator):
    """The SWA side's page check of ``alloc_extend`` / ``alloc_decode`` is strict (``<``): a
    request that takes exactly the SWA side's last free pages is refused (SWA-7)."""

    def new_pages_available(self, num_full_pages: int, num_swa_pages: int) -> bool:
        ps = self.page_size
        return (num_full_pages <= self.full_available_size() // ps
                and num_swa_pages < self.swa_available_size() // ps)


class ExtendSkipsSwaLastLoc(SWATokenToKVPoolAllocator):
    """Checked ``alloc_extend`` / ``alloc_decode`` keep the full side's rules but not SWA-8: a
    partial page continued from a ``last_loc`` whose SWA peer was released is accepted."""

    def _check_last_loc(self, prefix: list[int], seq: list[int], last_loc: torch.Tensor) -> None:
        pass


class DecodeRefusesExactFit(SWATokenToKVPoolAllocator):
    """``alloc_decode`` refuses a decode whose new pages take exactly the SWA side's last free
    pages (``>=`` for ``>``; SWA-9: None iff a side is short)."""

    def alloc_decode(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor
    ) -> torch.Tensor | None:
        num_new_pages = self.full_attn_allocator._ops.decode_new_pages(seq_lens_cpu)
        if num_new_pages and num_new_pages >= self.swa_available_size() // self.page_size:
            return None
        return super().alloc_decode(seq_lens, seq_lens_cpu, last_loc)


class SlideRejectsMidPage(SWATokenToKVPoolAllocator):
    """Checked ``free_swa`` rejects a window slide that ends mid-page, as if it released part
    of a page (SWA-10: every page the slots touch is released)."""

    def free_swa(self, free_index: torch.Tensor) -> None:
        if self.checked and free_index.numel() % self.page_size:
            raise ContractViolation("SWA-10", "a slide must release whole pages")
        super().free_swa(free_index)


class SwaReleaseUnchecked(SWATokenToKVPoolAllocator):
    """Checked mode without SWA-11: ``free_swa`` / ``free`` / segment frees accept a slot whose
    SWA peer was released already (a second SWA release)."""

    def _check_swa_release(self, free_index: torch.Tensor, call: str) -> None:
        pass


class FreeRejectsRepeatedSlot(SWATokenToKVPoolAllocator):
    """Checked ``free`` applies the page-size-1 rule (a slot named twice) at every page size;
    above 1 a ``free()`` naming one slot twice is valid (SWA-13: ``free_swa`` then
    ``free_full``)."""

    def free(self, free_index: torch.Tensor) -> None:
        slots = free_index.tolist()
        if self.checked and len(set(slots)) != len(slots):
            raise ContractViolation("SWA-11", f"a slot is named twice in {slots}")
        super().free(free_index)


class SegmentsRequireAlignedStart(SWATokenToKVPoolAllocator):
    """Segment frees reject a segment that starts mid-page (SGLang 0.5.23's assert; SWA-14
    accepts any start, SEG-2)."""

    def _swa_heads(self, segments: Any) -> list[tuple[torch.Tensor, int]]:
        for free_index, start_pos in segments:
            if self.checked and free_index.numel() and start_pos % self.page_size:
                raise ContractViolation("SEG-2", f"segment start {start_pos} is not page-aligned")
        return super()._swa_heads(segments)


class EvictOnlyWhenFullShort(SWATokenToKVPoolAllocator):
    """The capacity hook asks the cache to evict only when the full side is short; an SWA
    shortfall alone is never requested (SWA-17)."""

    def evict_to_free_tokens(self, tree_cache: Any, num_tokens: int) -> None:
        if num_tokens > self.full_available_size():
            super().evict_to_free_tokens(tree_cache, num_tokens)


class ResizeRejectsLargerSwa(SWATokenToKVPoolAllocator):
    """Checked ``resize`` rejects an SWA size above the full size, as if the SWA pool were
    always the smaller one (SWA-18 reads both sizes as given)."""

    def resize(self, config: Any) -> None:
        if self.checked and config.swa_max_total_num_tokens > config.full_max_total_num_tokens:
            raise ContractViolation("SWA-18", "the SWA pool must not exceed the full pool")
        super().resize(config)


class ExtendInLastLocDtype(SWATokenToKVPoolAllocator):
    """``alloc_extend`` hands its slots out in ``last_loc``'s dtype: int32 when the scheduler's
    ``last_loc`` row is int32 (SGLang's are int64 whatever the input; SWA-7)."""

    def alloc_extend(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                     seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor,
                     extend_num_tokens: int) -> torch.Tensor | None:
        out = super().alloc_extend(prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu,
                                   last_loc, extend_num_tokens)
        return None if out is None else out.to(last_loc.dtype)


class TranslateReadsStorage(SWATokenToKVPoolAllocator):
    """``translate_loc_from_full_to_swa`` reads its input's storage as if it were contiguous
    (a raw ``data_ptr`` read): a strided view of slots is translated from the wrong slots
    (SWA-16)."""

    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
        flat = torch.as_strided(kv_indices, kv_indices.shape, (1,))
        return super().translate_loc_from_full_to_swa(flat)


class TranslateMemoNotInvalidated(SWATokenToKVPoolAllocator):
    """``translate_loc_from_full_to_swa`` memoizes each full slot's SWA slot and never forgets
    it when the slot is freed: a full slot handed out again writes its SWA K/V into the SWA slot
    it had before, which another live request may own now (DATA-2; the mapping tensor, the
    censuses and the slot ids are all right)."""

    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
        out = super().translate_loc_from_full_to_swa(kv_indices)
        memo: dict[int, int] = self.__dict__.setdefault("_memo", {})
        rows = [memo.setdefault(f, s) if s > 0 else s
                for f, s in zip(kv_indices.tolist(), out.tolist())]
        return torch.tensor(rows, dtype=out.dtype, device=out.device)


# -- the pure sliding-window variant (SWA-21..25): one bug each on kvpool's pure allocator -----
class PureSeparateSwaSide(PureSWATokenToKVPoolAllocator):
    """SWA-21: the SWA side is a second token pool, never used (the one pool is the full side),
    so the SWA side's census stays all free while slots are held."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        pool = self.full_attn_allocator
        self.swa_attn_allocator = TokenToKVPoolAllocator(pool.size, self.dtype, self.device,
                                                         None, self.need_sort)

    def alloc(self, need_size: int) -> torch.Tensor | None:
        return self.full_attn_allocator.alloc(need_size)

    def _release_slots(self, free_index: torch.Tensor, call: str) -> None:
        if free_index.numel():
            self.full_attn_allocator.free(free_index)

    def clear(self) -> None:
        super().clear()
        if self.full_attn_allocator is not self.swa_attn_allocator:
            self.full_attn_allocator.size = self.swa_attn_allocator.size
            self.full_attn_allocator.clear()

    def verify_byte_accounting(self) -> list[str]:  # its census does not look at the sides
        return list(self.full_attn_allocator.verify_byte_accounting())


class PureTranslateCopies(PureSWATokenToKVPoolAllocator):
    """SWA-22: the identity translation returns an int64 copy, not its input (an int32 row
    comes back int64)."""

    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
        return super().translate_loc_from_full_to_swa(kv_indices).to(torch.int64)


class PureFullViewStale(PureSWATokenToKVPoolAllocator):
    """SWA-23: ``full_available_size()`` reports the pool's size, as if nothing were held (the
    three views are one number)."""

    def full_available_size(self) -> int:
        return int(self.swa_attn_allocator.size)


class PureFreeFullReleases(PureSWATokenToKVPoolAllocator):
    """SWA-24: ``free_full`` releases the slots again, as the two-pool allocator's full side
    does, though they went to the pool with their SWA side (a double free: the checked pool
    raises FREE-3)."""

    def free_full(self, free_index: torch.Tensor) -> None:
        if free_index.numel():
            self.swa_attn_allocator.free(free_index)


class PureResizeUnchecked(PureSWATokenToKVPoolAllocator):
    """SWA-25: ``resize`` to unequal full and SWA sizes is accepted (the pool takes the SWA
    size) in checked mode."""

    def resize(self, config: Any) -> None:
        self.checked = False
        try:
            super().resize(config)
        finally:
            self.checked = True


@dataclass(frozen=True)
class BrokenHybrid:
    """One broken allocator, the page sizes that reach its bug, the clause it is reported
    under (a 1-tuple) and the clause its bug breaks (``cause``; default: the reported one;
    where they differ ``broken_causes.SYMPTOM_OF`` says why)."""

    cls: type[SWATokenToKVPoolAllocator]  # a PureSWATokenToKVPoolAllocator: the pure variant
    page_sizes: tuple[int, ...]
    clauses: tuple[str, ...]
    cause: str = ""  # the clause the bug breaks, where the report names another one

    def __post_init__(self) -> None:
        if not self.cause:
            object.__setattr__(self, "cause", self.clauses[0])

    def factory(self) -> Any:
        cls = self.cls

        def make(
            *, size: int, size_swa: int, page_size: int, need_sort: bool, device: str = "cpu",
            pure_swa: bool = False,
        ) -> Any:
            if issubclass(cls, PureSWATokenToKVPoolAllocator):
                return cls(size_swa, page_size, torch.float16, device, None, need_sort,
                           checked=True)
            return cls(
                size, size_swa, page_size, torch.float16, device, None, need_sort, checked=True
            )

        make.__qualname__ = make.__name__ = cls.__name__
        make.kvpool_hybrid_capabilities = self.caps()  # type: ignore[attr-defined]
        return make

    def caps(self) -> HybridCapabilities:
        base = PURE if issubclass(self.cls, PureSWATokenToKVPoolAllocator) else FULL
        return base.replace(page_sizes=self.page_sizes, need_sort=(False,))


BROKEN_HYBRID = (
    BrokenHybrid(SlideFreesFull, (4,), ("INV-1",), "SWA-10"),
    BrokenHybrid(MappingNotCleared, (1, 4), ("SWA-2",)),
    BrokenHybrid(OnlyNamedSlotsCleared, (4,), ("SWA-2",)),
    BrokenHybrid(GroupDoubleRelease, (4,), ("SWA-19",), "SWA-15"),
    BrokenHybrid(SwaTailWholeRow, (4,), ("INV-1",), "SWA-20"),
    BrokenHybrid(SwaTailReturnsTail, (4,), ("SWA-20",)),
    BrokenHybrid(DecodeLeaksFullSide, (4,), ("INV-1",), "SWA-9"),
    BrokenHybrid(FreeFullOfLivePair, (1, 4), ("SWA-12",)),
    BrokenHybrid(TranslateIgnoresRelease, (1, 4), ("SWA-16",)),
    BrokenHybrid(GroupKeepsCallerTensor, (1, 4), ("GROUP-3",)),
    BrokenHybrid(MappingWithoutTrailingEnd, (1, 4), ("SWA-1",)),
    BrokenHybrid(AvailableFullSideOnly, (1, 4), ("SWA-5",)),
    BrokenHybrid(AllocChecksSwaSideOnly, (1,), ("SWA-6",)),
    BrokenHybrid(NewPagesOffByOne, (4,), ("SWA-7",)),
    BrokenHybrid(ExtendSkipsSwaLastLoc, (4,), ("SWA-8",)),
    BrokenHybrid(DecodeRefusesExactFit, (4,), ("SWA-9",)),
    BrokenHybrid(SlideRejectsMidPage, (4,), ("SWA-10",)),
    BrokenHybrid(SwaReleaseUnchecked, (1, 4), ("SWA-11",)),
    BrokenHybrid(FreeRejectsRepeatedSlot, (4,), ("SWA-13",)),
    BrokenHybrid(SegmentsRequireAlignedStart, (4,), ("SWA-14",)),
    BrokenHybrid(EvictOnlyWhenFullShort, (1, 4), ("SWA-17",)),
    BrokenHybrid(ResizeRejectsLargerSwa, (1, 4), ("SWA-18",)),
    BrokenHybrid(ExtendInLastLocDtype, (4,), ("SWA-7",)),
    BrokenHybrid(TranslateReadsStorage, (1, 4), ("SWA-16",)),
    BrokenHybrid(PureSeparateSwaSide, (1,), ("SWA-21",)),
    BrokenHybrid(PureTranslateCopies, (1,), ("SWA-22",)),
    BrokenHybrid(PureFullViewStale, (1,), ("SWA-23",)),
    BrokenHybrid(PureFreeFullReleases, (1,), ("SWA-24",)),
    BrokenHybrid(PureResizeUnchecked, (1,), ("SWA-25",)),
)

# broken allocators only the data plane sees (run with it on: ``test_oracle_dataplane.py``);
# the default run meets the stale memo first at a translation the scheduler asks for (SWA-16)
BROKEN_HYBRID_DATA = (BrokenHybrid(TranslateMemoNotInvalidated, (1, 4), ("SWA-16",), "DATA-2"),)

# a module-level factory, for ``python -m kvpool.oracle hybrid broken_hybrid:slide_frees_full``
slide_frees_full = BROKEN_HYBRID[0].factory()
slide_frees_full.__qualname__ = slide_frees_full.__name__ = "slide_frees_full"  # its trace replays
