"""The reference model of SGLang's ``BaseTokenToKVPoolAllocator`` in SGLang's exact order.

Plain lists of ints stand for the torch tensors. One class covers the token allocator
(``paged=False``, page size 1: pages are slots) and the paged allocator (``paged=True``, any page
size >= 1). Every public method validates its call first (``kvpool.spec.rules``) and raises
:class:`~kvpool.spec.errors.ContractViolation` without changing anything on bad input (``ERR-1``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from . import rules
from .census import census, decode_capacity_ok, describe_pages, eviction_shortfall
from .errors import ContractViolation
from .layout import extend_row, merge_bound, page_slots
from .model_segments import SegmentReleases
from .rules import DEFERRED, DEFERRED_SEGMENT, FREE, OWNED, STAGED


class TreeCache(Protocol):
    """The minimal prefix-cache protocol of the capacity hooks (``CAP-1``).

    ``evict(num_tokens)`` frees unlocked cache entries, through the allocator's ``free``, until
    about ``num_tokens`` tokens came back or nothing evictable remains.
    """

    def evict(self, num_tokens: int) -> None: ...


@dataclass(frozen=True)
class ResizeConfig:
    """What ``resize`` reads from SGLang's server config (``LIFE-2``)."""

    max_total_num_tokens: int


class AllocatorModel(SegmentReleases):
    """State and operations of a token or paged KV allocator, in SGLang's reference order.

    State (``MODEL-*``): ``num_pages = size // page_size`` pages ``1..num_pages`` (``MODEL-1``:
    page 0 is the padding page, never free); ``free_pages`` is the ordered free list (allocations take its front);
    ``staged`` holds pages released under ``need_sort`` until a merge; ``group`` holds the
    deferred ``free()`` inputs of the open free group (``None`` when no group is open) and
    ``group_segments`` its deferred segment pages; every other page is owned by the caller.

    Order (``*-5`` clauses): token frees append (a FIFO ring); paged ``free()`` prepends its sorted
    distinct pages and segment frees prepend their pages in row order (a LIFO stack); with
    ``need_sort`` all frees are staged (``SORT-1``) and merged (sorted with the free list) only
    when an allocation runs short. Every list a method returns is new; no later call mutates it
    (``ALIAS-1``); inputs are copied, never read after a call (``ALIAS-2``); what the caller does
    to a returned list, the census included, changes nothing here (``ALIAS-3``).

    inv: sorted(self.free_pages + self.staged + self.owned_pages()) == list(range(1, self.num_pages + 1))
    inv: not self.verify_byte_accounting()
    inv: self.paged or self.page_size == 1
    inv: self.free_group is not None or not self.deferred_pages()
    """

    def __init__(self, size: int, page_size: int = 1, *, paged: bool | None = None,
                 need_sort: bool = False) -> None:
        """A pool of pages ``1..size // page_size``, all free; page 0 is padding (``MODEL-1``).

        ``paged`` defaults to ``page_size > 1``; a token allocator has page size 1. Raises
        ValueError for a page size the kind cannot have, ContractViolation (``LIFE-2``) for a
        size that is not a non-negative int.
        """
        self.paged = page_size > 1 if paged is None else paged
        if page_size < 1 or (not self.paged and page_size != 1):
            raise ValueError(f"page_size {page_size} is invalid for a {'paged' if self.paged else 'token'} allocator")
        self.page_size = page_size
        self.need_sort = need_sort
        self.size = rules.check_count(size, "size", "LIFE-2")
        self.clear()

    # -- lifecycle -------------------------------------------------------------------------
    def clear(self) -> None:
        """Every page free in ascending order, nothing staged, no open group (``LIFE-1``).

        post: self.free_pages == list(range(1, self.num_pages + 1)) and self.staged == []
        post: self.free_group is None and self.num_pages == self.size // self.page_size
        """
        self.num_pages = self.size // self.page_size
        self.free_pages: list[int] = list(range(1, self.num_pages + 1))
        self.staged: list[int] = []
        self.free_group: list[list[int]] | None = None
        self.group_segments: list[list[int]] = []
        self._status: list[str] = ["reserved"] + [FREE] * self.num_pages

    def resize(self, config: ResizeConfig) -> None:
        """New ``size`` (tokens) from ``config.max_total_num_tokens``, then ``clear()`` (``LIFE-2``).

        post: self.size == config.max_total_num_tokens
        post: self.free_pages == list(range(1, self.num_pages + 1)) and self.staged == []
        raises: rules.ContractViolation
        """
        self.size = rules.check_count(config.max_total_num_tokens, "max_total_num_tokens", "LIFE-2")
        self.clear()

    # -- queries ---------------------------------------------------------------------------
    def available_size(self) -> int:
        """Tokens free or staged: ``(len(free) + len(staged)) * page_size`` (``INV-4``); pages
        deferred by an open group are not available (``GROUP-5``).

        post: __return__ == len(self.get_all_free_pages()) * self.page_size
        """
        return (len(self.free_pages) + len(self.staged)) * self.page_size

    def get_all_free_pages(self) -> list[int]:
        """The free list followed by the staged pages, in order (``LIFE-4``); a new list, so
        what the caller writes into it changes nothing here (``ALIAS-3``).

        post: __return__ == self.free_pages + self.staged
        """
        return self.free_pages + self.staged

    def status_of(self, page: int) -> str:
        """``free``, ``staged``, ``owned``, ``deferred`` or ``deferred-seg`` for a page 1..num_pages
        (``MODEL-3``: exactly one status per page)."""
        return self._status[page]

    def owned_pages(self) -> list[int]:
        """Pages handed out and not yet released (deferred pages included), ascending."""
        return [p for p in range(1, self.num_pages + 1) if self._status[p] not in (FREE, STAGED)]

    def translate_kv_indices_for_transfer(self, kv_indices: Sequence[int]) -> list[int]:
        """Identity: a static pool's slot ids address its buffers directly (``LIFE-3``).

        post: __return__ == list(kv_indices)
        """
        return list(kv_indices)

    # -- allocation ------------------------------------------------------------------------
    def alloc(self, need_size: int) -> list[int] | None:
        """``need_size`` slots as whole pages from the front of the free list (``ALLOC-5``).

        ``need_size`` must be a page multiple (``ALLOC-1``). Merges staged pages first when the
        free list is short (``SORT-2``); None iff free + staged pages cannot cover it (``ALLOC-3``).
        The result is a new list: the caller owns it, no later call changes it (``ALIAS-1``).

        pre: 0 <= need_size <= 64 * self.page_size
        post: (__return__ is None) == (need_size // self.page_size > len(__old__.self.free_pages) + len(__old__.self.staged))
        post: __return__ is not None or sorted(self.get_all_free_pages()) == sorted(__old__.self.get_all_free_pages())
        post: __return__ is None or len(__return__) == need_size == len(set(__return__))
        post: __return__ is None or all(__old__.self.status_of(x // self.page_size) in (FREE, STAGED) for x in __return__)
        post: __return__ is None or all(x % self.page_size == i % self.page_size for i, x in enumerate(__return__))
        post: __return__ is None or self.available_size() == __old__.self.available_size() - need_size
        raises: rules.ContractViolation
        """
        num_pages = rules.check_alloc(need_size, self.page_size)
        if num_pages > len(self.free_pages):
            self.merge_and_sort_free()
        if num_pages > len(self.free_pages):
            return None
        return page_slots(self._take(num_pages), self.page_size)

    def alloc_extend(self, prefix_lens: Sequence[int], seq_lens: Sequence[int],
                     last_loc: Sequence[int], extend_num_tokens: int | None = None) -> list[int] | None:
        """Slots for positions ``[prefix, seq)`` of each request, concatenated (``EXTEND-*``).

        Merges first when ``extend_num_tokens // ps + bs + 1`` exceeds the free list (``SORT-2``);
        None iff the new pages exceed free + staged (``EXTEND-6``); request i takes the next
        ``num_new_pages`` free pages in batch order (``EXTEND-7``). Paged allocators only
        (``EXTEND-9``).

        pre: len(seq_lens) <= 8
        post: (__return__ is None) == (sum(rules.num_new_pages(p, s, self.page_size) for p, s in zip(prefix_lens, seq_lens)) > len(__old__.self.free_pages) + len(__old__.self.staged))
        post: __return__ is not None or sorted(self.get_all_free_pages()) == sorted(__old__.self.get_all_free_pages())
        post: __return__ is None or len(set(__return__)) == len(__return__) == sum(seq_lens) - sum(prefix_lens)
        post: __return__ is None or [x % self.page_size for x in __return__] == [q % self.page_size for p, s in zip(prefix_lens, seq_lens) for q in range(p, s)]
        post: __return__ is None or self.available_size() == __old__.self.available_size() - self.page_size * sum(rules.num_new_pages(p, s, self.page_size) for p, s in zip(prefix_lens, seq_lens))
        raises: rules.ContractViolation, NotImplementedError
        """
        if not self.paged:
            raise NotImplementedError("alloc_extend is only for paged allocator")
        new_pages = rules.check_extend(prefix_lens, seq_lens, last_loc, page_size=self.page_size,
                                       num_pages=self.num_pages, status_of=self.status_of,
                                       extend_num_tokens=extend_num_tokens)
        extend_tokens = sum(seq_lens) - sum(prefix_lens)
        if merge_bound(extend_tokens, len(seq_lens), self.page_size) > len(self.free_pages):
            self.merge_and_sort_free()
        return self._lay_out(prefix_lens, seq_lens, last_loc, new_pages)

    def alloc_decode(self, seq_lens: Sequence[int], last_loc: Sequence[int]) -> list[int] | None:
        """One slot per request for position ``seq - 1`` (``DECODE-*``).

        A request opens a new page iff ``(seq - 1) % ps == 0`` (``DECODE-4``), taking free pages in
        batch order; the others get ``last_loc + 1`` (``DECODE-5``). Merges first when the batch is larger than
        the free list (``DECODE-7``); None iff the new pages exceed free + staged (``DECODE-6``).

        pre: len(seq_lens) <= 8
        post: (__return__ is None) == (sum(rules.num_new_pages(s - 1, s, self.page_size) for s in seq_lens) > len(__old__.self.free_pages) + len(__old__.self.staged))
        post: __return__ is None or len(set(__return__)) == len(__return__) == len(seq_lens)
        post: __return__ is None or all(x == (loc + 1 if not rules.num_new_pages(s - 1, s, self.page_size) else x // self.page_size * self.page_size) for x, s, loc in zip(__return__, seq_lens, last_loc))
        post: __return__ is None or self.available_size() == __old__.self.available_size() - self.page_size * sum(rules.num_new_pages(s - 1, s, self.page_size) for s in seq_lens)
        raises: rules.ContractViolation, NotImplementedError
        """
        if not self.paged:
            raise NotImplementedError("alloc_decode is only for paged allocator")
        new_pages = rules.check_decode(seq_lens, last_loc, page_size=self.page_size,
                                       num_pages=self.num_pages, status_of=self.status_of)
        if len(seq_lens) > len(self.free_pages):
            self.merge_and_sort_free()
        return self._lay_out([s - 1 for s in seq_lens], seq_lens, last_loc, new_pages)

    def _lay_out(self, prefix_lens: Sequence[int], seq_lens: Sequence[int],
                 last_loc: Sequence[int], new_pages: Sequence[int]) -> list[int] | None:
        if sum(new_pages) > len(self.free_pages):
            return None
        pages = self._take(sum(new_pages))
        out: list[int] = []
        start = 0
        for pre, seq, loc, n in zip(prefix_lens, seq_lens, last_loc, new_pages):
            out += extend_row(pre, seq, loc, pages[start:start + n], self.page_size)
            start += n
        return out

    def _take(self, num_pages: int) -> list[int]:
        pages = self.free_pages[:num_pages]
        del self.free_pages[:num_pages]
        self._mark(pages, OWNED)
        return pages

    # -- release ---------------------------------------------------------------------------
    def pages_freed_by(self, free_index: Sequence[int]) -> list[int]:
        """The pages ``free(free_index)`` would release, validated (``FREE-*``); changes nothing."""
        return rules.check_free(list(free_index), paged=self.paged, page_size=self.page_size,
                                num_pages=self.num_pages, status_of=self.status_of,
                                group_open=self.free_group is not None)

    def free(self, free_index: Sequence[int]) -> None:
        """Release the pages of ``free_index``, or defer them inside a free group (``FREE-*``);
        ``free_index`` is read during the call only (``ALIAS-2``).

        Empty input is a no-op (``FREE-6``). Paged: whole pages, deduplicated and sorted
        (``FREE-4``); token: the slots in order. Inside a group the input is copied and held
        until ``free_group_end`` (``GROUP-3``).

        pre: len(free_index) <= 64
        post: self.free_group is not None or sorted(self.get_all_free_pages()) == sorted(__old__.self.get_all_free_pages() + __old__.self.pages_freed_by(free_index))
        post: self.free_group is None or self.available_size() == __old__.self.available_size()
        raises: rules.ContractViolation
        """
        pages = self.pages_freed_by(free_index)
        if not pages:
            return
        if self.free_group is not None:
            self.free_group.append(list(free_index))
            self._mark(pages, DEFERRED)
            return
        self._release(pages)

    def free_full(self, free_index: Sequence[int]) -> None:
        """A single pool has no SWA peer: exactly ``free`` (``FREE-7``).

        pre: len(free_index) <= 64
        post: self.snapshot() == (lambda twin: (twin.free(free_index), twin.snapshot())[1])(__old__.self.copy())
        raises: rules.ContractViolation
        """
        self.free(free_index)

    def _release(self, pages: list[int]) -> None:
        """Give ``pages`` back: staged under ``need_sort`` (``SORT-1``), else onto the free list,
        prepended by a paged allocator and appended by a token one (``FREE-5``)."""
        if self.need_sort:
            self.staged.extend(pages)
            self._mark(pages, STAGED)
            return
        self.free_pages = pages + self.free_pages if self.paged else self.free_pages + pages
        self._mark(pages, FREE)

    def free_group_begin(self) -> None:
        """Open a free group; groups do not nest (``GROUP-1``).

        post: self.free_group == [] and self.group_segments == []
        raises: rules.ContractViolation
        """
        if self.free_group is not None:
            raise ContractViolation("GROUP-1", "free groups cannot be nested")
        self.free_group = []
        self.group_segments = []

    def free_group_end(self) -> None:
        """Release what the group deferred: ``free()`` inputs as one ``free()``, then the segment
        pages in enqueue order (``GROUP-4``). A no-op without an open group (``GROUP-2``).

        post: self.free_group is None and self.deferred_pages() == []
        post: len(self.get_all_free_pages()) == len(__old__.self.get_all_free_pages()) + len(__old__.self.deferred_pages())
        """
        pending, segments = self.free_group, self.group_segments
        self.free_group, self.group_segments = None, []
        if pending:
            slots = [s for chunk in pending for s in chunk]
            self._release(sorted({s // self.page_size for s in slots}) if self.paged else slots)
        if segments:
            self._release([p for chunk in segments for p in chunk])

    def merge_and_sort_free(self) -> None:
        """Sort the staged pages into the free list; a no-op when nothing is staged (``SORT-3``).

        post: self.staged == []
        post: self.free_pages == (sorted(__old__.self.free_pages + __old__.self.staged) if __old__.self.staged else __old__.self.free_pages)
        """
        if self.staged:
            self._mark(self.staged, FREE)
            self.free_pages = sorted(self.free_pages + self.staged)
            self.staged = []

    def _mark(self, pages: Sequence[int], status: str) -> None:
        for page in pages:
            self._status[page] = status

    # -- capacity hooks (CAP-*) ------------------------------------------------------------
    def evict_to_free_tokens(self, tree_cache: TreeCache | None, num_tokens: int) -> None:
        """Ask ``tree_cache`` to evict the shortfall ``num_tokens - available_size()`` (``CAP-1``)."""
        shortfall = eviction_shortfall(num_tokens, self.available_size())
        if tree_cache is not None and shortfall > 0:
            tree_cache.evict(shortfall)

    def check_decode_capacity(self, *, num_tokens: int, tree_cache: TreeCache | None) -> bool:
        """Evict for ``num_tokens``, then whether they fit (``CAP-2``).

        post: __return__ == (self.available_size() >= num_tokens)
        """
        self.evict_to_free_tokens(tree_cache, num_tokens)
        return decode_capacity_ok(num_tokens, self.available_size())

    # -- diagnostics -----------------------------------------------------------------------
    def deferred_pages(self) -> list[int]:
        """Pages named by the open group, each once, ascending."""
        return [p for p in range(1, self.num_pages + 1)
                if self._status[p] in (DEFERRED, DEFERRED_SEGMENT)]

    def verify_byte_accounting(self) -> list[str]:
        """The free census (``CAP-3``): violation strings, empty when healthy."""
        return census(self.free_pages, self.staged, num_pages=self.num_pages, page_size=self.page_size,
                      available_size=self.available_size())

    def check_invariants(self) -> None:
        """Assert ``INV-1..4`` and that the page statuses match the lists; dumps state on failure."""
        problems = self.verify_byte_accounting()
        expected = ["reserved"] + [OWNED] * self.num_pages
        for pages, status in ((self.free_pages, FREE), (self.staged, STAGED)):
            for page in pages:
                expected[page] = status
        for chunk in self.free_group or []:
            for page in {s // self.page_size for s in chunk}:
                expected[page] = DEFERRED
        for chunk in self.group_segments:
            for page in chunk:
                expected[page] = DEFERRED_SEGMENT
        if expected != self._status:
            problems.append("MODEL-3: page statuses disagree with the free/staged/group lists")
        if self.free_group is None and self.group_segments:
            problems.append("GROUP-2: deferred segment pages without an open group")
        assert not problems, "\n".join(problems) + "\n" + self.debug_print()

    def debug_print(self) -> str:
        """One line per state component, pages in order, runs compressed."""
        group = "closed" if self.free_group is None else describe_pages(self.deferred_pages())
        return (f"{'paged' if self.paged else 'token'} ps={self.page_size} pages={self.num_pages} "
                f"need_sort={self.need_sort} available={self.available_size()}\n"
                f"  free:     {describe_pages(self.free_pages)}\n"
                f"  staged:   {describe_pages(self.staged)}\n"
                f"  deferred: {group}\n"
                f"  owned:    {describe_pages(self.owned_pages())}")

    def snapshot(self) -> tuple[object, ...]:
        """Everything observable, comparable with ``==`` (to assert "unchanged")."""
        return (self.size, self.num_pages, tuple(self.free_pages), tuple(self.staged),
                None if self.free_group is None else tuple(map(tuple, self.free_group)),
                tuple(map(tuple, self.group_segments)))

    def copy(self) -> AllocatorModel:
        """An independent deep copy."""
        return copy.deepcopy(self)
