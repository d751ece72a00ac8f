"""Segment frees of the token and paged allocators: the pages a row segment touches, after the
boundary trim of a page shared with the previous segment (``SEG-2..6``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from kvpool.spec.segments import next_trim

from .backend import TorchOps
from .checked import PageStatusTable
from .ownership import Ownership, host_pages

Segment = tuple[torch.Tensor, int]


class SegmentFrees:
    """Mixin for :class:`~kvpool.impl.base.AllocatorBase` (needs its backend, page size, open
    group, checked-mode table, ownership guard and the release steps it names below)."""

    _ops: TorchOps
    page_size: int
    paged: ClassVar[bool]
    need_sort: bool
    free_group: list[Any] | None
    _table: PageStatusTable | None
    _owners: Ownership | None
    _guard_release: Callable[[list[Any]], None]
    _release: Callable[..., None]
    _deferred_segments: Callable[[], list[Any]]

    def free_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        """Release the pages touched by row positions ``[start_pos, start_pos + n)`` (``SEG-2``).

        One representative slot per logical page, picked by stride (count known on the host),
        released in row order (``SEG-3``). O(n / page_size); no host-device sync.
        """
        self.free_segments([(free_index, start_pos)])

    def free_segments(self, segments: Sequence[Segment]) -> None:
        """Release ascending segments of one row; a shared boundary page once (``SEG-4/5/6``).

        Each segment is released on its own, in order, after the boundary trim (host
        arithmetic on ``start_pos`` and ``numel`` only). No host-device sync when unchecked.
        """
        table = self._table
        checked_pages = table.check_segments(segments, self.page_size) if table else None
        per_segment = self._pages_of_segments(segments)
        if self.free_group is None:  # all or nothing, even for an unchecked double free
            self._guard_release([pages for _, pages in per_segment])
        for i, pages in per_segment:  # each a new backend-form array: the group may keep it
            if self.free_group is None:
                self._release(pages, guarded=False)
            elif self.paged:
                self._deferred_segments().append(pages)
            else:
                self.free_group.append(pages)
            if table is not None and checked_pages is not None:
                if self.free_group is None:
                    table.released(checked_pages[i], need_sort=self.need_sort)
                else:
                    table.deferred_segment(checked_pages[i], paged=self.paged)

    def _pages_of_segments(self, segments: Sequence[Segment]) -> list[tuple[int, Any]]:
        """Each non-empty segment's index and its pages after the boundary trim (``SEG-5``), in
        row order: new backend-form arrays."""
        per_segment: list[tuple[int, Any]] = []
        prev_end: int | None = None
        for i, (free_index, start_pos) in enumerate(segments):
            trim, prev_end = next_trim(start_pos, free_index.numel(), prev_end, self.page_size)
            pages = self._segment_pages(free_index, trim, start_pos + trim)
            if pages is not None:
                per_segment.append((i, pages))
        return per_segment

    def check_release_of_segments(self, segments: Sequence[Segment]) -> None:
        """The ownership guard's check of ``free_segments(segments)`` without releasing anything
        (``FREE-1..3``); no-op on device backends or inside a group (checked at its end)."""
        if self._owners is None or self.free_group is not None:
            return
        parts = [pages for _, pages in self._pages_of_segments(segments)]
        if parts:
            self._owners.check_release(np.concatenate([host_pages(p) for p in parts]),
                                       page_size=self.page_size)

    def _segment_pages(self, free_index: torch.Tensor, trim: int,
                       start_pos: int) -> Any | None:
        """Pages of the segment ``free_index[trim:]``, whose first slot is at row position
        ``start_pos``, in row order: a new backend-form array (None when empty).

        The spec's :func:`kvpool.spec.segments.segment_pages` in the backend
        (``segment_pages``): its representatives (``rep_offsets``) are index 0 and then every
        ``ps`` from ``ps - offset``, a strided read instead of a host list turned into an index
        tensor (no host-device sync). ``tests/impl/test_impl_spec_forms.py`` ties the two
        together on every backend.
        """
        if free_index.numel() <= trim:
            return None
        return self._ops.segment_pages(free_index, trim, start_pos % self.page_size)
