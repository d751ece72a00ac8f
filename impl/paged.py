"""``PagedTokenToKVPoolAllocator``: whole pages, a LIFO free list (SGLang's paged order)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from kvpool.spec.errors import ContractViolation
from kvpool.spec.layout import merge_bound

from .base import AllocatorBase
from .checked import host_list
from .freelist import PageStack
from .numpy_ops import check_host_batch
from .ownership import continued_decode, continued_extend

INT64_MAX = 2**63 - 1


def check_token_count(extend_num_tokens: int) -> None:
    """Refuse an ``extend_num_tokens`` outside ``[0, 2**63)`` (``EXTEND-1``: no slot tensor
    has that many entries) before any layout sizes an output by it; O(1), reads no tensor. The
    checked mode and the guard run first: a batch with a negative extend stays ``EXTEND-2``."""
    if not 0 <= extend_num_tokens <= INT64_MAX:
        raise ContractViolation("EXTEND-1", f"extend_num_tokens {extend_num_tokens} is outside "
                                "[0, 2**63)")


def check_page_hint(num_new_pages: int | None, counted: int) -> None:
    """Refuse a caller's ``num_new_pages`` other than the batch's page count ``counted`` (from
    the ``*_cpu`` lengths, ``EXTEND-4``): a wrong one would hand out pages the layout never
    uses, or take fewer than it writes. None (no hint) passes."""
    if num_new_pages is not None and num_new_pages != counted:
        raise ContractViolation("EXTEND-4", f"num_new_pages {num_new_pages} != Σ new pages "
                                f"{counted} of the batch")


class PagedTokenToKVPoolAllocator(AllocatorBase):
    """Page-granular KV allocator, drop-in for SGLang 0.5.23's class; any ``page_size >= 1``.

    Representation: pages ``1..num_pages`` (page 0 is padding), ``num_pages = size //
    page_size``, in a preallocated int64 stack on ``device`` whose top is the free list's front
    (:class:`~kvpool.impl.freelist.PageStack`: the list is ``buf[top:]``), plus a staging buffer
    for ``need_sort`` frees. Order (``*-5``, ``EXTEND-7``): allocations take pages from the front;
    ``free`` prepends its sorted distinct pages; a segment free prepends its pages in row order;
    with ``need_sort`` frees are staged and sorted into the list only when an allocation runs
    short (``alloc``: short; ``alloc_extend``: ``extend_num_tokens // ps + bs + 1 > len(free)``;
    ``alloc_decode``: ``bs > len(free)``).

    Complexity (k = slots / tokens moved, P = pages moved, bs = batch, F/S = free/staged pages):

    | operation | cost | host-device sync |
    |---|---|---|
    | alloc(k) | O(k) (+ merge when short) | none |
    | alloc_extend | O(extend_num_tokens + bs) | none (counts from ``*_cpu``) |
    | alloc_decode | O(bs) | none (counts from ``*_cpu``) |
    | free(k) | O(k log k) (sorted distinct) | yes on CUDA (unique's size) |
    | free_segment(s) | O(P) stride representatives | none |
    | free_page_ids(P) | O(P) | none |
    | free_group_end | O(k log k) over the group | yes on CUDA (unique's size) |
    | merge_and_sort_free | O(S + F below max staged) CPU; O((F + S) log(F + S)) CUDA | none |
    | available_size | O(1) | none |
    | get_all_free_pages | O(F + S) | none |
    | clear / resize | O(num_pages) | none |
    | verify_byte_accounting | O(num_pages) | yes (reads the lists) |

    On the CPU, ``free`` of slots in page-major runs (a row) sorts one entry per run:
    O(k + P log P) instead of O(k log k). The staged pages lie right below the list's front
    while each free follows the takes (:class:`~kvpool.impl.staging.Staging`); when they
    ascend there (pages given back in the order they were taken, as a batch that ends
    together) and lie below the front, the compiled merge moves none of them: O(runs) in the
    one pass of ``alloc_extend`` / ``alloc_decode``.

    Backend (:mod:`kvpool.impl.backend`, chosen at construction): torch ops (or Triton kernels)
    on CUDA; on CPU compiled loops over the same memory (:mod:`kvpool.impl.native_ops`, one pass
    per ``alloc_extend`` / ``alloc_decode``) or numpy where the extension is not built; same
    results, same costs in O terms.

    A shortage is decided on the host before any tensor is read: the call returns None and
    nothing changes (``EXTEND-6``).

    The unchecked path (``checked=False``, the default) is memory-safe for any input: only an
    exact int64 contiguous CPU ``torch.Tensor`` is read in place, every size is checked before
    a write, and no result holds a value it did not compute. On the CPU its ownership guard (one
    bit per page, :mod:`kvpool.impl.ownership`; ``guard=False`` turns it off) refuses, with
    ContractViolation and nothing changed: ids outside the pool or negative (``FREE-1``), page 0
    (``FREE-2``), a page not handed out or named twice (``FREE-3``, also when a group ends), a
    ``last_loc`` of a continued request not on a page handed out (``EXTEND-3`` / ``DECODE-3``),
    ``*_cpu`` lengths that disagree or an irregular batch (``EXTEND-1/2``, ``DECODE-1``). On CUDA
    ids are not checked (a host check would sync). With ``checked=True`` every caller rule is
    checked, layouts and ``last_loc`` arithmetic included, before any change (``ERR-1``);
    checked calls read their arguments on the host (a sync). ``docs/fast-path-safety.md`` has
    the full table.
    """

    paged = True
    _free: PageStack

    def __init__(self, size: int, page_size: int, dtype: torch.dtype, device: Any, kvcache: Any,
                 need_sort: bool, *, checked: bool = False, guard: bool = True) -> None:
        super().__init__(size, page_size, dtype, device, kvcache, need_sort, checked=checked,
                         guard=guard)

    def _new_free_list(self, capacity: int) -> PageStack:
        return PageStack(capacity, self.device, self._ops)

    def _pages_of_free(self, free_index: torch.Tensor) -> Any:
        return self._ops.distinct_pages(free_index)

    def _pages_of_group(self, parts: list[Any]) -> Any:
        return self._ops.distinct(self._ops.undefer(parts))

    def free_page_ids(self, page_ids: torch.Tensor) -> None:
        """Free exactly these pages, in the given order, no dedup (``FREE-8``, SGLang's).

        Released like a segment's pages (prepended in order; inside a group after the ``free()``
        inputs). Checked mode: every page owned and named once (``FREE-1..3``).
        """
        if page_ids.numel() == 0:
            return
        pages = page_ids.reshape(-1).to(torch.int64)
        table = self._table
        if table is not None:
            named = host_list(pages)
            table.check_free([p * self.page_size for p in named], paged=False,
                             page_size=self.page_size, group_open=False)
        if self.free_group is not None:
            self._deferred_segments().append(self._ops.copy(pages))
            if table is not None:
                table.deferred_segment(named, paged=True)
            return
        self._release(pages)
        if table is not None:
            table.released(named, need_sort=self.need_sort)

    def alloc_extend(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                     seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor,
                     extend_num_tokens: int, num_new_pages: int | None = None,
                     ) -> torch.Tensor | None:
        """Slots for positions ``[prefix_i, seq_i)`` of every request, concatenated (``EXTEND-*``).

        ``extend_num_tokens == Σ(seq - prefix)``; one outside ``[0, 2**63)`` raises
        ContractViolation (``EXTEND-1``) on every backend and in every mode. ``num_new_pages``
        (optional, SGLang's SWA composite passes it) must equal the batch's page count, counted
        from the ``*_cpu`` lengths (O(batch)): else ContractViolation (``EXTEND-4``) before
        anything changes, checked or not (SGLang trusts it and hands pages out twice). Merges
        first when the bound exceeds the free list (``SORT-2``); None iff the new pages exceed
        free + staged, with nothing read or changed (``EXTEND-6``). Vectorised; no host-device
        sync (the counts come from the ``*_cpu`` lengths).
        """
        table = self._table
        if table is None and num_new_pages is None:  # the backend's one pass, if any
            stack, staged = self._free, self._staged
            one_pass = self._ops.take_extend(stack.view, stack.top, staged.count,
                                             staged.base if self._free_sorted else -1,
                                             staged.runs, prefix_lens, prefix_lens_cpu, seq_lens,
                                             seq_lens_cpu, last_loc, extend_num_tokens,
                                             self._owner_bits)
            # (slots, or None: short, or False: irregular, top, staged); False (merge first:
            # the list not known to ascend) and None go to the two steps, which merge
            if one_pass:
                out, stack.top, staged.count = one_pass  # merged in place when count drops
                if out is not False:
                    return out
        ps = self.page_size
        if table is not None:
            table.check_extend(prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc,
                               extend_num_tokens, ps)
        if self._owners is not None:  # the guard: a regular batch, a continued prefix's page
            check_host_batch(prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc,
                             extend_num_tokens)  # handed out; before anything moves
            self._owners.check_last_loc(continued_extend(prefix_lens, seq_lens, ps), last_loc,
                                        page_size=ps, clause="EXTEND-3")
        check_token_count(extend_num_tokens)  # what the checks above leave (guard off, Σ huge)
        bound = merge_bound(extend_num_tokens, seq_lens_cpu.numel(), ps)
        # counted even when given: the hint is checked against it, and the CPU backend keeps
        # the host lengths it reads for the layout of this very call (never a stale one)
        counted = self._ops.extend_new_pages(prefix_lens_cpu, seq_lens_cpu)
        check_page_hint(num_new_pages, counted)
        return self._take_new_pages(counted, bound, lambda pages: self._ops.extend_slots(
            prefix_lens, seq_lens, last_loc, pages, extend_num_tokens))

    def alloc_decode(self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                     last_loc: torch.Tensor) -> torch.Tensor | None:
        """One slot per request for position ``seq - 1`` (``DECODE-*``).

        A request opens a page iff ``(seq - 1) % ps == 0`` (any ps, 1 included). Merges first
        when ``bs > len(free)``; None iff short, nothing changed (``DECODE-6``). No sync.
        """
        if self._table is not None:
            self._table.check_decode(seq_lens, seq_lens_cpu, last_loc, self.page_size)
        else:  # the backend's one pass, if any (as alloc_extend's)
            stack, staged = self._free, self._staged
            one_pass = self._ops.take_decode(stack.view, stack.top, staged.count,
                                             staged.base if self._free_sorted else -1,
                                             staged.runs, seq_lens, seq_lens_cpu, last_loc,
                                             self._owner_bits)
            if one_pass:  # as alloc_extend's (a decode batch is never irregular)
                out, stack.top, staged.count = one_pass
                return out
        if self._owners is not None:  # the guard: a request past its first token continues
            check_host_batch(seq_lens, None, seq_lens, seq_lens_cpu, last_loc, None)
            self._owners.check_last_loc(continued_decode(seq_lens, self.page_size), last_loc,
                                        page_size=self.page_size, clause="DECODE-3")
        num_new_pages = self._ops.decode_new_pages(seq_lens_cpu)
        return self._take_new_pages(num_new_pages, seq_lens_cpu.numel(),
                                    lambda pages: self._ops.decode_slots(seq_lens, last_loc, pages))

    def _merged_above(self, merge_above: int) -> PageStack:
        """The free list, after sorting the staged pages into it when ``merge_above`` exceeds
        its length (``SORT-2``: extend's bound, decode's batch size)."""
        stack = self._free
        assert isinstance(stack, PageStack)
        if merge_above > stack.capacity - stack.top:  # len(stack), inlined on the hot path
            self.merge_and_sort_free()  # the same stack, rewritten in place
        return stack

    def _take_new_pages(self, num_new_pages: int, merge_above: int,
                        lay_out: Callable[[Any], torch.Tensor]) -> torch.Tensor | None:
        """Shared tail of extend and decode's two-step path: merge when ``merge_above >
        len(free)`` (``SORT-2``), None iff the free list cannot cover ``num_new_pages`` (decided
        before any read), else ``lay_out(first num_new_pages free pages)`` and drop those pages
        from the list."""
        stack = self._merged_above(merge_above)
        if num_new_pages > stack.capacity - stack.top:
            return None
        pages = stack.front(num_new_pages)
        out = lay_out(pages)
        if self._owners is not None:
            self._owners.taken(pages)
        if self._table is not None:
            self._table.taken(host_list(pages))
        stack.advance(num_new_pages)
        return out

