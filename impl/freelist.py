"""Preallocated free-list buffers with host-side counters: the O(pages moved) core of kvpool.impl.

Two containers of int64 page ids on the allocator's device, each a tensor of fixed capacity
plus Python ints that say which part is live. No operation here reads tensor data on the host,
and none touches more than the pages it moves (slices are views; copies are ``k`` elements):

- :class:`PageStack`: the paged free list. The live list is ``buf[top:capacity]`` and its front
  (where allocations take from and frees prepend to) is ``buf[top]``.
- :class:`PageRing`: the token free list. The live list starts at ``buf[head]`` and wraps around
  the end of ``buf``; allocations take from the head, frees append at the tail.

The pages released under ``need_sort`` wait in the unused part of the list's buffer
(:class:`~kvpool.impl.staging.Staging`).

``take`` / ``front`` return pages in the backend's form (a tensor, or a numpy array on CPU; see
:class:`~kvpool.impl.backend.TorchOps`) that may alias the buffer and are valid only until the
next write; callers copy them out (``ALIAS-1``) before anything else runs. Writes go through the
backend too (torch ``copy_``, or numpy assignment into the shared memory).
"""

from __future__ import annotations

from typing import Any

import torch

from .backend import TorchOps

INT64 = torch.int64


def gathered(source: Any, spans: list[tuple[int, int]], cat: Any) -> Any:
    """``source[a:b]`` for each span, end to end: the one slice itself (a view) when there is
    one, else ``cat`` of the slices (a copy). ``source`` is a buffer tensor or its backend-form
    view; ``cat`` the matching concatenation."""
    parts = [source[a:b] for a, b in spans]
    return parts[0] if len(parts) == 1 else cat(parts)


class PageStack:
    """A free list whose front is the top of a stack (paged allocators, reference order).

    Representation::

        buf   [0 ........ top | front ...................... capacity)
                   unused     |  the free list, in order

    ``take(n)``: ``[top, top + n)`` then ``top += n`` (O(n)). ``push(pages)``: write into
    ``[top - k, top)`` then ``top -= k`` (O(k)): the pages become the front, in their given order.
    ``replace_front`` rewrites the head of the list (merge), ``fill`` all of it (clear).
    """

    def __init__(self, capacity: int, device: torch.device | str, ops: TorchOps) -> None:
        self.capacity = capacity
        self.buf = torch.empty(capacity, dtype=INT64, device=device)
        self._ops = ops
        self.view = ops.view(self.buf)  # the buffer in the backend's form (shares its memory)
        self.top = capacity

    def __len__(self) -> int:
        return self.capacity - self.top

    def fill(self) -> None:
        """Every page ``1..capacity`` free, ascending (O(capacity))."""
        torch.arange(1, self.capacity + 1, out=self.buf)
        self.top = 0

    def front(self, num_pages: int) -> Any:
        """A view of the first ``num_pages`` pages, backend form (``num_pages <= len(self)``)."""
        # [top, top + num_pages) of buf
        return self.view[self.top : self.top + num_pages]

    def advance(self, num_pages: int) -> None:
        """Drop the first ``num_pages`` pages (after reading them with ``front``)."""
        self.top += num_pages

    def front_index(self) -> int:
        """Where the list starts in ``view``: its pages are ``view[top:]``."""
        return self.top

    def take(self, num_pages: int) -> Any:
        """Remove and return the first ``num_pages`` pages (a backend-form view, valid until the
        next push)."""
        pages = self.front(num_pages)
        self.top += num_pages
        return pages

    def push(self, pages: Any) -> None:
        """Prepend ``pages`` (1-D tensor or backend form) in their order; the caller guarantees
        room (O(k))."""
        k = len(pages)
        # [top - k, top) of buf receives the pages
        self._ops.write(self.view, self.top - k, pages)
        self.pushed(k)

    def push_position(self) -> tuple[int, bool]:
        """Where a push writes, for a caller that writes ``view`` itself: ``(top, True)``, the
        ``k`` pages go to ``[top - k, top)``; then :meth:`pushed`."""
        return self.top, True

    def pushed(self, num_pages: int) -> None:
        """Count ``num_pages`` written where :meth:`push_position` said as the new front."""
        self.top -= num_pages

    def contents(self) -> torch.Tensor:
        """The free list in order, a view ``buf[top:]``."""
        return self.buf[self.top :]

    def contents_view(self) -> Any:
        """:meth:`contents` in the backend's form (a view)."""
        return self.view[self.top :]

    def replace_front(self, num_pages: int, pages: Any) -> None:
        """Replace the first ``num_pages`` pages by ``pages`` (a new array, not a view of the
        buffer; backend form), the rest unmoved (merge; O(len(pages))). The caller guarantees
        room."""
        self.top += num_pages
        self.push(pages)

    def check_invariants(self) -> list[str]:
        """Counter sanity; empty when healthy."""
        ok = 0 <= self.top <= self.capacity == self.buf.numel()
        return [] if ok else [f"stack counters broken: top {self.top}, capacity {self.capacity}"]


class PageRing:
    """A FIFO free list in a ring buffer (token allocator, reference order).

    Representation (live part may wrap)::

        buf   [0 ... tail) unused [head .............. capacity)      wrapped
        buf   [0 ... head) unused [head ... head + count) unused      not wrapped

    ``take(n)``: the ``n`` entries from ``head`` (two slices when they wrap), ``head += n``.
    ``push(pages)``: write at ``(head + count) % capacity`` (two slices when they wrap). Both
    O(k). ``contents()`` is a view unless the live part wraps, then a copy.
    """

    def __init__(self, capacity: int, device: torch.device | str, ops: TorchOps) -> None:
        self.capacity = capacity
        self.buf = torch.empty(capacity, dtype=INT64, device=device)
        self._ops = ops
        self.view = ops.view(self.buf)
        self.head = 0
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def tail(self) -> int:
        """The buffer index just after the last entry (where the next push writes)."""
        return (self.head + self.count) % max(self.capacity, 1)

    def fill(self) -> None:
        """Every slot ``1..capacity`` free, ascending (O(capacity))."""
        torch.arange(1, self.capacity + 1, out=self.buf)
        self.head, self.count = 0, self.capacity

    def _span(self, start: int, n: int) -> list[tuple[int, int]]:
        """``[start, start + n)`` modulo capacity as at most two half-open buffer ranges."""
        start %= max(self.capacity, 1)
        end = start + n
        if end <= self.capacity:
            return [(start, end)]
        return [(start, self.capacity), (0, end - self.capacity)]


    def take(self, num_pages: int) -> Any:
        """Remove and return the first ``num_pages`` entries, backend form (may alias the
        buffer)."""
        head, end = self.head, self.head + num_pages
        if end < self.capacity:  # [head, end) without wrapping: one view
            pages = self.view[head:end]
            self.head = end
        else:
            parts = [self.view[a:b] for a, b in self._span(head, num_pages)]
            pages = parts[0] if len(parts) == 1 else self._ops.cat(parts)
            self.head = end % max(self.capacity, 1)
        self.count -= num_pages
        return pages

    def front_index(self) -> int:
        """Where the list starts in ``view``: its entries are ``view[head, head + count)``
        modulo the capacity."""
        return self.head

    def advance(self, num_pages: int) -> None:
        """Drop the first ``num_pages`` entries (after reading them from ``front_index``)."""
        self.head = (self.head + num_pages) % max(self.capacity, 1)
        self.count -= num_pages

    def push(self, pages: Any) -> None:
        """Append ``pages`` (1-D tensor or backend form) in their order; the caller guarantees
        room (O(k))."""
        done, k = 0, len(pages)
        tail = self.tail()
        if tail + k <= self.capacity:  # [tail, tail + k) without wrapping
            self._ops.write(self.view, tail, pages)
        else:
            for a, b in self._span(tail, k):
                self._ops.write(self.view, a, pages[done : done + b - a])
                done += b - a
        self.pushed(k)

    def push_position(self) -> tuple[int, bool]:
        """Where a push writes, for a caller that writes ``view`` itself: ``(tail, False)``,
        the ``k`` pages go to ``[tail, tail + k)`` modulo the capacity; then :meth:`pushed`."""
        return self.tail(), False

    def pushed(self, num_pages: int) -> None:
        """Count ``num_pages`` written where :meth:`push_position` said as the new tail."""
        self.count += num_pages

    def contents(self) -> torch.Tensor:
        """The free list in order (a view unless it wraps)."""
        listed: torch.Tensor = gathered(self.buf, self._span(self.head, self.count), torch.cat)
        return listed

    def contents_view(self) -> Any:
        """:meth:`contents` in the backend's form (a view unless it wraps)."""
        return gathered(self.view, self._span(self.head, self.count), self._ops.cat)

    def replace_front(self, num_pages: int, pages: Any) -> None:
        """Replace the first ``num_pages`` entries by ``pages`` (a new array, not a view of the
        buffer; backend form), the rest unmoved (merge; O(len(pages))). The caller guarantees
        room: the new front goes into the unused span just before the head."""
        cap = max(self.capacity, 1)
        k = len(pages)
        self.head = (self.head + num_pages - k) % cap
        self.count += k - num_pages
        done = 0
        for a, b in self._span(self.head, k):
            self._ops.write(self.view, a, pages[done : done + b - a])
            done += b - a

    def check_invariants(self) -> list[str]:
        """Counter sanity; empty when healthy."""
        ok = 0 <= self.count <= self.capacity == self.buf.numel() and (
            0 <= self.head < max(self.capacity, 1)
        )
        if ok:
            return []
        return [f"ring counters broken: head {self.head}, count {self.count}, cap {self.capacity}"]
