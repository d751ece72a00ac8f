"""A from-scratch paged allocator that validates ``alloc`` and ``free`` only.

What a new user writes as a first checked allocator: a lowest-id-first free set, its own
``AllocatorError`` for caller errors of ``alloc`` and ``free``, and free groups that do not
validate anything (a nested ``free_group_begin`` is accepted, not rejected). Declared
``checked={("alloc", "free"): AllocatorError}`` it conforms; declared ``checked=AllocatorError``
(every call) the oracle sends a nested ``free_group_begin`` and reports ``GROUP-1``.
"""

from __future__ import annotations

from typing import Any

import torch
from kvpool.oracle.engine.capabilities import Capabilities


class AllocatorError(Exception):
    """A caller error: the call changed nothing."""


class LowestFirstAllocator:
    """Pages ``1..size // page_size``; ``alloc`` hands out the lowest free page ids first."""

    def __init__(self, size: int, page_size: int, device: str = "cpu") -> None:
        self.page_size, self.num_pages, self.device = page_size, size // page_size, device
        self.free_set: set[int] = set(range(1, self.num_pages + 1))
        self.group: list[list[int]] | None = None

    def available_size(self) -> int:
        return len(self.free_set) * self.page_size

    def get_all_free_pages(self) -> torch.Tensor:
        return torch.tensor(sorted(self.free_set), dtype=torch.int64, device=self.device)

    def alloc(self, need_size: int) -> torch.Tensor | None:
        if need_size < 0 or need_size % self.page_size:
            raise AllocatorError(f"alloc({need_size}): not a whole number of pages")
        num_pages = need_size // self.page_size
        if num_pages > len(self.free_set):
            return None
        pages = sorted(self.free_set)[:num_pages]
        self.free_set.difference_update(pages)
        slots = [p * self.page_size + k for p in pages for k in range(self.page_size)]
        return torch.tensor(slots, dtype=torch.int64, device=self.device)

    def _pages(self, slots: list[int]) -> set[int]:
        limit = (self.num_pages + 1) * self.page_size
        bad = [s for s in slots if not self.page_size <= s < limit]
        if bad:
            raise AllocatorError(f"free: slots {bad} are not on pages 1..{self.num_pages}")
        pages = {s // self.page_size for s in slots}
        if pages & self.free_set:
            raise AllocatorError(f"double free: pages {sorted(pages & self.free_set)} are free")
        return pages

    def free(self, free_index: torch.Tensor) -> None:
        slots = [int(s) for s in free_index.tolist()]
        pages = self._pages(slots)  # validated before anything changes
        if self.group is not None:
            self.group.append(slots)
        else:
            self.free_set |= pages

    def free_group_begin(self) -> None:
        if self.group is None:  # nested: accepted, nothing validated
            self.group = []

    def free_group_end(self) -> None:
        if self.group is None:
            return
        slots = [s for chunk in self.group for s in chunk]
        self.group = None
        self.free_set |= {s // self.page_size for s in slots}


class PageIdsAllocator(LowestFirstAllocator):
    """The same allocator with SGLang's ``free_page_ids``, checked as ``free`` is: a page id
    outside the pool, not handed out or named twice raises AllocatorError, nothing freed."""

    def free_page_ids(self, page_ids: torch.Tensor) -> None:
        pages = [int(p) for p in page_ids.tolist()]
        if len(set(pages)) != len(pages):
            raise AllocatorError(f"free_page_ids: a page is named twice in {pages}")
        self.free(torch.tensor([p * self.page_size for p in pages], dtype=torch.int64))


def make_page_ids(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    """Declares ``checked`` for ``alloc`` and ``free`` (which covers ``free_page_ids``)."""
    return PageIdsAllocator(size, page_size, device)


def make_partial(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    """Declares ``checked`` for ``alloc`` and ``free`` only; the rest is inferred."""
    return LowestFirstAllocator(size, page_size, device)


def make_all_checked(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    """The same allocator declared as checked for every call (wrongly: groups are not)."""
    return LowestFirstAllocator(size, page_size, device)


make_partial.kvpool_capabilities = Capabilities(  # type: ignore[attr-defined]
    checked={("alloc", "free"): AllocatorError}
)
make_page_ids.kvpool_capabilities = Capabilities(  # type: ignore[attr-defined]
    checked={("alloc", "free"): AllocatorError}
)
make_all_checked.kvpool_capabilities = Capabilities(  # type: ignore[attr-defined]
    checked=AllocatorError
)
