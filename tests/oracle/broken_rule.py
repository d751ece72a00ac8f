"""Broken allocators for the clauses no other module breaks: each one bug, one clause.

Caller errors accepted instead of rejected (the call returns as if valid): each is reported
under the clause the spec rejects the call with (``FREE-1``, ``ALLOC-2``, ``EXTEND-1..3``,
``EXTEND-8``, ``DECODE-2``, ``DECODE-3``, ``DECODE-8``, ``SEG-4``). Behaviour bugs: a
``free_page_ids`` that keeps its last page (``FREE-8``), ``clear()`` that keeps a page owned
(``LIFE-1``), ``resize()`` one page short (``LIFE-2``), a group end that releases the deferred
segment pages first (``GROUP-4``, reference order), a ``free_segments`` that releases the
segments last-first (``SEG-3``, reference order), a free census naming an owned page
(``INV-1``), a page twice (``INV-2``) or the padding page (``INV-3``), a rejected ``alloc``
that took a page (``ERR-1``), allocations from the back of the free list (``ALLOC-5``,
``DECODE-7``), an ``alloc`` that sorts the free list it leaves (``SORT-2``), a ``free_segment``
that keeps its last page (``SEG-2``), ``free_segments`` that raises on an empty segment
(``SEG-6``), ``free_full`` that raises where ``free`` works (``FREE-7``), a decode that
continues a page one slot off (``DECODE-5``).
``tests/oracle/test_oracle_broken_rule.py`` lists, per clause, the allocator that pins it.
"""

from __future__ import annotations

from typing import Any

import torch
from broken_allocators import Broken, factory_of
from broken_clauses import _rejects
from kvpool.oracle.engine.capabilities import PAGED
from kvpool.spec.rules import check_segments
from spec_torch import SpecTorchAllocator

M = SpecTorchAllocator


# Caller errors accepted: (class name, clause, method, what it does instead of raising).
ACCEPTED = (
    ("OutOfRangeAccepted", "FREE-1", "free", "a slot past the pool's end is ignored"),
    ("NegativeAllocAccepted", "ALLOC-2", "alloc", "alloc(-n) returns None"),
    ("ExtendLengthsAccepted", "EXTEND-1", "alloc_extend", "lists of different lengths: None"),
    ("ExtendPrefixAccepted", "EXTEND-2", "alloc_extend", "a prefix past the sequence: None"),
    ("ExtendLastLocAccepted", "EXTEND-3", "alloc_extend", "a last_loc off the row: None"),
    ("ExtendSharedPageAccepted", "EXTEND-8", "alloc_extend", "one partial page twice: None"),
    ("DecodeEmptyAccepted", "DECODE-2", "alloc_decode", "a zero-length sequence: None"),
    ("DecodeLastLocAccepted", "DECODE-3", "alloc_decode", "a last_loc off the row: None"),
    ("DecodeSharedPageAccepted", "DECODE-8", "alloc_decode", "one partial page twice: None"),
    ("OverlappingSegmentsAccepted", "SEG-4", "free_segments", "overlapping segments ignored"),
)


def _accepting(name: str, clause: str, method: str, doc: str) -> type[M]:
    """A class whose ``method`` returns None where the spec raises ``clause``."""
    body = {method: _rejects((clause,))(getattr(M, method)), "__doc__": f"{clause}: {doc}."}
    return type(name, (M,), body)


ACCEPTING = {name: _accepting(name, clause, method, doc) for name, clause, method, doc in ACCEPTED}


class PageIdsKeepLast(M):
    """FREE-8: ``free_page_ids`` of several distinct pages leaves the last one owned (a page
    named twice is still rejected, FREE-3)."""

    def free_page_ids(self, page_ids: torch.Tensor) -> None:
        ids = self._in(page_ids)
        distinct = len(set(ids)) == len(ids)
        self.model.free_page_ids(ids[:-1] if len(ids) >= 2 and distinct else ids)


class ClearKeepsFirstPage(M):
    """LIFE-1: ``clear()`` leaves page 1 owned."""

    def clear(self) -> None:
        super().clear()
        self.model.alloc(self.page_size)  # the first free page, taken behind the caller's back


class ResizeOnePageShort(M):
    """LIFE-2: ``resize(config)`` builds one page fewer than asked."""

    def resize(self, config: Any) -> None:
        class Short:
            max_total_num_tokens = config.max_total_num_tokens - self.page_size

        super().resize(Short())


class GroupEndSegmentsFirst(M):
    """GROUP-4: the group end releases the deferred segment pages before the deferred
    ``free()`` inputs (reference order: the ``free()`` inputs first, as one free)."""

    def free_group_end(self) -> None:
        m = self.model
        if m.free_group and m.group_segments and not m.need_sort:
            pending, segments = m.free_group, m.group_segments
            m.free_group, m.group_segments = None, []
            m._release([p for chunk in segments for p in chunk])
            slots = [s for chunk in pending for s in chunk]
            m._release(sorted({s // self.page_size for s in slots}))
            return
        super().free_group_end()


class SegmentsLastFirst(M):
    """SEG-3: ``free_segments`` releases the segments last-first (reference order: row
    order)."""

    def free_segments(self, segments: Any) -> None:
        m = self.model
        pieces = [(self._in(idx), start) for idx, start in segments]
        if m.free_group is None and not m.need_sort:
            per_segment = check_segments(
                pieces, page_size=self.page_size, num_pages=m.num_pages, status_of=m.status_of
            )
            nonempty = [pages for pages in per_segment if pages]
            if len(nonempty) >= 2:
                for pages in nonempty[::-1]:
                    m._release(list(pages))
                return
        m.free_segments(pieces)


class CensusSwapsLastPage(M):
    """INV-1: ``get_all_free_pages()`` names an owned page in place of the last free one."""

    def get_all_free_pages(self) -> torch.Tensor:
        free = self.model.get_all_free_pages()
        owned = self.model.owned_pages()
        if free and owned:
            free = [*free[:-1], owned[0]]
        return torch.tensor(free, dtype=torch.int64, device=self.device)


class CensusListsFirstTwice(M):
    """INV-2: ``get_all_free_pages()`` lists its first page twice instead of its last."""

    def get_all_free_pages(self) -> torch.Tensor:
        free = self.model.get_all_free_pages()
        if len(free) >= 2:
            free = [free[0], *free[:-1]]
        return torch.tensor(free, dtype=torch.int64, device=self.device)


class CensusListsPaddingPage(M):
    """INV-3: ``get_all_free_pages()`` lists the padding page 0 in place of its last page."""

    def get_all_free_pages(self) -> torch.Tensor:
        free = self.model.get_all_free_pages()
        if free:
            free = [*free[:-1], 0]
        return torch.tensor(free, dtype=torch.int64, device=self.device)


class DirtyUnalignedReject(M):
    """ERR-1: an unaligned ``alloc`` takes a free page, then raises (state changed)."""

    def alloc(self, need_size: int) -> Any:
        if need_size > 0 and need_size % self.page_size and self.model.free_pages:
            self.model.alloc(self.page_size)
        return super().alloc(need_size)


class AllocFromTheBack(M):
    """ALLOC-5: ``alloc`` takes its pages from the back of the free list (reference order:
    the front)."""

    def alloc(self, need_size: int) -> Any:
        m = self.model
        m.free_pages.reverse()
        try:
            return self._out(m.alloc(need_size))
        finally:
            m.free_pages.reverse()


class DecodeFromTheBack(M):
    """DECODE-7: ``alloc_decode`` opens its new pages from the back of the free list."""

    def alloc_decode(self, seq_lens: Any, seq_lens_cpu: Any, last_loc: Any) -> Any:
        m = self.model
        m.free_pages.reverse()
        try:
            return self._out(m.alloc_decode(self._in(seq_lens_cpu), self._in(last_loc)))
        finally:
            m.free_pages.reverse()


class AllocSortsTheRest(M):
    """SORT-2: ``alloc`` hands out the right pages, then sorts the free list it leaves."""

    def alloc(self, need_size: int) -> Any:
        out = super().alloc(need_size)
        self.model.free_pages.sort()
        return out


class SegmentKeepsLastPage(M):
    """SEG-2: ``free_segment`` leaves the segment's last page owned."""

    def free_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        slots = self._in(free_index)
        pages = sorted({s // self.page_size for s in slots})
        if pages and self.model.free_group is None:
            slots = [s for s in slots if s // self.page_size != pages[-1]]
        self.model.free_segment(slots, start_pos=start_pos)


class EmptySegmentRaises(M):
    """SEG-6: ``free_segments`` raises on an empty segment instead of skipping it."""

    def free_segments(self, segments: Any) -> None:
        if any(len(self._in(idx)) == 0 for idx, _ in segments):
            raise ValueError("empty segment")
        super().free_segments(segments)


class FreeFullRaises(M):
    """FREE-7: ``free_full`` of several pages raises where ``free`` releases them."""

    def free_full(self, free_index: torch.Tensor) -> None:
        if len({s // self.page_size for s in self._in(free_index)}) >= 2:
            raise RuntimeError("free_full of several pages")
        super().free_full(free_index)


class DecodeContinueSkipsSlot(M):
    """DECODE-5: a decode that continues a partial page hands out the slot after the right one."""

    def alloc_decode(self, seq_lens: Any, seq_lens_cpu: Any, last_loc: Any) -> Any:
        out = super().alloc_decode(seq_lens, seq_lens_cpu, last_loc)
        if out is None:
            return out
        ps, seqs = self.page_size, self._in(seq_lens_cpu)
        shifted = [
            s + 1 if (n - 1) % ps and (s + 1) % ps else s for s, n in zip(self._in(out), seqs)
        ]
        return self._out(shifted)



BROKEN_RULE: tuple[Broken, ...] = (
    *(Broken(ACCEPTING[name], (clause,), module="broken_rule") for name, clause, _, _ in ACCEPTED),
    Broken(PageIdsKeepLast, ("FREE-8",), module="broken_rule"),
    Broken(ClearKeepsFirstPage, ("LIFE-1",), module="broken_rule"),
    Broken(ResizeOnePageShort, ("LIFE-2",), module="broken_rule"),
    Broken(GroupEndSegmentsFirst, ("GROUP-4",), module="broken_rule"),
    Broken(SegmentsLastFirst, ("SEG-3",), module="broken_rule"),
    Broken(CensusSwapsLastPage, ("INV-1",), module="broken_rule"),
    Broken(CensusListsFirstTwice, ("INV-2",), module="broken_rule"),
    Broken(CensusListsPaddingPage, ("INV-3",), module="broken_rule"),
    Broken(DirtyUnalignedReject, ("ERR-1",), module="broken_rule"),
    Broken(AllocFromTheBack, ("ALLOC-5",), module="broken_rule"),
    Broken(DecodeFromTheBack, ("DECODE-7",), module="broken_rule"),
    Broken(AllocSortsTheRest, ("SORT-2",), module="broken_rule"),
    Broken(SegmentKeepsLastPage, ("SEG-2",), module="broken_rule"),
    Broken(EmptySegmentRaises, ("SEG-6",), module="broken_rule"),
    Broken(FreeFullRaises, ("FREE-7",), module="broken_rule"),
    Broken(DecodeContinueSkipsSlot, ("DECODE-5",), module="broken_rule"),
)
for _b in BROKEN_RULE:  # importable factories, e.g. broken_rule:pageidskeeplast
    globals().setdefault(_b.name, factory_of(_b.cls, PAGED))
