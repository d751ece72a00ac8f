# mypy: allow-subclassing-any
"""Broken allocators built on ``kvpool.impl``: small subclasses, each overriding one method.

They complement ``broken_allocators.py`` (built on the spec adapter) with the same bug classes
planted in the production allocator, checked mode on. ``BROKEN_IMPL`` lists each with the
configuration that reaches the bug and the clauses a report may name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from broken_allocators import Broken
from kvpool.impl import PagedTokenToKVPoolAllocator
from kvpool.oracle.engine.capabilities import PAGED
from kvpool.spec import ContractViolation


class ImplDoubleFreeAccepted(PagedTokenToKVPoolAllocator):
    """B2: checked mode lets a double free through (the page is listed twice)."""

    def free(self, free_index: torch.Tensor) -> None:
        try:
            super().free(free_index)
        except ContractViolation as err:
            if err.clause != "FREE-3":
                raise
            with contextlib.suppress(ContractViolation):  # no room left: dropped silently
                self._release(self._pages_of_free(free_index))


class ImplGroupEndTwice(PagedTokenToKVPoolAllocator):
    """B3: a second ``free_group_end`` releases the previous group's ``free()`` pages again."""

    _last: torch.Tensor | None = None

    def free_group_end(self) -> None:
        if self.free_group is None:
            if self._last is not None:
                self._release(self._last)
            return
        # the group's pages as its end releases them (a new array: the release leaves them)
        self._last = self._pages_of_group(self.free_group) if self.free_group else None
        super().free_group_end()


class ImplNestedBeginDrops(PagedTokenToKVPoolAllocator):
    """B4: a nested ``free_group_begin`` restarts the group and drops the deferred frees."""

    def free_group_begin(self) -> None:
        state: Any = self
        if state.free_group is not None:
            state.free_group = []
            state._group_segments = []
            return
        super().free_group_begin()


class ImplDeferredNotCopied(PagedTokenToKVPoolAllocator):
    """B5: a deferred ``free()`` keeps the caller's tensor instead of a copy, and reads it only
    at ``free_group_end`` (what the caller wrote there since is released)."""

    _kept: list[torch.Tensor]

    def free(self, free_index: torch.Tensor) -> None:
        super().free(free_index)
        if self.free_group:
            self._kept = [*getattr(self, "_kept", []), free_index]

    def free_group_end(self) -> None:
        kept, self._kept = getattr(self, "_kept", []), []
        if self.free_group and kept:
            self.free_group = [self._ops.defer(t) for t in kept]  # the tensors as they are now
        super().free_group_end()


class ImplUnalignedFloored(PagedTokenToKVPoolAllocator):
    """B7: an unaligned ``alloc`` is floored to whole pages even in checked mode."""

    def alloc(self, need_size: int) -> torch.Tensor | None:
        if need_size >= 0:
            need_size -= need_size % self.page_size
        out: torch.Tensor | None = super().alloc(need_size)
        return out


class ImplNoMergeBeforeNone(PagedTokenToKVPoolAllocator):
    """B16: ``alloc`` gives up when the free list is short, without merging staged pages."""

    def alloc(self, need_size: int) -> torch.Tensor | None:
        aligned = need_size % self.page_size == 0  # an unaligned request is still rejected
        if need_size > 0 and aligned and need_size // self.page_size > len(self._free):
            return None
        out: torch.Tensor | None = super().alloc(need_size)
        return out


class ImplSegmentsOneByOne(PagedTokenToKVPoolAllocator):
    """B17(c): segments are freed one by one, so a shared boundary page is rejected as a
    double free instead of being released once."""

    def free_segments(self, segments: Any) -> None:
        for free_index, start_pos in segments:
            super().free_segments([(free_index, start_pos)])


class ImplAvailableOffByOnePage(PagedTokenToKVPoolAllocator):
    """Contract: ``available_size()`` counts one page too many when the free list is empty."""

    def available_size(self) -> int:
        n: int = super().available_size()
        return n + self.page_size if len(self._free) == 0 else n


class ImplViewMutatedLater(PagedTokenToKVPoolAllocator):
    """ALIAS-1: ``alloc`` returns a view into a scratch buffer that the next ``alloc`` reuses."""

    _scratch: torch.Tensor | None = None

    def alloc(self, need_size: int) -> torch.Tensor | None:
        out = super().alloc(need_size)
        if out is None:
            return None
        if self._scratch is None:
            self._scratch = torch.zeros(4096, dtype=torch.int64, device=out.device)
        view = self._scratch[: out.numel()]
        view.copy_(out)
        return view


class ImplMergeUnsorted(PagedTokenToKVPoolAllocator):
    """Order: ``merge_and_sort_free`` appends the staged pages without sorting."""

    def merge_and_sort_free(self) -> None:
        if len(self._staged) == 0:
            return
        merged = torch.cat((self._free.contents(), self._staged.contents()))
        self._free.replace_front(len(self._free), merged)
        self._free_sorted = False
        self._staged.reset()
        if self._table is not None:
            self._table.merged()


def impl_factory(cls: type[PagedTokenToKVPoolAllocator]) -> Callable[..., Any]:
    """``factory(size=, page_size=, need_sort=, device=)`` building ``cls`` in checked mode."""

    def factory(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
        return cls(size, page_size, torch.float16, device, None, need_sort, checked=True)

    factory.__name__ = factory.__qualname__ = cls.__name__.lower()
    factory.kvpool_capabilities = PAGED  # type: ignore[attr-defined]
    return factory


CORRECT = "from kvpool.oracle.families.single.targets import kvpool_paged as factory"
BROKEN_IMPL = (
    Broken(ImplDoubleFreeAccepted, ("FREE-3",), module="broken_impl", correct=CORRECT),
    Broken(
        ImplGroupEndTwice,
        ("GROUP-2",),
        module="broken_impl",
        correct=CORRECT,
    ),
    Broken(ImplNestedBeginDrops, ("GROUP-1",), module="broken_impl", correct=CORRECT),
    Broken(
        ImplDeferredNotCopied,
        ("GROUP-3",),
        module="broken_impl",
        correct=CORRECT,
    ),
    Broken(ImplUnalignedFloored, ("ALLOC-1",), module="broken_impl", correct=CORRECT),
    Broken(
        ImplNoMergeBeforeNone,
        ("ALLOC-3",),
        need_sort=True,
        module="broken_impl",
        correct=CORRECT,
    ),
    Broken(ImplSegmentsOneByOne, ("SEG-5",), module="broken_impl", correct=CORRECT),
    Broken(ImplAvailableOffByOnePage, ("INV-4",), module="broken_impl", correct=CORRECT),
    Broken(ImplViewMutatedLater, ("ALIAS-1",), module="broken_impl", correct=CORRECT),
    Broken(
        ImplMergeUnsorted,
        ("SORT-3",),
        need_sort=True,
        module="broken_impl",
        correct=CORRECT,
    ),
)
for _b in BROKEN_IMPL:  # importable factories, e.g. broken_impl:implslottwice
    globals()[_b.name] = impl_factory(_b.cls)
