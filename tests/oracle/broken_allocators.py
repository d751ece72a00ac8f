"""Deliberately broken allocators: each one bug, for proving that the oracle catches it.

Every class overrides one method of the spec-backed torch adapter (``spec_torch.py``), so the
rest is correct by construction. ``BROKEN`` lists each with the configuration that can reach
the bug (page size, need_sort, order), the one clause the oracle reports it under (a census
mismatch is named by the call whose rule explains it) and, where the report names a symptom,
the clause the bug breaks (``cause``; ``broken_causes.SYMPTOM_OF`` says why).
"""

from __future__ import annotations

import importlib
import types
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from kvpool.oracle.engine.capabilities import PAGED, TOKEN, Capabilities
from kvpool.spec import AllocatorModel, ContractViolation
from kvpool.spec.layout import ceil_div
from kvpool.spec.rules import FREE, check_decode, check_segments
from kvpool.spec.segments import segment_pages, trim_boundary
from spec_torch import SpecTorchAllocator


class MutateBeforeNone(SpecTorchAllocator):
    """B1: the extend kernel consumes free pages before the capacity check, then returns None."""

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
        if out is None:
            m = self.model
            del m.free_pages[:1]
        return out


class DoubleFreeAccepted(SpecTorchAllocator):
    """B2: a double free is accepted (the page enters the free list twice) in checked mode."""

    def free(self, free_index: torch.Tensor) -> None:
        try:
            super().free(free_index)
        except ContractViolation as err:
            if err.clause != "FREE-3":
                raise
            m = self.model
            m.free_pages = (
                sorted({s // self.page_size for s in self._in(free_index)}) + m.free_pages
            )


class GroupEndTwice(SpecTorchAllocator):
    """B3: ``free_group_end`` does not clear the group; a second end frees everything again."""

    _last: list[int] | None = None

    def free_group_end(self) -> None:
        m = self.model
        if m.free_group is None:
            if self._last:
                m.free_pages = self._last + m.free_pages
            return
        slots = [s for chunk in m.free_group for s in chunk]
        self._last = sorted({s // self.page_size for s in slots}) if m.paged else slots
        super().free_group_end()


class NestedBeginDrops(SpecTorchAllocator):
    """B4: a nested ``free_group_begin`` starts a new group and drops the deferred frees."""

    def free_group_begin(self) -> None:
        m = self.model
        if m.free_group is not None:
            m.free_group, m.group_segments = [], []
            return
        super().free_group_begin()


class DeferredNotCopied(SpecTorchAllocator):
    """B5: a deferred ``free()`` keeps the caller's tensor and reads it at ``free_group_end``."""

    def free(self, free_index: torch.Tensor) -> None:
        super().free(free_index)
        m = self.model
        if m.free_group is not None and free_index.numel():
            self._refs = [*getattr(self, "_refs", []), free_index]

    def free_group_end(self) -> None:
        m = self.model
        if m.free_group is not None and getattr(self, "_refs", None):
            m.free_group = [[int(v) for v in t.tolist()] for t in self._refs]
        self._refs = []
        super().free_group_end()


class UnalignedFloored(SpecTorchAllocator):
    """B7: an unaligned ``alloc`` is silently floored to whole pages."""

    def alloc(self, need_size: int) -> Any:
        if need_size >= 0:
            need_size = need_size // self.page_size * self.page_size
        return super().alloc(need_size)


class NoMergeBeforeNone(SpecTorchAllocator):
    """B16: ``alloc`` returns None when the free list is short, without merging staged pages."""

    def alloc(self, need_size: int) -> Any:
        aligned = need_size % self.page_size == 0  # an unaligned request is still rejected
        if need_size > 0 and aligned and need_size // self.page_size > len(self.model.free_pages):
            return None
        return super().alloc(need_size)


class _SegmentsBase(SpecTorchAllocator):
    def _segment_pages(self, segments: Any, drop_shared: bool) -> list[list[int]]:
        ps, m = self.page_size, self.model
        segs = [(self._in(idx), start) for idx, start in segments]
        check_segments(segs, page_size=ps, num_pages=m.num_pages, status_of=m.status_of)
        segs = [(idx, start) for idx, start in segs if idx]
        out, prev_end = [], None
        for i, (idx, start) in enumerate(segs):
            trim = trim_boundary(start, len(idx), prev_end, ps) if drop_shared else 0
            pages = segment_pages(idx[trim:], start + trim, ps)
            end = start + len(idx)
            if (
                drop_shared
                and i + 1 < len(segs)
                and segs[i + 1][0]
                and segs[i + 1][1] // ps == (end - 1) // ps
                and pages
            ):
                pages = pages[:-1]  # the next segment was supposed to keep it: nobody frees it
            out.append(pages)
            prev_end = end
        return out

    def _release_all(self, per_segment: list[list[int]]) -> None:
        m = self.model
        for pages in per_segment:
            if pages and m.free_group is None:
                m._release(pages)
            elif pages:
                m.group_segments.append(pages)
                m._mark(pages, "deferred-seg")


class BoundaryTwice(_SegmentsBase):
    """B17(b): no boundary dedup: a page shared by touching segments is released twice."""

    def free_segments(self, segments: Any) -> None:
        self._release_all(self._segment_pages(segments, drop_shared=False))


class BoundaryNever(_SegmentsBase):
    """B17 (other way): the shared boundary page is trimmed from both segments: never released."""

    def free_segments(self, segments: Any) -> None:
        self._release_all(self._segment_pages(segments, drop_shared=True))


class PagedFreeNoDedup(SpecTorchAllocator):
    """FREE-4: a paged ``free`` releases a page once per slot instead of once per page."""

    def free(self, free_index: torch.Tensor) -> None:
        super().free(free_index)
        m = self.model
        if m.free_group is None and not m.need_sort:
            pages = [s // self.page_size for s in self._in(free_index)]
            m.free_pages = sorted((Counter(pages) - Counter(set(pages))).elements()) + m.free_pages


class SlotTwice(SpecTorchAllocator):
    """Contract: ``alloc`` hands out its last page but leaves it in the free list."""

    def alloc(self, need_size: int) -> Any:
        out = super().alloc(need_size)
        if out is not None and out.numel():
            self.model.free_pages.insert(0, int(out[-1]) // self.page_size)
        return out


class LeakOnFree(SpecTorchAllocator):
    """Contract: a ``free`` of several pages forgets the highest one (a leak)."""

    def free(self, free_index: torch.Tensor) -> None:
        slots = self._in(free_index)
        pages = sorted(self.model.pages_freed_by(slots))  # the whole call validated first
        if len(pages) >= 2 and self.model.free_group is None:
            slots = [s for s in slots if s // self.page_size != pages[-1]]
        super().free(torch.tensor(slots, dtype=torch.int64))


class AvailableOffByOnePage(SpecTorchAllocator):
    """Contract: ``available_size()`` reports one page too many when the free list is empty."""

    def available_size(self) -> int:
        n = super().available_size()
        return n + self.page_size if not self.model.free_pages else n


class DecodeNewPageWrong(SpecTorchAllocator):
    """DECODE-4: ``alloc_decode`` opens a new page when ``seq % ps == 0`` (the rule:
    ``(seq - 1) % ps == 0``)."""

    def alloc_decode(self, seq_lens: Any, seq_lens_cpu: Any, last_loc: Any) -> Any:
        m, ps = self.model, self.page_size
        seqs, locs = self._in(seq_lens_cpu), self._in(last_loc)
        check_decode(seqs, locs, page_size=ps, num_pages=m.num_pages, status_of=m.status_of)
        needs = [s % ps == 0 for s in seqs]
        if sum(needs) > len(m.free_pages) + len(m.staged):
            return None
        if sum(needs) > len(m.free_pages):
            m.merge_and_sort_free()
        pages = m._take(sum(needs))
        out, k = [], 0
        for need, loc in zip(needs, locs):
            out.append(pages[k] * ps if need else loc + 1)
            k += need
        return self._out(out)


class ExtendPart1OffByOne(SpecTorchAllocator):
    """Contract: part 1 of ``alloc_extend`` continues at ``last_loc + 2`` (off by one)."""

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
        if out is None:
            return out
        ps, k = self.page_size, 0
        for pre, seq, loc in zip(
            self._in(prefix_lens_cpu), self._in(seq_lens_cpu), self._in(last_loc)
        ):
            part1 = min(seq, ceil_div(pre, ps) * ps) - pre
            out[k : k + part1] = torch.arange(loc + 2, loc + 2 + part1)
            k += seq - pre
        return out


class ViewMutatedLater(SpecTorchAllocator):
    """ALIAS-1: ``alloc`` returns a view into a scratch buffer that the next ``alloc`` reuses."""

    def alloc(self, need_size: int) -> Any:
        out = super().alloc(need_size)
        if out is None:
            return None
        if getattr(self, "_scratch", None) is None:
            self._scratch = torch.zeros(4096, dtype=torch.int64)
        view = self._scratch[: out.numel()]
        view.copy_(out)
        return view


class MergeUnsorted(SpecTorchAllocator):
    """Order: an explicit ``merge_and_sort_free`` appends the staged pages without sorting (the
    merges inside an allocation stay correct, so the report is the call's own SORT-3)."""

    def merge_and_sort_free(self) -> None:
        m = self.model
        if m.staged:
            m._mark(m.staged, FREE)
            m.free_pages = m.free_pages + m.staged
            m.staged = []


class TokenFreePrepends(SpecTorchAllocator):
    """Order: a token allocator's ``free`` prepends (LIFO) instead of appending (FIFO)."""

    def free(self, free_index: torch.Tensor) -> None:
        m = self.model
        before = len(m.free_pages)
        super().free(free_index)
        if m.free_group is None and not m.need_sort:  # the slots it appended go first
            m.free_pages = m.free_pages[before:] + m.free_pages[:before]


class PageZeroAccepted(SpecTorchAllocator):
    """Checked mode: a free naming the padding page 0 is silently ignored instead of rejected."""

    def free(self, free_index: torch.Tensor) -> None:
        slots = [s for s in self._in(free_index) if not 0 <= s < self.page_size]
        super().free(torch.tensor(slots, dtype=torch.int64))


class EvictWholeRequest(SpecTorchAllocator):
    """CAP-1: ``evict_to_free_tokens`` asks the cache for ``num_tokens``, not the shortfall."""

    def evict_to_free_tokens(self, tree_cache: Any, num_tokens: int) -> None:
        if tree_cache is not None and num_tokens > self.available_size():
            tree_cache.evict(num_tokens)


class ClearKeepsStaged(SpecTorchAllocator):
    """LIFE-1: ``clear`` keeps the staged pages (they end up listed twice)."""

    def clear(self) -> None:
        staged = list(self.model.staged)
        super().clear()
        self.model.staged = [p for p in staged if p <= self.model.num_pages]


class FifoPaged(SpecTorchAllocator):
    """CORRECT, other order: paged frees append (FIFO reuse) instead of prepending."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)

        def release(model: AllocatorModel, pages: list[int]) -> None:
            if model.need_sort:
                model.staged.extend(pages)
                model._mark(pages, "staged")
                return
            model.free_pages = model.free_pages + pages
            model._mark(pages, FREE)

        self.model._release = types.MethodType(release, self.model)


def factory_of(cls: type[SpecTorchAllocator], caps: Capabilities) -> Callable[..., Any]:
    """A ``factory(size=, page_size=, need_sort=, device=)`` for ``cls`` declaring ``caps``."""

    def factory(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
        return cls(size, page_size, need_sort, device, paged=caps.paged)

    factory.__name__ = factory.__qualname__ = cls.__name__.lower()
    factory.kvpool_capabilities = caps  # type: ignore[attr-defined]
    return factory


@dataclass(frozen=True)
class Broken:
    """A broken allocator, the configuration that reaches its bug, the clause it is reported
    under (``clauses``, a 1-tuple: ``test_oracle_broken_rule.py`` enforces one clause) and the
    clause its bug breaks (``cause``; default: the reported one). Where the two differ the
    report names a symptom: ``broken_causes.SYMPTOM_OF`` says why."""

    cls: type[Any]
    clauses: tuple[str, ...]
    page_size: int = 4
    need_sort: bool = False
    token: bool = False
    order: str = "exact"
    module: str = "broken_allocators"
    correct: str = ""  # import line of a correct factory for the repro check (default: spec)
    cause: str = ""  # the clause the bug breaks, where the report names another one

    def __post_init__(self) -> None:
        if not self.cause:
            object.__setattr__(self, "cause", self.clauses[0])

    @property
    def name(self) -> str:
        return self.cls.__name__.lower()

    @property
    def factory(self) -> Callable[..., Any]:
        """The module-level factory ``<module>:<name>`` (importable for repro code)."""
        return getattr(importlib.import_module(self.module), self.name)  # type: ignore[no-any-return]

    @property
    def path(self) -> str:
        return f"{self.module}:{self.name}"

    def correct_import(self) -> str:
        """An import line binding ``factory`` to a correct allocator of the same kind."""
        spec = "spec_token" if self.token else "spec_paged"
        return self.correct or f"from spec_torch import {spec} as factory"


BROKEN = (
    Broken(MutateBeforeNone, ("EXTEND-6",)),
    Broken(DoubleFreeAccepted, ("FREE-3",)),
    Broken(GroupEndTwice, ("GROUP-2",)),
    Broken(NestedBeginDrops, ("GROUP-1",)),
    Broken(DeferredNotCopied, ("GROUP-3",)),
    Broken(UnalignedFloored, ("ALLOC-1",)),
    Broken(NoMergeBeforeNone, ("ALLOC-3",), need_sort=True),
    Broken(BoundaryTwice, ("SEG-5",)),
    Broken(BoundaryNever, ("SEG-5",)),
    Broken(PagedFreeNoDedup, ("FREE-4",)),
    Broken(SlotTwice, ("ALLOC-4",)),
    Broken(LeakOnFree, ("FREE-4",)),
    Broken(AvailableOffByOnePage, ("INV-4",)),
    Broken(DecodeNewPageWrong, ("DECODE-5",), cause="DECODE-4"),
    Broken(ExtendPart1OffByOne, ("EXTEND-5",)),
    Broken(ViewMutatedLater, ("ALIAS-1",)),
    Broken(MergeUnsorted, ("SORT-3",), need_sort=True),
    Broken(TokenFreePrepends, ("FREE-5",), page_size=1, token=True),
    Broken(PageZeroAccepted, ("FREE-2",)),
    Broken(EvictWholeRequest, ("CAP-1",)),
    Broken(ClearKeepsStaged, ("LIFE-1",), need_sort=True),
)

fifopaged = factory_of(FifoPaged, PAGED)
leakonfree = factory_of(LeakOnFree, PAGED)
for _b in BROKEN:  # importable factories, e.g. broken_allocators:slottwice
    globals().setdefault(_b.name, factory_of(_b.cls, TOKEN if _b.token else PAGED))
