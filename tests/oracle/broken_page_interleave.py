"""Deliberately broken page-interleave allocators: one bug each, on kvpool's
``PageInterleavePoolAllocator``, each with the one ``PINTER-*`` clause the page_interleave family
reports it under at its default budget (``BROKEN_PAGE_INTERLEAVE``;
``test_oracle_page_interleave.py`` runs them). Each has a module-level factory (its name in
lower case) that a printed repro imports."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from kvpool.impl.page_interleave import PageInterleavePoolAllocator
from kvpool.oracle.engine.families import family
from kvpool.oracle.engine.runner import Result, run_config
from kvpool.oracle.engine.target import Config
from kvpool.oracle.families.page_interleave.targets import FULL


class ReservedPagesListed(PageInterleavePoolAllocator):
    """Class ``r``'s free list starts at the reserved logical page ``r`` (PINTER-1)."""

    def clear(self) -> None:
        super().clear()
        self.class_free_pages = [torch.cat((torch.tensor([r]), f))[:-1]
                                 for r, f in enumerate(self.class_free_pages)]


class ReleaseListedFirst(PageInterleavePoolAllocator):
    """``get_all_free_pages()`` lists each class's release list before its free list,
    class by class (PINTER-2)."""

    def get_all_free_pages(self) -> torch.Tensor:
        return torch.cat([x for f, r in zip(self.class_free_pages, self.class_release_pages)
                          for x in (r, f)])


class AggregateAvailable(PageInterleavePoolAllocator):
    """``available_size()`` is the aggregate free size, not the min-class floor (PINTER-3)."""

    def available_size(self) -> int:
        return self.aggregate_free_size()


class TieToHighest(PageInterleavePoolAllocator):
    """A tie for the most free pages goes to the highest class id (PINTER-4)."""

    def _new_chain_base(self, counts: list[int]) -> int:
        return max(range(len(counts)), key=lambda r: (counts[r], r))

    def least_full_class(self) -> int:
        return self._new_chain_base(self.class_free_page_counts())


class ExtensionRestartsAtBase(PageInterleavePoolAllocator):
    """An extension's first new page draws the chain's base class, ignoring the prefix's
    phase (PINTER-5)."""

    def alloc_extend(self, *args: Any, rotation_bases: list[int | None] | None = None,
                     **kwargs: Any) -> torch.Tensor | None:
        prefix = [int(p) // self.page_size for p in kwargs["prefix_lens_cpu"]]
        given = list(rotation_bases or [])
        shifted = [None if b is None else b - p for b, p in zip(given, prefix)]
        out = super().alloc_extend(*args, rotation_bases=shifted, **kwargs)
        if rotation_bases is not None:
            rotation_bases[:] = [b if b is not None else s for b, s in zip(given, shifted)]
        return out


class BatchServedInPart(PageInterleavePoolAllocator):
    """A batch that does not fit whole is served as far as its first request (PINTER-6)."""

    def alloc_extend(self, *args: Any, rotation_bases: list[int | None] | None = None,
                     **kwargs: Any) -> torch.Tensor | None:
        bases = list(rotation_bases or [])
        out = super().alloc_extend(*args, rotation_bases=rotation_bases, **kwargs)
        if out is not None or len(bases) < 2:
            return out
        one = {k: v[:1] if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        one["extend_num_tokens"] = int(one["seq_lens_cpu"][0] - one["prefix_lens_cpu"][0])
        return super().alloc_extend(*args, rotation_bases=bases[:1], **one)


class PagesInPairs(PageInterleavePoolAllocator):
    """A chain's pages go to its classes two at a time: ``c, c, c+1, c+1, ..`` (PINTER-7)."""

    def _chain_classes(self, first: int, num_pages: int) -> list[int]:
        pairs = [(first + j // 2) % self.shard_size for j in range(num_pages)]
        supply = [len(f) for f in self.class_free_pages]
        if any(pairs.count(c) > supply[c] for c in set(pairs)):  # short: cyclic after all
            return list(super()._chain_classes(first, num_pages))
        return pairs


class FreeAppends(PageInterleavePoolAllocator):
    """``free`` puts the freed pages at the back of their class lists (PINTER-8)."""

    def _release(self, pages: torch.Tensor) -> None:
        lists = self.class_release_pages if self.need_sort else self.class_free_pages
        for r in range(self.shard_size):
            freed = pages[pages % self.shard_size == r]
            lists[r] = torch.cat((lists[r], freed))


class MergeUnsorted(PageInterleavePoolAllocator):
    """need_sort: the merge appends the release lists without sorting (PINTER-9)."""

    def merge_and_sort_free(self) -> None:
        for r in range(self.shard_size):
            self.class_free_pages[r] = torch.cat((self.class_free_pages[r],
                                                  self.class_release_pages[r]))
            self.class_release_pages[r] = self.class_release_pages[r][:0]


class GroupIgnored(PageInterleavePoolAllocator):
    """A free inside a free group is released at once (PINTER-10)."""

    def free_group_begin(self) -> None:
        super().free_group_begin()
        self.free_group = None


class UncheckedFree(PageInterleavePoolAllocator):
    """``free`` accepts a page it does not hold: a double free, a reserved page (PINTER-11)."""

    def free(self, free_index: torch.Tensor) -> None:
        self.checked = False
        try:
            super().free(free_index)
        finally:
            self.checked = True


class SharedTieCursor(PageInterleavePoolAllocator):
    """Ties are broken by a cursor kept on the class, shared by every allocator of the
    process: one rank's draw moves the next rank's, so two ranks fed the same calls pick
    different bases (PINTER-12)."""

    cursor: ClassVar[list[int]] = [0]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        SharedTieCursor.cursor[0] = 0
        super().__init__(*args, **kwargs)

    def _new_chain_base(self, counts: list[int]) -> int:
        tied = [r for r, c in enumerate(counts) if c == max(counts)]
        pick = tied[SharedTieCursor.cursor[0] % len(tied)]
        SharedTieCursor.cursor[0] += len(tied) > 1
        return pick


class ClearKeepsHeldPages(PageInterleavePoolAllocator):
    """``clear()`` after the first lists only the pages that were free: held pages stay off
    the lists (PINTER-13)."""

    def clear(self) -> None:
        if not hasattr(self, "_held"):
            super().clear()
            return
        free = [torch.sort(torch.cat((f, r))).values
                for f, r in zip(self.class_free_pages, self.class_release_pages)]
        super().clear()
        self.class_free_pages = free


@dataclass(frozen=True)
class BrokenPageInterleave:
    """A broken page-interleave allocator, the clause the family reports it under
    (``clauses``, a 1-tuple) and the clause its bug breaks (``cause``; the same here)."""

    cls: type[PageInterleavePoolAllocator]
    clauses: tuple[str, ...]
    module: str = "broken_page_interleave"
    cause: str = ""

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

    def run(self, **budget: Any) -> Result:
        """The family's run on this allocator, configuration by configuration (page sizes 1,
        4, 16; need_sort off, on) until one fails, at the family's default budget unless
        ``budget`` (``run_config``'s keywords) says otherwise; the failing run's result, else
        the last one's."""
        fam = family("page_interleave")
        budget = {"max_examples": fam.default_examples, "step_count": fam.default_steps,
                  **budget}
        result = None
        for page_size in FULL.page_sizes:
            for need_sort in FULL.need_sort:
                result = run_config(fam.target(self.factory), Config(page_size, need_sort),
                                    **budget)
                if result.failure is not None or result.error is not None:
                    return result
        assert result is not None
        return result

    def reported(self, **budget: Any) -> str | None:
        """The clause the run reports (None: it passed)."""
        result = self.run(**budget)
        assert result.error is None, result.error
        return result.failure.clause if result.failure is not None else None


BROKEN_PAGE_INTERLEAVE = (
    BrokenPageInterleave(ReservedPagesListed, ("PINTER-1",)),
    BrokenPageInterleave(ReleaseListedFirst, ("PINTER-2",)),
    BrokenPageInterleave(AggregateAvailable, ("PINTER-3",)),
    BrokenPageInterleave(TieToHighest, ("PINTER-4",)),
    BrokenPageInterleave(ExtensionRestartsAtBase, ("PINTER-5",)),
    BrokenPageInterleave(BatchServedInPart, ("PINTER-6",)),
    BrokenPageInterleave(PagesInPairs, ("PINTER-7",)),
    BrokenPageInterleave(FreeAppends, ("PINTER-8",)),
    BrokenPageInterleave(MergeUnsorted, ("PINTER-9",)),
    BrokenPageInterleave(GroupIgnored, ("PINTER-10",)),
    BrokenPageInterleave(UncheckedFree, ("PINTER-11",)),
    BrokenPageInterleave(SharedTieCursor, ("PINTER-12",)),
    BrokenPageInterleave(ClearKeepsHeldPages, ("PINTER-13",)),
)


def _factory(cls: type[PageInterleavePoolAllocator]) -> Callable[..., Any]:
    def factory(*, size: int, page_size: int, shard_size: int, need_sort: bool = False,
                device: str = "cpu") -> Any:
        return cls(size, page_size, shard_size, torch.int64, device, None, need_sort)

    factory.__name__ = factory.__qualname__ = cls.__name__.lower()
    factory.kvpool_page_interleave_capabilities = FULL  # type: ignore[attr-defined]
    return factory


for _broken in BROKEN_PAGE_INTERLEAVE:
    globals()[_broken.name] = _factory(_broken.cls)
