"""The reference model's releases of row segments and page ids (``SEG-*``, ``FREE-8``), as a
mixin of :class:`~kvpool.spec.model.AllocatorModel`: a segment free names row positions, a
page-id free names pages, and both release pages the way the model's ``free`` releases slots
(staged under ``need_sort``, deferred inside a free group)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import rules
from .rules import DEFERRED, DEFERRED_SEGMENT


class SegmentReleases:
    """Mixin for :class:`~kvpool.spec.model.AllocatorModel` (needs its kind, page size, page
    count, statuses, open group and the release steps it names below). The contracts in the
    docstrings are :class:`~kvpool.spec.model.AllocatorModel`'s, checked at run time with its
    own (``tests/formal/test_formal_model_contracts.py``)."""

    paged: bool
    page_size: int
    num_pages: int
    free_group: list[list[int]] | None
    group_segments: list[list[int]]
    status_of: Callable[[int], str]
    free: Callable[[Sequence[int]], None]
    get_all_free_pages: Callable[[], list[int]]
    available_size: Callable[[], int]
    _release: Callable[[list[int]], None]
    _mark: Callable[[Sequence[int], str], None]

    def free_segment(self, free_index: Sequence[int], *, start_pos: int) -> None:
        """Release the pages touched by row positions ``[start_pos, start_pos + n)`` (``SEG-2``).

        pre: len(free_index) <= 64
        post: self.free_group is not None or len(self.get_all_free_pages()) == len(__old__.self.get_all_free_pages()) + len({x // self.page_size for x in free_index})
        post: self.free_group is None or self.available_size() == __old__.self.available_size()
        raises: rules.ContractViolation
        """
        self.free_segments([(free_index, start_pos)])

    def free_segments(self, segments: Sequence[tuple[Sequence[int], int]]) -> None:
        """Release ascending disjoint row segments, a shared boundary page once (``SEG-4/5``).

        The whole call is validated before any page moves. Each segment is then released on its
        own, in row order (``SEG-3``); token allocators treat each segment as ``free()``.

        pre: len(segments) <= 8
        post: self.free_group is not None or len(self.get_all_free_pages()) == len(__old__.self.get_all_free_pages()) + len({x // self.page_size for idx, _ in segments for x in idx})
        post: self.free_group is None or self.available_size() == __old__.self.available_size()
        raises: rules.ContractViolation
        """
        per_segment = rules.check_segments(segments, page_size=self.page_size,
                                           num_pages=self.num_pages, status_of=self.status_of)
        for pages in per_segment:
            if not pages:
                continue
            if self.free_group is None:
                self._release(pages)
            elif self.paged:
                self.group_segments.append(list(pages))
                self._mark(pages, DEFERRED_SEGMENT)
            else:
                self.free_group.append(list(pages))
                self._mark(pages, DEFERRED)

    def free_page_ids(self, page_ids: Sequence[int]) -> None:
        """Release exactly the pages ``page_ids``, in the given order, each once (``FREE-8``).

        SGLang's ``free_page_ids``: page ids, not slots. Paged: released like one segment's
        pages (prepended in the given order, no sort; staged under ``need_sort``; inside a group
        deferred with the segment pages). Every page must be owned and named once (``FREE-1..3``);
        a token allocator (a page is a slot): exactly ``free``. Empty input is a no-op.

        pre: len(page_ids) <= 64
        post: self.free_group is not None or len(self.get_all_free_pages()) == len(__old__.self.get_all_free_pages()) + len(page_ids)
        raises: rules.ContractViolation
        """
        ps = self.page_size
        if not self.paged:
            self.free(page_ids)
            return
        slots = [p * ps if isinstance(p, int) and not isinstance(p, bool) else p for p in page_ids]
        pages = rules.check_free(slots, paged=False, page_size=ps, num_pages=self.num_pages,
                                 status_of=self.status_of, group_open=False)
        if not pages:
            return
        if self.free_group is None:
            self._release(pages)
            return
        self.group_segments.append(pages)
        self._mark(pages, DEFERRED_SEGMENT)
