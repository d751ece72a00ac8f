"""kvpool's page-interleave pool: logical-page KV sharding over ``N`` ranks (``PINTER-*``).

The same interface as SGLang 0.5.23's ``PageInterleavePoolAllocator``: logical page ``l`` is
rank ``l % N``'s physical page ``l // N``; class ``r``'s free list (int64 tensor) is rank
``r``'s free pages; a chain's position-page ``P`` draws class ``(b + P) % N`` from its rotation
base ``b`` (a new chain's base is the least-full class). Checked mode (the default) raises
:class:`~kvpool.spec.errors.ContractViolation` naming the clause for a caller error and changes
nothing; ``checked=False`` skips the checks (a caller error then corrupts the lists, as in
SGLang). The reference is :class:`kvpool.spec.page_interleave_model.PageInterleaveModel`.
"""

from __future__ import annotations

from typing import Any

import torch
from kvpool.spec.errors import ContractViolation
from kvpool.spec.page_interleave import chain_classes, least_full_class, new_pages_of


class PageInterleavePoolAllocator:
    """Classed paged allocator over ``N`` ranks of ``size`` slots each (see the module
    docstring). Raises ContractViolation (``PINTER-1``) for fewer than two ranks."""

    def __init__(self, size: int, physical_page_size: int, shard_size: int,
                 dtype: torch.dtype = torch.int64, device: str = "cpu", kvcache: Any = None,
                 need_sort: bool = False, *, checked: bool = True) -> None:
        if shard_size < 2 or physical_page_size < 1 or size < 0:
            raise ContractViolation("PINTER-1", f"shard_size {shard_size} >= 2, page size "
                                                f"{physical_page_size} >= 1, size {size} >= 0")
        self.page_size = self.physical_page_size = physical_page_size
        self.shard_size, self.size = shard_size, size * shard_size
        self.dtype, self.device, self.need_sort, self.checked = dtype, device, need_sort, checked
        self.num_pages = self.size // physical_page_size
        self._kvcache = kvcache
        self.clear()

    def clear(self) -> None:
        """Every allocatable page free, class ``r`` ascending from ``N + r`` (``PINTER-13``);
        release lists empty, no group open."""
        n, per_rank = self.shard_size, self.num_pages // self.shard_size
        ids = torch.arange(1, per_rank + 1, dtype=torch.int64, device=self.device)
        self.class_free_pages = [ids * n + r for r in range(n)]
        self.class_release_pages = [torch.empty(0, dtype=torch.int64, device=self.device)
                                    for _ in range(n)]
        self._held = torch.zeros((per_rank + 1) * n, dtype=torch.bool, device=self.device)
        self.free_group: list[torch.Tensor] | None = None

    # -- census ------------------------------------------------------------------------------
    def class_free_page_counts(self) -> list[int]:
        """Free pages per class, free plus release list (``PINTER-2``)."""
        return [len(f) + len(r) for f, r in zip(self.class_free_pages, self.class_release_pages)]

    def available_size(self) -> int:
        """The min-class floor ``N * ps * min(counts)`` (``PINTER-3``)."""
        return self.shard_size * self.page_size * min(self.class_free_page_counts())

    def aggregate_free_size(self) -> int:
        """Free slots over every class (``PINTER-2``); not an admission gate."""
        return self.page_size * sum(self.class_free_page_counts())

    def least_full_class(self) -> int:
        """The class with the most free pages, lowest id on a tie (``PINTER-4``)."""
        return int(least_full_class(self.class_free_page_counts()))

    def get_all_free_pages(self) -> torch.Tensor:
        """Free lists in class order, then release lists (``PINTER-2``); a new tensor."""
        every: torch.Tensor = torch.cat(self.class_free_pages + self.class_release_pages)
        return every

    def merge_and_sort_free(self) -> None:
        """Each class's release list merged into its free list, ascending (``PINTER-9``)."""
        for r in range(self.shard_size):
            if len(self.class_release_pages[r]):
                merged = torch.cat((self.class_free_pages[r], self.class_release_pages[r]))
                self.class_free_pages[r] = torch.sort(merged).values
                self.class_release_pages[r] = self.class_release_pages[r][:0]

    # -- alloc -------------------------------------------------------------------------------
    def alloc_extend(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                     seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor,
                     extend_num_tokens: int, num_new_pages: int | None = None,
                     rotation_bases: list[int | None] | None = None) -> torch.Tensor | None:
        """Pop one page per new position-page, class ``(b_i + P) % N``; None entries of
        ``rotation_bases`` are resolved in place from the least-full class at that request's
        turn (``PINTER-4``, ``PINTER-5``); None when some class cannot supply its pages, nothing
        popped (``PINTER-6``). Raises ContractViolation (``PINTER-11``, checked) for a base list
        of another length, a prefix not page-aligned, an extension opening no page or an
        ``extend_num_tokens`` that is not the batch's."""
        ps, n = self.page_size, self.shard_size
        prefixes, seqs = [int(x) for x in prefix_lens_cpu], [int(x) for x in seq_lens_cpu]
        if rotation_bases is None or len(rotation_bases) != len(prefixes) or not prefixes:
            raise ContractViolation("PINTER-11", "one rotation base slot per request needed")
        if self.checked:
            for prefix, seq in zip(prefixes, seqs):
                new_pages_of(prefix, seq, ps)
            if extend_num_tokens != sum(s - p for p, s in zip(prefixes, seqs)):
                raise ContractViolation("PINTER-11", f"extend_num_tokens {extend_num_tokens} "
                                                     "is not the batch's")
        sim, plans = self.class_free_page_counts(), []
        for i, (prefix, seq) in enumerate(zip(prefixes, seqs)):
            if rotation_bases[i] is None:
                rotation_bases[i] = self._new_chain_base(sim)
            first = (int(rotation_bases[i] or 0) + prefix // ps) % n
            classes = self._chain_classes(first, -(-seq // ps) - prefix // ps)
            plans.append((classes, seq - prefix))
            for c in classes:
                sim[c] -= 1
        if min(sim) < 0:
            return None
        needs = [c - s for c, s in zip(self.class_free_page_counts(), sim)]
        if self.need_sort and any(needs[c] > len(self.class_free_pages[c]) for c in range(n)):
            self.merge_and_sort_free()
        parts = []
        for classes, tokens in plans:
            where = torch.tensor(classes, dtype=torch.int64)
            pages: torch.Tensor = torch.empty(len(classes), dtype=torch.int64, device=self.device)
            for c in range(n):
                count = int((where == c).sum())
                pages[where == c] = self.class_free_pages[c][:count]
                self.class_free_pages[c] = self.class_free_pages[c][count:]
            self._held[pages] = True
            offsets = torch.arange(tokens, dtype=torch.int64, device=self.device)
            parts.append(pages[offsets // ps] * ps + offsets % ps)
        out: torch.Tensor = torch.cat(parts)
        return out

    def _new_chain_base(self, counts: list[int]) -> int:
        """A new chain's rotation base over ``counts`` (``PINTER-4``)."""
        return int(least_full_class(counts))

    def _chain_classes(self, first: int, num_pages: int) -> list[int]:
        """The classes of a chain's ``num_pages`` new pages from ``first`` (``PINTER-5``)."""
        return list(chain_classes(first, num_pages, self.shard_size))

    def alloc_cyclic(self, start_class: int, need_size: int) -> torch.Tensor | None:
        """One new chain of ``need_size`` tokens cycling from ``start_class`` (``PINTER-5``)."""
        lens = torch.tensor([0, need_size], dtype=torch.int64)
        return self.alloc_extend(lens[:1], lens[:1], lens[1:], lens[1:], lens[:1], need_size,
                                 rotation_bases=[start_class])

    # -- free --------------------------------------------------------------------------------
    def _pages_to_free(self, free_index: torch.Tensor) -> torch.Tensor:
        pages: torch.Tensor = torch.unique(free_index.reshape(-1).long() // self.page_size)
        if not self.checked:
            return pages
        n, top = self.shard_size, len(self._held)
        for page in pages.tolist():
            if 0 <= page < n:
                raise ContractViolation("PINTER-11", f"page {page} is reserved; never held")
            if not 0 <= page < top:
                raise ContractViolation("PINTER-11", f"page {page} is outside the pool")
            if not bool(self._held[page]):
                raise ContractViolation("PINTER-11", f"page {page} is not held (free, or freed "
                                                     "in the open group)")
        return pages

    def free(self, free_index: torch.Tensor) -> None:
        """Free the pages of ``free_index`` whole (``PINTER-8``), or hold them until
        ``free_group_end`` inside a group (``PINTER-10``). Raises ContractViolation
        (``PINTER-11``, checked) for a page not held; nothing changes then."""
        if free_index.numel() == 0:
            return
        pages = self._pages_to_free(free_index)
        self._held[pages[(pages >= 0) & (pages < len(self._held))]] = False
        if self.free_group is not None:
            self.free_group.append(pages.clone())
            return
        self._release(pages)

    def _release(self, pages: torch.Tensor) -> None:
        lists = self.class_release_pages if self.need_sort else self.class_free_pages
        owners = pages % self.shard_size
        for r in range(self.shard_size):
            freed = pages[owners == r]
            if freed.numel():
                lists[r] = torch.cat((freed, lists[r]))

    def free_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        """A plain :meth:`free` (``start_pos`` is not needed: pages are keyed by owner)."""
        self.free(free_index)

    def free_group_begin(self) -> None:
        """Open a free group (``PINTER-10``); raises ContractViolation (``PINTER-11``) inside
        an open one."""
        if self.free_group is not None:
            raise ContractViolation("PINTER-11", "free_group_begin inside an open group")
        self.free_group = []

    def free_group_end(self) -> None:
        """Free the group's pages as one free (``PINTER-10``)."""
        pending, self.free_group = self.free_group, None
        if pending:
            self._release(torch.unique(torch.cat(pending)))

    def check_invariants(self) -> None:
        """Raise AssertionError unless every allocatable page is free, released, held or
        pending exactly once, in its own class (``PINTER-1``)."""
        n, per_rank = self.shard_size, self.num_pages // self.shard_size
        pending = torch.cat(self.free_group) if self.free_group else self._held[:0].long()
        every = torch.cat((self.get_all_free_pages(), self._held.nonzero().reshape(-1), pending))
        want = list(range(n, (per_rank + 1) * n))
        assert sorted(every.tolist()) == want, f"PINTER-1: pages {sorted(every.tolist())}"
        for r in range(n):
            merged = torch.cat((self.class_free_pages[r], self.class_release_pages[r]))
            assert bool((merged % n == r).all()), f"PINTER-1: class {r} lists another's page"
