"""Broken allocators whose bug shows only in one coverage event class
(``kvpool.oracle.families.single.coverage``).

Each is correct (the spec-backed adapter of ``spec_torch.py``) except in the situation one event
names: large batches, a shortage with pages still free, a page freed in pieces inside a group,
a merge under decode pressure, a ragged pool, an empty free, ... ``EVENT_BROKEN`` pairs each
with its event, the configuration that can reach it and the one clause the report names; the
default CLI run must catch every one (``test_oracle_broken_events.py``).
"""

from __future__ import annotations

from typing import Any

import torch
from broken_allocators import Broken, factory_of
from kvpool.oracle.engine.capabilities import PAGED, TOKEN
from kvpool.spec.rules import check_decode
from spec_torch import SpecTorchAllocator


def _lens(t: Any) -> list[int]:
    return [int(v) for v in t.tolist()]


class BigExtendBatchReusesPage(SpecTorchAllocator):
    """extend.bs_9_32: a batch of more than 8 requests leaves its last new page in the free list
    (a second code path for large batches forgets to pop it)."""

    def alloc_extend(
        self,
        prefix_lens: Any,
        prefix_lens_cpu: Any,
        seq_lens: Any,
        seq_lens_cpu: Any,
        last_loc: Any,
        extend_num_tokens: int,
    ) -> Any:
        before = list(self.model.free_pages)
        out = super().alloc_extend(
            prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc, extend_num_tokens
        )
        taken = [p for p in before if p not in self.model.free_pages]
        if out is not None and len(_lens(seq_lens_cpu)) > 8 and taken:
            self.model.free_pages.insert(0, taken[-1])
        return out


class BigDecodeBatchTruncated(SpecTorchAllocator):
    """decode.bs_33_64: a decode batch of more than 32 requests handles 32 lanes; the rest get
    ``last_loc + 1`` even when they open a new page."""

    def alloc_decode(self, seq_lens: Any, seq_lens_cpu: Any, last_loc: Any) -> Any:
        out = super().alloc_decode(seq_lens, seq_lens_cpu, last_loc)
        if out is not None and out.numel() > 32:
            out[32:] = last_loc[32:] + 1
        return out


class AllocPartialWhenShort(SpecTorchAllocator):
    """alloc.short_partial: when short while some pages are free, ``alloc`` hands out what is
    free instead of returning None."""

    def alloc(self, need_size: int) -> Any:
        m, ps = self.model, self.page_size
        have = len(m.free_pages) + len(m.staged)
        if need_size > 0 and need_size % ps == 0 and 0 < have < need_size // ps:
            return super().alloc(have * ps)
        return super().alloc(need_size)


class DecodeShortConsumesFree(SpecTorchAllocator):
    """decode.short_partial: a decode short of pages takes the free ones, then returns None."""

    def alloc_decode(self, seq_lens: Any, seq_lens_cpu: Any, last_loc: Any) -> Any:
        out = super().alloc_decode(seq_lens, seq_lens_cpu, last_loc)
        if out is None:
            self.model._take(len(self.model.free_pages))
        return out


class GroupPiecesReleasedTwice(SpecTorchAllocator):
    """group.page_in_pieces: ``free_group_end`` releases each deferred ``free()`` on its own, so
    a page named by two calls of the group is released twice."""

    def free_group_end(self) -> None:
        m = self.model
        pending = m.free_group or []
        super().free_group_end()
        seen: set[int] = set()
        for chunk in pending:
            pages = {s // self.page_size for s in chunk}
            again = sorted(p for p in pages & seen if m.status_of(p) == "free")
            m.free_pages = again + m.free_pages
            seen |= pages


class DecodeNoMergeWhenShort(SpecTorchAllocator):
    """merge.decode: ``alloc_decode`` returns None when the free list alone is short, without
    merging the staged pages first (DECODE-7)."""

    def alloc_decode(self, seq_lens: Any, seq_lens_cpu: Any, last_loc: Any) -> Any:
        ps, m = self.page_size, self.model
        check_decode(  # a caller error is still rejected first
            _lens(seq_lens_cpu), self._in(last_loc), page_size=ps, num_pages=m.num_pages,
            status_of=m.status_of,
        )
        opens = sum(1 for s in _lens(seq_lens_cpu) if (s - 1) % ps == 0)
        if m.staged and opens > len(m.free_pages):
            return None
        return super().alloc_decode(seq_lens, seq_lens_cpu, last_loc)


class RaggedPoolExtraPage(SpecTorchAllocator):
    """life.ragged: a pool whose size is not a page multiple counts the partial last page."""

    def __init__(
        self, size: int, page_size: int, need_sort: bool, device: str = "cpu", *, paged: bool = True
    ) -> None:
        ragged = size % page_size != 0
        super().__init__(
            size + (page_size - size % page_size if ragged else 0),
            page_size,
            need_sort,
            device,
            paged=paged,
        )


class EmptyFreeRaises(SpecTorchAllocator):
    """free.empty: ``free`` of an empty tensor reads its first slot (IndexError)."""

    def free(self, free_index: torch.Tensor) -> None:
        int(free_index[0])
        super().free(free_index)


class TokenFreeSorted(SpecTorchAllocator):
    """free.unordered: a token allocator sorts the slots of a ``free`` before appending them."""

    def free(self, free_index: torch.Tensor) -> None:
        super().free(torch.sort(free_index).values)


class DeferredSegmentsReleasedEarly(SpecTorchAllocator):
    """group.segments: a segment free inside an open group is released at once, not deferred."""

    def free_segments(self, segments: Any) -> None:
        m = self.model
        group = m.free_group
        if group is not None and self.page_size > 1:
            m.free_group = None
            try:
                super().free_segments(segments)
            finally:
                m.free_group = group
            return
        super().free_segments(segments)


class LongExtendPagesReversed(SpecTorchAllocator):
    """extend.many_pages: a request taking three or more new pages gets them in reverse order
    (valid slots, but not the reference order)."""

    def alloc_extend(
        self,
        prefix_lens: Any,
        prefix_lens_cpu: Any,
        seq_lens: Any,
        seq_lens_cpu: Any,
        last_loc: Any,
        extend_num_tokens: int,
    ) -> Any:
        out = super().alloc_extend(
            prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc, extend_num_tokens
        )
        ps, k = self.page_size, 0
        if out is None:
            return out
        for pre, seq in zip(_lens(prefix_lens_cpu), _lens(seq_lens_cpu)):
            first = -(-pre // ps) * ps  # the first position on a new page
            whole = (seq - first) // ps
            if whole >= 3:
                lo = k + first - pre
                pages = out[lo : lo + whole * ps].reshape(whole, ps)
                out[lo : lo + whole * ps] = pages.flip(0).reshape(-1)
            k += seq - pre
        return out


class MidSpanSegmentKeepsLastPage(SpecTorchAllocator):
    """seg.mid_span: a segment that starts and ends mid-page across three or more pages keeps
    its last page (a stride from the segment's first slot instead of ``SEG-2``'s
    representatives misses it when the last page holds fewer slots than the first)."""

    def free_segments(self, segments: Any) -> None:
        m, ps = self.model, self.page_size
        kept = []
        for idx, start in segments:
            end = start + idx.numel()
            if start % ps and end % ps and (end - 1) // ps - start // ps >= 2:
                kept.append(int(idx[-1]) // ps)
        super().free_segments(segments)
        if m.free_group is not None:
            return
        for page in kept:
            if page in m.free_pages or page in m.staged:
                (m.free_pages if page in m.free_pages else m.staged).remove(page)
                m._mark([page], "owned")


class CapacityAlwaysYes(SpecTorchAllocator):
    """cap.check_false: ``check_decode_capacity`` evicts as it should, then says yes even when
    the pool cannot hold ``num_tokens``."""

    def check_decode_capacity(
        self, *, num_tokens: int, tree_cache: Any, requests: Any = None, spec_algorithm: Any = None
    ) -> bool:
        super().check_decode_capacity(num_tokens=num_tokens, tree_cache=tree_cache)
        return True


class CensusCached(SpecTorchAllocator):
    """ALIAS-3: ``get_all_free_pages()`` hands out one cached tensor, rebuilt only after a
    change, and answers later census reads from it (a write by the caller sticks)."""

    _cached: torch.Tensor | None = None
    _version: tuple[int, ...] = ()

    def get_all_free_pages(self) -> torch.Tensor:
        version = (len(self.model.free_pages), len(self.model.staged), *self.model.free_pages[:1])
        if self._cached is None or version != self._version:
            self._cached, self._version = super().get_all_free_pages(), version
        return self._cached


class FreeReadsInputLater(SpecTorchAllocator):
    """ALIAS-2: a paged ``free`` outside a group keeps the caller's tensor and releases its pages
    only at the next allocation, counting them as available from the tensor meanwhile."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: list[torch.Tensor] = []

    def _pending_pages(self) -> list[int]:
        return sorted({int(s) // self.page_size for x in self._pending for s in x.tolist()})

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        for x in pending:
            super().free(x)

    def free(self, free_index: torch.Tensor) -> None:
        if self.model.free_group is None and self.page_size > 1 and free_index.numel():
            self.model.pages_freed_by(self._in(free_index))  # still rejects bad input
            self._pending.append(free_index)
            return
        self._flush()
        super().free(free_index)

    def available_size(self) -> int:
        return super().available_size() + len(self._pending_pages()) * self.page_size

    def get_all_free_pages(self) -> torch.Tensor:
        return torch.cat(
            (torch.tensor(self._pending_pages(), dtype=torch.int64), super().get_all_free_pages())
        )

    def alloc(self, need_size: int) -> Any:
        self._flush()
        return super().alloc(need_size)

    def alloc_extend(self, *args: Any) -> Any:
        self._flush()
        return super().alloc_extend(*args)

    def alloc_decode(self, *args: Any) -> Any:
        self._flush()
        return super().alloc_decode(*args)


class PageIdsReadLater(FreeReadsInputLater):
    """ALIAS-2 through ``free_page_ids``: outside a group it keeps the caller's page-id tensor
    and releases those pages only at the next allocation (SGLang 0.5.23 stages the caller's
    tensor under ``need_sort``: ``SGL-PAGE-IDS-ALIAS``); ``free`` is correct."""

    def _pending_pages(self) -> list[int]:
        return [int(p) for x in self._pending for p in x.tolist()]

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        for x in pending:
            SpecTorchAllocator.free_page_ids(self, x)

    def free(self, free_index: torch.Tensor) -> None:
        self._flush()
        SpecTorchAllocator.free(self, free_index)

    def free_page_ids(self, page_ids: torch.Tensor) -> None:
        if self.model.free_group is None and self.page_size > 1 and page_ids.numel():
            self.model.copy().free_page_ids(self._in(page_ids))  # still rejects bad input
            self._pending.append(page_ids)
            return
        self._flush()
        super().free_page_ids(page_ids)


OWNERSHIP_BROKEN: tuple[Broken, ...] = (
    Broken(CensusCached, ("ALIAS-3",), module="broken_events", order="contract"),
    Broken(FreeReadsInputLater, ("ALIAS-2",), module="broken_events", order="contract"),
    Broken(PageIdsReadLater, ("ALIAS-2",), module="broken_events", order="contract"),
)

EVENT_BROKEN: tuple[tuple[str, Broken], ...] = (
    (
        "seg.mid_span",
        Broken(MidSpanSegmentKeepsLastPage, ("SEG-2",), module="broken_events"),
    ),
    ("cap.check_false", Broken(CapacityAlwaysYes, ("CAP-2",), module="broken_events")),
    (
        "extend.bs_9_32",
        Broken(
            BigExtendBatchReusesPage,
            ("EXTEND-4",),
            module="broken_events",
        ),
    ),
    (
        "decode.bs_33_64",
        Broken(
            BigDecodeBatchTruncated,
            ("DECODE-4",),
            module="broken_events",
        ),
    ),
    ("alloc.short_partial", Broken(AllocPartialWhenShort, ("ALLOC-3",), module="broken_events")),
    (
        "decode.short_partial",
        Broken(DecodeShortConsumesFree, ("DECODE-6",), module="broken_events"),
    ),
    (
        "group.page_in_pieces",
        Broken(GroupPiecesReleasedTwice, ("GROUP-6",), module="broken_events"),
    ),
    (
        "merge.decode",
        Broken(DecodeNoMergeWhenShort, ("DECODE-7",), need_sort=True, module="broken_events"),
    ),
    (
        "life.ragged",
        Broken(RaggedPoolExtraPage, ("MODEL-1",), module="broken_events"),
    ),
    ("free.empty", Broken(EmptyFreeRaises, ("FREE-6",), module="broken_events")),
    (
        "free.unordered",
        Broken(
            TokenFreeSorted, ("FREE-5",), page_size=1, token=True, module="broken_events"
        ),
    ),
    (
        "group.segments",
        Broken(
            DeferredSegmentsReleasedEarly, ("GROUP-5",), module="broken_events"
        ),
    ),
    (
        "extend.many_pages",
        Broken(LongExtendPagesReversed, ("EXTEND-7",), module="broken_events"),
    ),
)

for _b in (*(b for _, b in EVENT_BROKEN), *OWNERSHIP_BROKEN):  # importable factories
    globals().setdefault(_b.name, factory_of(_b.cls, TOKEN if _b.token else PAGED))
