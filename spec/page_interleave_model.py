"""The page-interleave pool's reference model (``PINTER-*``, SPEC.md section 19).

A pool of ``N`` ranks of ``size`` slots each, page size ``ps``: every rank has ``P = size // ps``
allocatable physical pages ``1..P`` (its page 0 is the padding page), so logical pages
``0..N-1`` are reserved and class ``r``'s free list starts as ``[N + r, 2N + r, .., P*N + r]``.
Lists of ints where SGLang keeps int64 tensors; slots are ``page * ps + offset``::

    N=2, P=3   class 0 [2, 4, 6]   class 1 [3, 5, 7]   available_size() == 2 * ps * 3
    alloc_extend([(0, 3*ps)], [None]) -> base 0 (tie: lowest class), pages [2, 3, 4]

Caller errors raise :class:`~kvpool.spec.errors.ContractViolation` naming the clause and change
nothing (``ERR-1``). The state is a pure function of the call stream (``PINTER-12``):
:meth:`PageInterleaveModel.digest_state` is what every rank of a shard group must agree on.
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import ContractViolation
from .page_interleave import (
    chain_classes,
    class_counts,
    least_full_class,
    min_class_floor,
    new_pages_of,
    page_class,
    start_class,
)

Request = tuple[int, int]  # (prefix_len, seq_len) in tokens


class PageInterleaveModel:
    """Per-class free and release lists, the held pages and the open free group (``pending``:
    pages freed inside it, None: no group). ``rule`` is the clause that decided the last call's
    effect (a difference there is reported under it).

    inv: all(page_class(p, self.shard_size) == r for r in range(self.shard_size) for p in self.free_lists[r] + self.release_lists[r])
    """

    def __init__(self, size: int, page_size: int, shard_size: int, need_sort: bool) -> None:
        """A fresh pool (``PINTER-1``). Raises ContractViolation (``PINTER-1``) for fewer than
        two ranks, a page size below one or a negative size."""
        if shard_size < 2 or page_size < 1 or size < 0:
            raise ContractViolation("PINTER-1", f"shard_size {shard_size} >= 2, page_size "
                                                f"{page_size} >= 1 and size {size} >= 0 needed")
        self.size, self.page_size, self.shard_size = size, page_size, shard_size
        self.need_sort = need_sort
        self.pages_per_rank = size // page_size
        self.pending: set[int] | None = None
        self.clear()
        self.rule = "PINTER-1"

    # -- census ------------------------------------------------------------------------------
    def counts(self) -> list[int]:
        """Free pages per class, free list plus release list (``PINTER-2``)."""
        return [len(f) + len(r) for f, r in zip(self.free_lists, self.release_lists)]

    def available_size(self) -> int:
        """The min-class floor ``N * ps * min(counts)`` (``PINTER-3``)."""
        return min_class_floor(self.counts(), self.page_size)

    def aggregate_free_size(self) -> int:
        """Free slots over all classes, ``ps * sum(counts)`` (``PINTER-2``)."""
        return self.page_size * sum(self.counts())

    def least_full_class(self) -> int:
        """The class with the most free pages, lowest id on a tie (``PINTER-4``)."""
        return least_full_class(self.counts())

    def all_free_pages(self) -> list[int]:
        """``get_all_free_pages()``: the free lists in class order, then the release lists in
        class order (``PINTER-2``)."""
        return [p for lst in (*self.free_lists, *self.release_lists) for p in lst]

    def digest_state(self) -> tuple[object, ...]:
        """What every rank of a shard group holds alike (``PINTER-12``)."""
        group = None if self.pending is None else sorted(self.pending)
        return (tuple(map(tuple, self.free_lists)), tuple(map(tuple, self.release_lists)), group)

    # -- alloc -------------------------------------------------------------------------------
    def alloc_extend(self, requests: Sequence[Request],
                     bases: Sequence[int | None]) -> tuple[list[int] | None, list[int]]:
        """One batch of extensions: ``(slots, resolved bases)``; slots None when a class cannot
        supply its pages (``PINTER-6``), nothing popped (the bases are resolved even then).

        Each request ``(prefix_len, seq_len)`` opens ``ceil(seq/ps) - prefix/ps`` pages; a None
        base is the least-full class over the counts after the earlier requests' draws
        (``PINTER-4``); position-page ``j`` pops the front of class ``(b + prefix/ps + j) % N``
        (``PINTER-5``), after a need_sort merge when some class's free list alone is short
        (``PINTER-9``). Raises ContractViolation (``PINTER-11``) for a base list of another
        length, a prefix not page-aligned or an extension opening no page."""
        n, ps = self.shard_size, self.page_size
        if len(bases) != len(requests) or not requests:
            raise ContractViolation("PINTER-11", f"{len(requests)} requests, {len(bases)} "
                                                 "rotation bases: one per request, at least one")
        sim = self.counts()
        resolved: list[int] = []
        plans: list[tuple[int, int, int]] = []  # (start class, new pages, extend tokens)
        for (prefix_len, seq_len), base in zip(requests, bases):
            opened = new_pages_of(prefix_len, seq_len, ps)
            b = least_full_class(sim) if base is None else base
            first = start_class(b, prefix_len // ps, n)
            resolved.append(b)
            plans.append((first, opened, seq_len - prefix_len))
            sim = [s - k for s, k in zip(sim, class_counts(first, opened, n))]
        self.rule = "PINTER-5"
        if min(sim) < 0:
            self.rule = "PINTER-6"
            return None, resolved
        needs = [c - s for c, s in zip(self.counts(), sim)]
        if self.need_sort and any(needs[c] > len(self.free_lists[c]) for c in range(n)):
            self.merge_and_sort_free()
            self.rule = "PINTER-9"
        out: list[int] = []
        for first, opened, tokens in plans:
            pages = [self.free_lists[c].pop(0) for c in chain_classes(first, opened, n)]
            self.held.update(pages)
            out += [pages[k // ps] * ps + k % ps for k in range(tokens)]
        return out, resolved

    def alloc_cyclic(self, first_class: int, need_size: int) -> list[int] | None:
        """One new chain of ``need_size`` tokens whose owners cycle from ``first_class`` (taken
        mod N): ``alloc_extend([(0, need_size)], [first_class])`` (``PINTER-5``)."""
        return self.alloc_extend([(0, need_size)], [first_class])[0]

    # -- free --------------------------------------------------------------------------------
    def check_free(self, slots: Sequence[int]) -> list[int]:
        """The pages ``slots`` free, distinct and ascending; raises ContractViolation
        (``PINTER-11``) for a slot on a reserved page, past the pool, or on a page not held
        (free, or freed already inside the open group). A page named by several slots is
        freed once."""
        top = (self.pages_per_rank + 1) * self.shard_size
        pages = sorted({s // self.page_size if s >= 0 else -1 for s in slots})
        for page in pages:
            if 0 <= page < self.shard_size:
                raise ContractViolation("PINTER-11", f"page {page} is reserved (physical page "
                                                     f"0 of rank {page}); never held")
            if not 0 <= page < top:
                raise ContractViolation("PINTER-11", f"page {page} is outside the pool "
                                                     f"({self.shard_size}..{top - 1})")
            if page not in self.held:
                raise ContractViolation("PINTER-11", f"page {page} is not held (free, or freed "
                                                     "in the open group)")
        return pages

    def free(self, slots: Sequence[int]) -> None:
        """Free the pages of ``slots`` whole (``PINTER-8``): per class, the freed pages in
        ascending order go to the front of the free list (need_sort: of the release list);
        inside a group they wait for its end (``PINTER-10``). Empty: nothing."""
        pages = self.check_free(slots)
        self.held.difference_update(pages)
        if self.pending is not None:
            self.rule = "PINTER-10"
            self.pending.update(pages)
            return
        self.rule = "PINTER-8"
        self._release(pages)

    def _release(self, pages: list[int]) -> None:
        lists = self.release_lists if self.need_sort else self.free_lists
        for r in range(self.shard_size):
            lists[r] = [p for p in pages if page_class(p, self.shard_size) == r] + lists[r]

    def free_group_begin(self) -> None:
        """Open a free group (``PINTER-10``). Raises ContractViolation (``PINTER-11``) inside
        an open one."""
        if self.pending is not None:
            raise ContractViolation("PINTER-11", "free_group_begin inside an open group")
        self.rule, self.pending = "PINTER-10", set()

    def free_group_end(self) -> None:
        """Close the group: its pages are freed as one free (``PINTER-8`` on their union);
        without an open group nothing happens (``PINTER-10``)."""
        pending, self.pending = self.pending, None
        self.rule = "PINTER-10"
        if pending:
            self._release(sorted(pending))

    def merge_and_sort_free(self) -> None:
        """Every class with a non-empty release list: free list and release list merged,
        ascending; release list emptied (``PINTER-9``)."""
        self.rule = "PINTER-9"
        for r in range(self.shard_size):
            if self.release_lists[r]:
                self.free_lists[r] = sorted(self.free_lists[r] + self.release_lists[r])
                self.release_lists[r] = []

    def clear(self) -> None:
        """The fresh state (``PINTER-13``): class ``r`` free ``[N+r, 2N+r, .., P*N+r]``, no
        release list, nothing held, no group."""
        n = self.shard_size
        self.rule = "PINTER-13"
        self.free_lists = [[k * n + r for k in range(1, self.pages_per_rank + 1)] for r in range(n)]
        self.release_lists: list[list[int]] = [[] for _ in range(n)]
        self.held: set[int] = set()
        self.pending = None

    def check_invariants(self) -> None:
        """Raise AssertionError unless every allocatable page is free, released, held or
        pending in the group exactly once, each listed in its own class (``PINTER-1``)."""
        n = self.shard_size
        every = [*self.all_free_pages(), *sorted(self.held), *sorted(self.pending or ())]
        want = list(range(n, (self.pages_per_rank + 1) * n))
        assert sorted(every) == want, f"PINTER-1: pages {sorted(every)} are not {want}"
        for r in range(n):
            assert all(p % n == r for p in self.free_lists[r] + self.release_lists[r]), (
                f"PINTER-1: class {r} lists a page of another owner")
