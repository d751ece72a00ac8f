"""The smallest allocator the oracle judges: five methods, FIFO page reuse, no checked mode.

``make`` is what a new user writes first (docs/writing-a-target.md shows the same code): only
``alloc``, ``free``, ``available_size``, ``clear`` and ``get_all_free_pages``, and no capability
declaration, so ``python -m kvpool.oracle minimal_allocator:make`` must pass with no options.
``make_checked`` raises ``ValueError`` on caller errors (double free, page 0, out of range,
unaligned or negative ``alloc``) and passes with ``--declare checked=ValueError``.
``make_nodedup`` plants one bug: a paged ``free`` releases a page once per slot (``FREE-4``);
``make_dirty_reject`` another: a rejected unaligned ``alloc`` has already taken a page
(``ERR-1``); ``make_page0`` one its constructor already shows: page 0 (the padding page) is
listed free (``INV-3``).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import torch


class MinimalAllocator:
    """Pages ``1..size // page_size`` in a FIFO queue: freed pages go to the back."""

    def __init__(self, size: int, page_size: int, device: str = "cpu") -> None:
        self.page_size, self.num_pages, self.device = page_size, size // page_size, device
        self.free_pages: deque[int] = deque()
        self.clear()

    def clear(self) -> None:
        self.free_pages = deque(range(1, self.num_pages + 1))

    def available_size(self) -> int:
        return len(self.free_pages) * self.page_size

    def alloc(self, need_size: int) -> torch.Tensor | None:
        num_pages = need_size // self.page_size
        if num_pages > len(self.free_pages):
            return None
        pages = [self.free_pages.popleft() for _ in range(num_pages)]
        slots = [p * self.page_size + k for p in pages for k in range(self.page_size)]
        return torch.tensor(slots, dtype=torch.int64, device=self.device)

    def pages_of(self, free_index: torch.Tensor) -> list[int]:
        """The distinct pages ``free_index`` touches, ascending."""
        return sorted({int(s) // self.page_size for s in free_index.tolist()})

    def free(self, free_index: torch.Tensor) -> None:
        self.free_pages.extend(self.pages_of(free_index))

    def get_all_free_pages(self) -> torch.Tensor:
        return torch.tensor(list(self.free_pages), dtype=torch.int64, device=self.device)

    def check_invariants(self) -> None:
        pages = list(self.free_pages)
        assert len(pages) == len(set(pages)), f"a page listed twice: {pages}"
        assert all(1 <= p <= self.num_pages for p in pages), f"a page out of range: {pages}"


class CheckedMinimalAllocator(MinimalAllocator):
    """Raises ``ValueError`` on a caller error, before changing anything."""

    def alloc(self, need_size: int) -> torch.Tensor | None:
        if need_size < 0 or need_size % self.page_size:
            raise ValueError(f"alloc({need_size}): not a whole number of pages")
        return super().alloc(need_size)

    def free(self, free_index: torch.Tensor) -> None:
        slots = [int(s) for s in free_index.tolist()]
        limit = (self.num_pages + 1) * self.page_size
        bad = [s for s in slots if not self.page_size <= s < limit]
        if bad:
            raise ValueError(f"free: slots {bad} are not on pages 1..{self.num_pages}")
        already = set(self.pages_of(free_index)) & set(self.free_pages)
        if already:
            raise ValueError(f"double free: pages {sorted(already)} are free already")
        super().free(free_index)


class NoDedupAllocator(MinimalAllocator):
    """Planted bug (``FREE-4``): ``free`` releases a page once per slot, not once per page."""

    def free(self, free_index: torch.Tensor) -> None:
        self.free_pages.extend(int(s) // self.page_size for s in free_index.tolist())


class DirtyRejectAllocator(CheckedMinimalAllocator):
    """Planted bug (``ERR-1``): an unaligned ``alloc`` takes a page before it is rejected."""

    def alloc(self, need_size: int) -> torch.Tensor | None:
        if need_size % self.page_size and self.free_pages:
            self.free_pages.popleft()
        return super().alloc(need_size)


class PageZeroAllocator(MinimalAllocator):
    """Lists page 0, which no allocator may hand out, among its free pages from the start."""

    def clear(self) -> None:
        self.free_pages = deque(range(0, self.num_pages))


def make(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    """A factory that declares nothing (the oracle infers what it can check)."""
    return MinimalAllocator(size, page_size, device)


def make_checked(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    return CheckedMinimalAllocator(size, page_size, device)


def make_nodedup(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    return NoDedupAllocator(size, page_size, device)


def make_raises(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    """A factory whose constructor fails (a usage error for the oracle, not a divergence)."""
    raise RuntimeError(f"no pool of {size} tokens today")


def make_dirty_reject(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    return DirtyRejectAllocator(size, page_size, device)


def make_page0(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    return PageZeroAllocator(size, page_size, device)
