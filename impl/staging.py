"""The pages released under ``need_sort``, kept in the free list's own buffer until a merge.

:class:`Staging` sits beside a :class:`~kvpool.impl.freelist.PageStack` (paged) or
:class:`~kvpool.impl.freelist.PageRing` (token) and writes only into the part of its buffer
that the list does not use; like the lists, it reads no tensor data on the host and touches no
more than the pages it moves.
"""

from __future__ import annotations

from typing import Any

import torch

from .backend import TorchOps
from .freelist import PageRing, PageStack, gathered


class Staging:
    """Pages released under ``need_sort``, in release order, kept in the free list's own buffer.

    Free + staged pages never exceed the pool (the allocator refuses a release that would), so
    the staged pages fit in the part of the free list's buffer that the list does not use, and
    need no buffer of their own (8 bytes of metadata per page in all, as SGLang's one list):

    - stack (paged): the list is ``buf[top:]``, the staged pages ``buf[base, base + count)``
      below it. The first release after a merge goes just below the list's front, ``[top - k,
      top)``; later ones follow in the gap up to ``top``, where the pages taken since lie. So
      pages given back in the order they were taken (a batch freed after its call) end up
      where a merge would put them, right before the list, and the merge moves none of them
      (:meth:`merge_in_place`). A release or a push that does not fit the gap first moves the
      staged pages to ``buf[0, count)`` (:meth:`compact`, once per merge at most): below
      ``top`` there is room for every page the pool can give back.
    - ring (token): the staged pages follow the list's tail, ``[base, base + count)`` modulo
      the capacity. Takes and merges leave the tail where it is; a push (need_sort switched off
      while pages are staged) would write there, so :meth:`make_room` moves them behind it.

    ``append`` is O(k); the allocator merges them into the free list only when an allocation
    runs short, so the merge is amortised over the frees that staged the pages. :attr:`runs`
    records where the releases that vouch their pages ascend (the paged ``free()``'s sorted
    distinct pages) begin, so that a merge compares only the seams between them.
    """

    def __init__(self, free: PageStack | PageRing, ops: TorchOps) -> None:
        self._free = free
        self._ops = ops
        self.buf = free.buf
        self.capacity = free.capacity
        self.view = free.view
        self.base = 0
        self.count = 0
        # the list as one of its kinds, the other None: read on the hot paths
        self._stack = free if isinstance(free, PageStack) else None
        self._ring = free if isinstance(free, PageRing) else None
        # where the runs that the releases vouch ascend start, after the first (offsets from
        # base); None once one was not vouched for (the merge then reads every staged page),
        # and until the first release (no list is kept for an empty staging)
        self.runs: list[int] | None = None

    def __len__(self) -> int:
        return self.count

    def _note_run(self, num_pages: int, ascending: bool) -> None:
        """Record a release of ``num_pages`` about to be appended (``ascending``: the caller
        vouches that they ascend, e.g. ``free()``'s sorted distinct pages). At most
        ``capacity // 64`` runs are kept (under 1 byte per page, whatever the frees' sizes);
        past that the merge reads the staged pages instead."""
        runs = self.runs
        if self.count == 0:
            self.runs = [] if ascending else None
        elif runs is not None and num_pages:
            if ascending and len(runs) < self.capacity >> 6:
                runs.append(self.count)
            else:
                self.runs = None

    def _spans(self, start: int, n: int) -> list[tuple[int, int]]:
        """``[base + start, base + start + n)`` modulo capacity as buffer ranges."""
        begin = (self.base + start) % max(self.capacity, 1)
        end = begin + n
        if end <= self.capacity:
            return [(begin, end)]
        return [(begin, self.capacity), (0, end - self.capacity)]

    def _next_base(self) -> int:
        """Where the ring's staged pages start: right after its tail, whether some are staged
        (they follow it) or not (a fresh start)."""
        ring = self._ring
        assert ring is not None, "only the ring's staged pages follow its tail"
        return ring.tail()

    def gap(self) -> int:
        """Pages a write at the free list's or the staging's push position can take: on the
        stack the span between the staged pages (or the buffer's start) and the list's front,
        never more than the pool's room (``capacity - len(free) - count = top - count``); on
        the ring the pool's room."""
        stack = self._stack
        if stack is not None:
            return stack.top - (self.base + self.count if self.count else 0)
        return self.capacity - len(self._free) - self.count

    def compact(self) -> None:
        """Move the staged pages of a stack to ``buf[0, count)``, in order (O(count)): then the
        gap is the pool's whole room. No-op on the ring, or when they already start there."""
        if self._stack is None or not self.base:
            return
        staged = self._ops.cat([self.view[self.base : self.base + self.count]])  # a copy
        self._ops.write(self.view, 0, staged)
        self.base = 0

    def append(self, pages: Any, *, ascending: bool) -> None:
        """Append ``pages`` (1-D tensor or backend form) in order; the caller guarantees room
        in the pool (O(k), plus a :meth:`compact` when the stack's gap is short) and, with
        ``ascending``, that they ascend."""
        k = len(pages)
        self._note_run(k, ascending)
        stack = self._stack
        if stack is not None:
            if self.count == 0:  # just below the list's front
                self.base = stack.top - k
            elif k > self.gap():
                self.compact()
            self._ops.write(self.view, self.base + self.count, pages)
            self.count += k
            return
        self.base = self._next_base()
        done = 0
        begin = self.base + self.count
        if begin + k <= self.capacity:  # [begin, begin + k) without wrapping
            self._ops.write(self.view, begin, pages)
            self.count += k
            return
        for a, b in self._spans(self.count, k):
            self._ops.write(self.view, a, pages if b - a == k else pages[done : done + b - a])
            done += b - a
        self.count += k

    def push_position(self) -> tuple[int, bool]:
        """Where an append writes, for a caller that writes ``view`` itself (at most
        :meth:`gap` pages): ``(end, False)``, the ``k`` pages go to ``[end, end + k)`` modulo
        the capacity; on an empty stack staging ``(top, True)``, they go to ``[top - k, top)``.
        Then :meth:`pushed`."""
        stack = self._stack
        if stack is not None:
            return (self.base + self.count, False) if self.count else (stack.top, True)
        return (self._next_base() + self.count) % max(self.capacity, 1), False

    def pushed(self, num_pages: int, ascending: bool) -> None:
        """Count ``num_pages`` written where :meth:`push_position` said as appended
        (``ascending``: as :meth:`append`'s)."""
        self._note_run(num_pages, ascending)
        if self.count == 0:
            stack = self._stack
            self.base = stack.top - num_pages if stack is not None else self._next_base()
        self.count += num_pages

    def blocks_push(self) -> bool:
        """True when a push onto the ring would write over staged pages (:meth:`make_room`
        must move them first)."""
        return self.count > 0 and self._stack is None

    def contents(self) -> torch.Tensor:
        """The staged pages in release order (a view unless they wrap around the ring)."""
        staged: torch.Tensor = gathered(self.buf, self._spans(0, self.count), torch.cat)
        return staged

    def contents_view(self) -> Any:
        """:meth:`contents` in the backend's form (a view unless they wrap)."""
        return gathered(self.view, self._spans(0, self.count), self._ops.cat)

    def make_room(self, num_pages: int) -> Any:
        """Before the free list takes ``num_pages`` more pages: on the ring returns a copy of
        the staged pages to :meth:`restore` after the push; on the stack compacts them when the
        gap is short. None when nothing needs restoring."""
        if num_pages > self.gap():
            self.compact()
        if not self.blocks_push() or num_pages == 0:
            return None
        return self.contents().clone()

    def restore(self, saved: Any) -> None:
        """Write the pages :meth:`make_room` saved behind the ring's new tail (O(count))."""
        if saved is not None:
            self.count = 0
            self.append(saved, ascending=False)

    def merge_in_place(self) -> bool:
        """SGLang's merge where the backend does it in the stack's own buffer (the free list
        must ascend): True when ``sort(free ∪ staged)`` is now the free list and nothing is
        staged; False, nothing changed, for the caller's ``merge_sorted`` (a ring, the torch and
        numpy backends, or a range of staged pages the compiled sort declines). O(S + F below
        the largest staged page), no copy of the list; none of them moves when they lie right
        below the list, ascending (known from :attr:`runs`, else read), and below its front."""
        stack = self._stack
        if stack is None or not self._ops.merge_front(self.view, stack.top, self.base,
                                                      self.count, self.runs):
            return False
        stack.pushed(self.count)  # the list now starts count pages earlier
        self.reset()
        return True

    def reset(self) -> None:
        """Forget every staged page (after a merge or clear)."""
        self.count = 0
        self.runs = None

    def check_invariants(self) -> list[str]:
        """Counter sanity, and the staged pages clear of the free list; empty when healthy."""
        free = len(self._free)
        ok = 0 <= self.count <= self.capacity - free and self.buf is self._free.buf
        if ok and self.count:
            ok = (self.base == self._free.tail() if isinstance(self._free, PageRing)
                  else self.base >= 0 and self.base + self.count <= self._free.top)
        return [] if ok else [f"staging broken: count {self.count}, base {self.base}, "
                              f"free {free}, cap {self.capacity}"]
