"""Broken allocators whose bug needs an input shape only the oracle's reach events produce.

Each overrides one method of the spec-backed torch adapter (``spec_torch.py``) with one planted
bug that stays invisible unless the run builds that shape:

- ``FreeDedupAdjacent``: a paged ``free()`` deduplicates pages only between neighbouring slots,
  so a slot named again later in the same call releases its page twice (``free.repeat_slot``);
- ``AllocWrapsAt256``: a token ``alloc`` of 256 slots or more copies its result through a
  255-slot buffer, so slot 255 onward repeat the previous slot (``size.pow2_single``);
- ``ExtendWrapsAt256``: the same bug in a paged ``alloc_extend`` batch of 256 or more new
  tokens (``size.pow2_batch`` / ``size.pow2_single``);
- ``SegmentSkipsMiddlePage``: a segment that starts mid-page and touches three pages or more
  does not release the page before its last (``seg.unaligned_3``);
- ``SegmentStepsFromStart`` (kvpool's paged allocator): a ``free_segment`` starting mid-page
  reads its pages at ``0, ps, 2ps, ...`` from its first slot instead of the spec's stride
  (``rep_offsets``), so it misses its last page when its last token's in-page offset is below
  its first's (``seg.single_wrap``: positions 2..5 at ``ps = 4`` release page 0 only);
- ``FreeReadsStorage`` / ``FreeViewsAsInt64``: a ``free()`` that reads a strided view's storage
  as contiguous / an int32 row's bytes as int64 (``input.strided`` / ``input.int32``);
- ``TranslateToInt64``: a translation that returns int64 where SGLang returns its int32 input
  (the result's dtype is compared, ``LIFE-3``);
- ``PageIdsTwiceAccepted``: ``free_page_ids`` naming a page twice is accepted and releases it
  twice (the bad call ``bad.page_ids_twice``, ``FREE-3``);
- ``HybridFreeDedupAdjacent`` (hybrid family, ``HYBRID_REACH_BROKEN``): a hybrid ``free()``
  that releases a repeated slot's SWA page twice (``free.repeat_slot``, ``SWA-13``).

``REACH_BROKEN`` pairs each with the event that exposes it, the configuration that reaches it
and the one clause the default run reports for it (the segment leaks are reported as the census
right after a ``free_segment``, ``SEG-2``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from broken_allocators import Broken, _SegmentsBase, factory_of
from broken_hybrid import BrokenHybrid
from broken_impl import CORRECT, impl_factory
from kvpool.impl import PagedTokenToKVPoolAllocator, SWATokenToKVPoolAllocator
from kvpool.oracle.engine.capabilities import PAGED, TOKEN
from kvpool.spec.rules import check_segments
from kvpool.spec.segments import segment_pages, trim_boundary
from spec_torch import SpecTorchAllocator

WRAP_SLOTS = 255  # the buffer size of the two wrapping allocators


class _BrokenFree(SpecTorchAllocator):
    """The bug of a subclass is in ``free()`` only: ``free_full`` keeps the correct path, so a
    report names ``free``'s clause (``FREE-4``)."""

    def free_full(self, free_index: torch.Tensor) -> None:
        SpecTorchAllocator.free(self, free_index)


class FreeDedupAdjacent(_BrokenFree):
    """FREE-4: ``free()`` finds its pages with ``unique_consecutive``: correct for a row (its
    slots of one page are neighbours) but a slot named again further on releases its page a
    second time (outside a group, without ``need_sort``)."""

    def free(self, free_index: torch.Tensor) -> None:
        super().free(free_index)
        m = self.model
        if m.free_group is None and not m.need_sort:
            pages = torch.unique_consecutive(free_index // self.page_size).tolist()
            again = Counter(pages) - Counter(set(pages))
            m.free_pages = sorted(again.elements()) + m.free_pages


def _wrapped(out: torch.Tensor | None) -> torch.Tensor | None:
    """``out`` as copied through a ``WRAP_SLOTS``-slot buffer: from index ``WRAP_SLOTS`` on,
    each slot is the one before it (the last slot is never handed out)."""
    if out is None or out.numel() <= WRAP_SLOTS:
        return out
    wrapped = out.clone()
    wrapped[WRAP_SLOTS:] = out[WRAP_SLOTS - 1 : -1]
    return wrapped


class AllocWrapsAt256(SpecTorchAllocator):
    """ALLOC-4: an ``alloc`` of 256 slots or more hands out slot 254 twice and leaks its last."""

    def alloc(self, need_size: int) -> Any:
        return _wrapped(super().alloc(need_size))


class ExtendWrapsAt256(SpecTorchAllocator):
    """EXTEND-5: an ``alloc_extend`` of 256 new tokens or more (one request or a batch) hands
    out one slot twice and leaks its last (slot 255 no longer continues its page's layout)."""

    def alloc_extend(self, *args: Any) -> Any:
        return _wrapped(super().alloc_extend(*args))


class SegmentSkipsMiddlePage(_SegmentsBase):
    """SEG-2: a segment starting mid-page that touches three pages or more walks its middle
    pages with ``range(first + 1, last - 1)``: the page before its last is never released."""

    def free_segments(self, segments: Any) -> None:
        ps, m = self.page_size, self.model
        segs = [(self._in(idx), start) for idx, start in segments]
        check_segments(segs, page_size=ps, num_pages=m.num_pages, status_of=m.status_of)
        out: list[list[int]] = []
        prev_end: int | None = None
        for idx, start in (s for s in segs if s[0]):
            trim = trim_boundary(start, len(idx), prev_end, ps)
            pages = segment_pages(idx[trim:], start + trim, ps)
            end = start + len(idx)
            if start % ps and (end - 1) // ps - start // ps >= 2 and len(pages) >= 2:
                del pages[-2]
            out.append(pages)
            prev_end = end
        self._release_all(out)


class SegmentStepsFromStart(PagedTokenToKVPoolAllocator):  # type: ignore[misc]
    """SEG-2: ``free_segment`` finds its pages from the slots at ``0, ps, 2ps, ...`` of the
    segment, stepping from its first slot rather than from its first page boundary. A segment
    that starts mid-page and whose last token lies at a lower in-page offset than its first
    (``ps = 4``, positions 2..5) never reaches its last page, which stays allocated. The stepped
    slots touch the pages of the segment's first ``(n - 1) // ps * ps + 1`` tokens, so the bug
    is that prefix released correctly (checks and groups unchanged)."""

    def free_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        n, ps = free_index.numel(), self.page_size
        stepped = free_index[: (n - 1) // ps * ps + 1] if n else free_index
        super().free_segment(stepped, start_pos=start_pos)


class FreeReadsStorage(_BrokenFree):
    """FREE-4: ``free()`` reads its input's storage as if it were contiguous
    (``as_strided(..., (1,))``): a strided view (every other element) names other slots, so
    some pages are never released (outside a group)."""

    def free(self, free_index: torch.Tensor) -> None:
        if self.model.free_group is None:
            free_index = free_index.as_strided((free_index.numel(),), (1,))
        super().free(free_index)


class FreeViewsAsInt64(_BrokenFree):
    """FREE-4: ``free()`` reinterprets its input's bytes as int64 (``.view(torch.int64)``): an
    int32 row raises or names slots far outside the pool (outside a group)."""

    def free(self, free_index: torch.Tensor) -> None:
        if self.model.free_group is None:
            free_index = free_index.contiguous().view(torch.int64)
        super().free(free_index)


class TranslateToInt64(SpecTorchAllocator):
    """LIFE-3: ``translate_kv_indices_for_transfer`` returns an int64 copy of an int32 input
    (SGLang's identity returns the input, int32)."""

    def translate_kv_indices_for_transfer(self, kv_indices: torch.Tensor) -> torch.Tensor:
        return super().translate_kv_indices_for_transfer(kv_indices).to(torch.int64)


class PageIdsTwiceAccepted(SpecTorchAllocator):
    """FREE-3: ``free_page_ids`` naming a page twice is accepted (checked mode) and releases
    that page twice (SGLang's ``free_page_ids`` neither sorts nor deduplicates)."""

    def free_page_ids(self, page_ids: torch.Tensor) -> None:
        pages = self._in(page_ids)
        if len(set(pages)) == len(pages) or self.model.free_group is not None:
            super().free_page_ids(page_ids)
            return
        super().free_page_ids(torch.tensor(list(dict.fromkeys(pages))))
        m = self.model
        m.free_pages = sorted((Counter(pages) - Counter(set(pages))).elements()) + m.free_pages


class HybridFreeDedupAdjacent(SWATokenToKVPoolAllocator):
    """SWA-13: a hybrid ``free()`` finds the SWA pages to release from its slots' full pages
    with ``unique_consecutive``: a slot named again further on in the same call releases its
    SWA page a second time (outside a group, at ``ps > 1``)."""

    def free(self, free_index: torch.Tensor) -> None:
        ps = self.page_size
        pages = free_index // ps
        peers = self.full_to_swa_index_mapping[free_index] // ps
        runs = torch.unique_consecutive(pages).tolist()
        super().free(free_index)
        if ps == 1 or self.free_group is not None:
            return
        for page in (Counter(runs) - Counter(set(runs))).elements():
            self.swa_attn_allocator.free_page_ids(peers[pages == page][:1])


HYBRID_REACH_BROKEN = (BrokenHybrid(HybridFreeDedupAdjacent, (4,), ("SWA-13",)),)

REACH_BROKEN: tuple[tuple[str, Broken], ...] = (
    ("free.repeat_slot", Broken(FreeDedupAdjacent, ("FREE-4",), module="broken_reach")),
    (
        "size.pow2_single",
        Broken(AllocWrapsAt256, ("ALLOC-4",), page_size=1, token=True, module="broken_reach"),
    ),
    ("size.pow2_batch", Broken(ExtendWrapsAt256, ("EXTEND-5",), module="broken_reach")),
    ("seg.unaligned_3", Broken(SegmentSkipsMiddlePage, ("SEG-2",), module="broken_reach")),
    ("seg.single_wrap", Broken(SegmentStepsFromStart, ("SEG-2",), module="broken_reach",
                               correct=CORRECT)),
    ("input.strided", Broken(FreeReadsStorage, ("FREE-4",), module="broken_reach")),
    ("input.int32", Broken(FreeViewsAsInt64, ("FREE-4",), module="broken_reach")),
    ("input.int32", Broken(TranslateToInt64, ("LIFE-3",), module="broken_reach")),
    ("bad.page_ids_twice", Broken(PageIdsTwiceAccepted, ("FREE-3",), module="broken_reach")),
)
segmentstepsfromstart = impl_factory(SegmentStepsFromStart)  # kvpool's, checked mode
for _, _b in REACH_BROKEN:  # importable factories, e.g. broken_reach:freededupadjacent
    globals().setdefault(_b.name, factory_of(_b.cls, TOKEN if _b.token else PAGED))
