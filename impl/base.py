"""Logic shared by the token and paged torch allocators: capacity, releases, groups, diagnostics.

A subclass chooses its free list (:class:`~kvpool.impl.freelist.PageRing` for the token FIFO,
:class:`~kvpool.impl.freelist.PageStack` for the paged LIFO) and how ``free()`` turns slots into
pages (token: the slots as given; paged: sorted distinct pages). Everything else, including the
reference order of SGLang's ``need_sort`` staging and free groups, lives here once, with the
segment frees (:class:`~kvpool.impl.segment_frees.SegmentFrees`) and the ownership guard's
checks (:class:`~kvpool.impl.release_guard.ReleaseGuard`).
The arithmetic runs on the backend :func:`~kvpool.impl.backend_choice.ops_for` picks: compiled
loops or numpy on CPU, a Triton kernel or torch ops on CUDA.
"""

from __future__ import annotations

import operator
from typing import Any, ClassVar

import torch
from kvpool.spec import rules
from kvpool.spec.census import census, describe_pages
from kvpool.spec.errors import ContractViolation
from kvpool.spec.model import ResizeConfig

from .backend import TorchOps, joined
from .backend_choice import ops_for
from .checked import PageStatusTable, host_list
from .freelist import PageRing, PageStack
from .hooks import SglangSurface
from .numpy_ops import NumpyOps
from .ownership import Ownership
from .release_guard import ReleaseGuard
from .segment_frees import SegmentFrees
from .staging import Staging


class AllocatorBase(SegmentFrees, ReleaseGuard, SglangSurface):
    """State and shared operations; see the subclasses for representation and complexity."""

    paged: ClassVar[bool]

    def __init__(self, size: int, page_size: int, dtype: torch.dtype, device: Any,
                 kvcache: Any, need_sort: bool, *, checked: bool = False,
                 guard: bool = True) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size}")
        if checked:
            rules.check_count(size, "size", "LIFE-2")
        self.size = size
        self.page_size = page_size
        self.dtype = dtype
        self.device = device
        self._kvcache = kvcache
        self.need_sort = need_sort
        self.checked = checked
        self.guard = guard  # the ownership guard (kvpool.impl.ownership), host backends only
        self._ops: TorchOps = ops_for(page_size, device)  # one of the four backends
        self._free: PageStack | PageRing = self._new_free_list(0)
        self._staged = Staging(self._free, self._ops)
        self.clear()

    # -- hooks for the subclasses ----------------------------------------------------------
    def _new_free_list(self, capacity: int) -> PageStack | PageRing:
        raise NotImplementedError

    def _pages_of_free(self, free_index: torch.Tensor) -> Any:
        """The pages ``free(free_index)`` releases, in release order (``FREE-4/5``): a 1-D
        tensor or backend-form pages (:mod:`kvpool.impl.backend`)."""
        raise NotImplementedError

    def _pages_of_group(self, parts: list[Any]) -> Any:
        """The pages that ``free()`` of the group's inputs end to end releases (``GROUP-4``),
        from the copies the group keeps (``ops.defer``: page ids; left as they are), as
        backend-form pages."""
        raise NotImplementedError

    def _slots_of_pages(self, pages: torch.Tensor) -> torch.Tensor:
        """Every slot of ``pages``, page-major, as a new tensor (``ALLOC-4``)."""
        return self._ops.slots_of_pages(pages)

    # -- lifecycle -------------------------------------------------------------------------
    def clear(self) -> None:
        """Every page free ascending, nothing staged, no open group (``LIFE-1``). O(pool).

        Everything new is built before anything is replaced, so a failure (a size whose
        buffers cannot be had: RuntimeError or MemoryError from torch) leaves the allocator as
        it was."""
        num_pages = self.size // self.page_size
        free = self._free
        if free.capacity != num_pages:
            free = self._new_free_list(num_pages)
        host = isinstance(self._ops, NumpyOps)
        # the ownership guard (kvpool.impl.ownership) on the host backends; its bitmap is
        # passed to the compiled one-pass calls
        owners = Ownership(num_pages) if self.guard and host else None
        table = PageStatusTable(num_pages) if self.checked else None
        self.num_pages = num_pages
        if free is not self._free:
            self._free = free
            self._staged = Staging(free, self._ops)  # shares the list's buffer
        self._free.fill()
        self._free_sorted = True  # ascending; a push without staging clears it
        self._staged.reset()
        self.free_group: list[Any] | None = None  # backend-form copies while a group is open
        self._group_segments: list[Any] | None = None  # backend-form pages while a group is open
        self._table = table
        self._owners = owners
        self._owner_bits = None if owners is None else owners.raw

    def resize(self, config: ResizeConfig) -> None:
        """``size = config.max_total_num_tokens`` (a non-negative int, also unchecked:
        ``LIFE-2``), then ``clear()``. A size whose buffers cannot be had raises torch's error
        with the allocator unchanged."""
        size = config.max_total_num_tokens
        if self.checked:
            rules.check_count(size, "max_total_num_tokens", "LIFE-2")
        else:  # a host value: free to check (any integer type, as SGLang's)
            try:
                size = operator.index(size)
            except TypeError:
                size = -1
            if size < 0:
                raise ContractViolation("LIFE-2", "max_total_num_tokens must be a non-negative "
                                        f"int, got {config.max_total_num_tokens!r}")
        old_size, self.size = self.size, size
        try:
            self.clear()
        except BaseException:
            self.size = old_size
            raise

    # -- queries ---------------------------------------------------------------------------
    def available_size(self) -> int:
        """Tokens free or staged, ``(len(free) + len(staged)) * page_size`` (``INV-4``). O(1)."""
        return (len(self._free) + len(self._staged)) * self.page_size

    @property
    def free_pages(self) -> torch.Tensor:
        """The free list in reference order (read-only; a view unless the token ring wraps)."""
        return self._free.contents()

    @property
    def release_pages(self) -> torch.Tensor:
        """The pages staged by ``need_sort`` frees, in release order (SGLang's ``release_pages``;
        empty without ``need_sort``). Read-only; ``merge_and_sort_free`` empties it."""
        return self._staged.contents()

    def get_all_free_pages(self) -> torch.Tensor:
        """A new tensor: the free list followed by the staged pages (``LIFE-4``). O(pool)."""
        return self._ops.fresh_tensor([self._free.contents_view(), self._staged.contents_view()])

    # -- allocation ------------------------------------------------------------------------
    def alloc(self, need_size: int) -> torch.Tensor | None:
        """``need_size`` slots as whole pages from the front of the free list (``ALLOC-*``).

        Merges the staged pages first when the free list is short (``SORT-2``); None when
        free + staged pages cannot cover it, state unchanged (``ALLOC-3``). Unchecked mode floors
        an unaligned ``need_size`` to whole pages (as SGLang) and refuses a negative one
        (``ALLOC-2``); checked mode raises ``ALLOC-1/2``. O(need_size); no host-device sync.
        """
        if self.checked:
            num_pages = rules.check_alloc(need_size, self.page_size)
        else:
            num_pages = need_size // self.page_size
            if num_pages < 0:  # a host int: refusing costs nothing and keeps the counters sane
                raise ContractViolation("ALLOC-2", f"need_size must be >= 0, got {need_size}")
        if num_pages > len(self._free):
            self.merge_and_sort_free()
            if num_pages > len(self._free):
                return None
        free = self._free
        out = self._ops.take_slots(free.view, free.front_index(), num_pages, self._owner_bits)
        if out is None:
            pages = free.take(num_pages)
            if self._owners is not None:
                self._owners.taken(pages)
            out = self._slots_of_pages(pages)
        else:
            free.advance(num_pages)
        if self._table is not None:
            self._table.taken(host_list(out[:: self.page_size] // self.page_size))
        return out

    def alloc_extend(self, *args: Any, **kwargs: Any) -> torch.Tensor | None:
        raise NotImplementedError("alloc_extend is only for paged allocator (EXTEND-9)")

    def alloc_decode(self, *args: Any, **kwargs: Any) -> torch.Tensor | None:
        raise NotImplementedError("alloc_decode is only for paged allocator (EXTEND-9)")

    # -- release ---------------------------------------------------------------------------
    def free(self, free_index: torch.Tensor) -> None:
        """Release the pages of ``free_index``, or defer a copy inside a free group (``FREE-*``).

        Empty input is a no-op (``FREE-6``). Token: appends the slots; paged: prepends the
        sorted distinct pages (``torch.unique``: a device sync on CUDA). ``need_sort`` stages.
        O(k log k) for k slots; on the CPU O(k + P log P) when the slots come in page-major
        runs (a row's slots: one entry per run is sorted, P pages). Unchecked mode on the
        CPU still refuses, before any change, a slot outside the pool (``FREE-1``), on page 0
        (``FREE-2``) or on a page not handed out (``FREE-3``: a double free, checked when the
        pages are released, so inside a free group at its end): the ownership guard. On CUDA
        it does not read the slot values; only a release beyond the pool's page count raises
        ``FREE-3`` (host counters).
        """
        if free_index.numel() == 0:
            return
        table = self._table
        if table is not None:
            pages = table.check_free(free_index, paged=self.paged, page_size=self.page_size,
                                     group_open=self.free_group is not None)
        if self.free_group is not None:  # a copy (GROUP-3): the page ids (ps 1: the slots)
            self.free_group.append(self._ops.defer(free_index))
            if table is not None:
                table.deferred_free(pages)
            return
        if not self._released_in_one_pass(free_index):
            self._release(self._pages_of_free(free_index), ascending=self.paged)
        if table is not None:
            table.released(pages, need_sort=self.need_sort)

    def free_full(self, free_index: torch.Tensor) -> None:
        """A single pool has no SWA peer: exactly ``free`` (``FREE-7``)."""
        self.free(free_index)

    def _release(self, pages: Any, *, ascending: bool = False, guarded: bool = True) -> None:
        """Put ``pages`` back: staged under ``need_sort``, else onto the free list (``FREE-5``).
        ``pages``: a 1-D tensor or backend-form pages (``ascending``: the caller vouches that
        they ascend, as the paged ``free()``'s sorted distinct pages). ``guarded``: the
        ownership guard's check first (``FREE-1..3``, nothing changed on a refusal); False when
        the caller has passed these pages through :meth:`_guard_release` already."""
        if guarded:
            self._guard_release([pages])
        else:
            self._check_room(len(pages))
        if self.need_sort:
            self._staged.append(pages, ascending=ascending)
        else:
            staged = self._staged  # pages staged before need_sort was switched off: moved
            saved = staged.make_room(len(pages)) if staged.count else None
            self._free.push(pages)
            if saved is not None:
                staged.restore(saved)
            self._free_sorted = False

    def _released_in_one_pass(self, source: Any) -> bool:
        """``_release`` of the pages of ``source`` (a ``free()`` input, or the group's copies)
        in the backend's one pass (``ops.release``): the same pages, deduplicated as the
        subclass's ``_pages_of_free`` / ``_pages_of_group`` (paged: sorted distinct; token: as
        given), the same room check (FREE-3, nothing changed) and the same place in the lists.
        False, with nothing changed, where the backend has no such pass (or not for this
        input), and while staged pages sit where a token push writes (need_sort switched off)."""
        staged = self._staged
        if self.need_sort:
            target: PageStack | PageRing | Staging = staged
        elif staged.blocks_push():  # _release moves them out of the way first
            return False
        else:
            target = self._free
        at, backwards = target.push_position()
        # room: the pool's, and on the stack the gap below its list (Staging.gap: both)
        num_pages = self._ops.release(source, self.paged, target.view, at, backwards,
                                      staged.gap(), self._owner_bits)
        if num_pages is None:
            return False
        if num_pages < 0:
            if len(self._free) + len(staged) - 1 - num_pages > self.num_pages:
                return False  # more pages than the pool: the two-step path's guard refuses
            staged.compact()  # they fit the pool, not the stack's gap: now they fit both
            return self._released_in_one_pass(source)
        if target is staged:  # paged: the sorted distinct pages, an ascending run
            staged.pushed(num_pages, self.paged)
        else:
            self._free.pushed(num_pages)
            # a paged free's sorted distinct pages keep a sorted list sorted when they lie
            # below its old front (the compiled takes then find runs by their ends)
            self._free_sorted = (self._free_sorted and self.paged and
                                 self._ops.ascends_across(target.view, at))
        return True

    def free_group_begin(self) -> None:
        """Open a free group; groups do not nest (``GROUP-1``, also unchecked)."""
        if self.free_group is not None:
            raise ContractViolation("GROUP-1", "free groups cannot be nested")
        self.free_group = []
        self._group_segments = []

    def _deferred_segments(self) -> list[Any]:
        """The open group's segment pages (a group is open)."""
        if self._group_segments is None:
            self._group_segments = []
        return self._group_segments

    def free_group_end(self) -> None:
        """Release the group: ``free()`` inputs as one ``free()``, then the segment pages in
        enqueue order (``GROUP-4``). No-op without an open group (``GROUP-2``)."""
        pending, segments = self.free_group, self._group_segments or []
        if pending is None:
            return
        if segments:
            freed = self._pages_of_group(pending) if pending else None
            seg_pages = joined(self._ops, segments)
            # all or nothing: a page named by a free() and a segment is a double free (GROUP-6)
            self._guard_release([seg_pages] if freed is None else [freed, seg_pages])
            if freed is not None:
                self._release(freed, ascending=self.paged, guarded=False)
            self._release(seg_pages, guarded=False)
        elif pending and not self._released_in_one_pass(pending):
            # free() inputs only: the release's own check refuses first
            self._release(self._pages_of_group(pending), ascending=self.paged)
        self.free_group, self._group_segments = None, None
        if self._table is not None:
            self._table.group_released(paged=self.paged, need_sort=self.need_sort)

    def merge_and_sort_free(self) -> None:
        """Sort the staged pages into the free list; no-op when nothing is staged (``SORT-3``).

        The result is SGLang's ``sort(free ∪ staged)``. The free list is known to be sorted
        after ``clear`` and every merge until a page is pushed without staging (need_sort off,
        or switched on later); then, on the CPU, only the free pages below the largest staged
        one move: O(S + F_below), never a sort of the whole list (the compiled backend
        radix-sorts the staged pages, and merges the paged list in its own buffer:
        ``Staging.merge_in_place``, which moves nothing when they ascend right below the
        list's front). Otherwise (or on CUDA, where a host read would sync) the whole
        ``free ∪ staged`` is sorted, O((F + S) log(F + S)). Runs only when an allocation is
        short (amortised over the frees that staged the pages).
        """
        if len(self._staged) == 0:
            return
        if not (self._free_sorted and self._staged.merge_in_place()):
            num_replaced, merged = self._ops.merge_sorted(
                self._free.contents_view(), self._staged.contents_view(),
                front_sorted=self._free_sorted)
            self._free.replace_front(num_replaced, merged)
            self._staged.reset()
        self._free_sorted = True
        if self._table is not None:
            self._table.merged()

    # -- diagnostics -----------------------------------------------------------------------
    def deferred_pages(self) -> list[int]:
        """Pages named by the open group (free() pages once each, then segment pages)."""
        if self.free_group is None:
            return []
        pending = self.free_group
        freed = host_list(self._pages_of_group(pending)) if pending else []
        return freed + [p for t in self._group_segments or [] for p in host_list(t)]

    def verify_byte_accounting(self) -> list[str]:
        """The free census over the buffers' contents (``CAP-3``); empty when healthy. Syncs."""
        problems: list[str] = census(  # the buffers read in the backend's form (host: numpy)
            host_list(self._free.contents_view()), host_list(self._staged.contents_view()),
            num_pages=self.num_pages, page_size=self.page_size,
            available_size=self.available_size(), deferred=self.deferred_pages())
        return problems

    def check_invariants(self) -> None:
        """Assert the census, the buffer counters and (checked mode) the status table."""
        problems = self.verify_byte_accounting()
        problems += self._free.check_invariants() + self._staged.check_invariants()
        if self._table is not None:
            problems += self._table.disagreements(host_list(self._free.contents()),
                                                  host_list(self._staged.contents()))
        if self.free_group is None and self._group_segments:
            problems.append("GROUP-2: deferred segment pages without an open group")
        if self._owners is not None:
            problems += self._owners.disagreements(host_list(self._free.contents()),
                                                   host_list(self._staged.contents()))
        assert not problems, "\n".join(problems) + "\n" + self.debug_print()

    def debug_print(self) -> str:
        """One line per state component, pages in order, runs compressed."""
        group = "closed" if self.free_group is None else describe_pages(self.deferred_pages())
        return (f"{type(self).__name__} ps={self.page_size} pages={self.num_pages} "
                f"need_sort={self.need_sort} checked={self.checked} "
                f"available={self.available_size()}\n"
                f"  free:     {describe_pages(host_list(self._free.contents()))}\n"
                f"  staged:   {describe_pages(host_list(self._staged.contents()))}\n"
                f"  deferred: {group}")
