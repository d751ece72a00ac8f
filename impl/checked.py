"""Checked mode: a host-side page-status table fed to the spec's validators (``ERR-1``).

The torch allocators built with ``checked=True`` validate each call with the very functions the
reference model uses (:mod:`kvpool.spec.rules`), looking pages up in :class:`PageStatusTable`.
The table is updated in O(pages moved) per call (``clear``/``resize`` rebuild it, a merge
touches the staged pages only). Validation reads the argument tensors on the host
(``tolist``), so checked mode synchronises with the device; unchecked mode never builds a table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch
from kvpool.spec import rules
from kvpool.spec.errors import ContractViolation
from kvpool.spec.rules import DEFERRED, DEFERRED_SEGMENT, FREE, OWNED, STAGED

RESERVED = "reserved"


def host_list(values: torch.Tensor | np.ndarray | Sequence[int]) -> list[int]:
    """A tensor, numpy array or sequence of ints as a Python list (synchronises for device
    tensors)."""
    if isinstance(values, torch.Tensor):
        flat = values.reshape(-1).tolist()
        integral = not values.is_floating_point() and values.dtype is not torch.bool
        return flat if integral else [int(v) for v in flat]  # tolist() gives ints already
    if isinstance(values, np.ndarray):
        flat = values.reshape(-1).tolist()
        return flat if values.dtype.kind in "iu" else [int(v) for v in flat]
    return list(values)


class PageStatusTable:
    """``status[page]`` for pages ``0..num_pages`` (``MODEL-3``), plus the open group's pages.

    ``deferred`` / ``deferred_segments`` list the pages named inside the open free group (free()
    pages once each, segment pages in enqueue order); ``staged`` the pages staged under
    ``need_sort`` in release order. All changes are O(pages named).
    """

    def __init__(self, num_pages: int) -> None:
        self.status: list[str] = [RESERVED] + [FREE] * num_pages
        self.deferred: list[int] = []
        self.deferred_segments: list[int] = []
        self.staged: list[int] = []

    def status_of(self, page: int) -> str:
        """The status of a page ``1..num_pages``."""
        return self.status[page]

    def mark(self, pages: Iterable[int], status: str) -> None:
        """Set every page of ``pages`` to ``status``."""
        for page in pages:
            self.status[page] = status

    # -- transitions -----------------------------------------------------------------------
    def taken(self, pages: Iterable[int]) -> None:
        """Pages handed out by an allocation."""
        self.mark(pages, OWNED)

    def released(self, pages: list[int], *, need_sort: bool) -> None:
        """Pages put back on the free list (or staged)."""
        if need_sort:
            self.staged.extend(pages)
            self.mark(pages, STAGED)
        else:
            self.mark(pages, FREE)

    def deferred_free(self, pages: list[int]) -> None:
        """Pages named by a ``free()`` inside the open group (``GROUP-6``: once each)."""
        self.deferred.extend(p for p in pages if self.status[p] != DEFERRED)
        self.mark(pages, DEFERRED)

    def deferred_segment(self, pages: list[int], *, paged: bool) -> None:
        """Pages of a segment free inside the open group (token segments join ``free()``)."""
        if not paged:
            self.deferred_free(pages)
            return
        self.deferred_segments.extend(pages)
        self.mark(pages, DEFERRED_SEGMENT)

    def group_released(self, *, paged: bool, need_sort: bool) -> None:
        """``free_group_end``: every deferred page is released (``GROUP-4``): the ``free()``
        pages first (paged: sorted), then the segment pages in enqueue order."""
        pages = (sorted(self.deferred) if paged else self.deferred) + self.deferred_segments
        self.deferred, self.deferred_segments = [], []
        self.released(pages, need_sort=need_sort)

    def merged(self) -> None:
        """``merge_and_sort_free``: the staged pages are free."""
        self.mark(self.staged, FREE)
        self.staged = []

    # -- validation (kvpool.spec.rules over this table) ------------------------------------
    def check_free(self, free_index: torch.Tensor | list[int], *, paged: bool, page_size: int,
                   group_open: bool) -> list[int]:
        """``free``: the pages released, or ContractViolation (``FREE-*``, ``GROUP-6``)."""
        pages: list[int] = rules.check_free(
            host_list(free_index), paged=paged, page_size=page_size,
            num_pages=len(self.status) - 1, status_of=self.status_of, group_open=group_open)
        return pages

    def check_segments(self, segments: Sequence[tuple[torch.Tensor, int]],
                       page_size: int) -> list[list[int]]:
        """``free_segments``: the pages each segment releases (``SEG-*``, ``FREE-*``)."""
        plain = [(host_list(idx), start) for idx, start in segments]
        pages: list[list[int]] = rules.check_segments(
            plain, page_size=page_size, num_pages=len(self.status) - 1, status_of=self.status_of)
        return pages

    def check_extend(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                     seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor,
                     extend_num_tokens: int, page_size: int) -> list[int]:
        """``alloc_extend``: new pages per request (``EXTEND-*``); host copies must match."""
        pre, seq = host_list(prefix_lens), host_list(seq_lens)
        if host_list(prefix_lens_cpu) != pre or host_list(seq_lens_cpu) != seq:
            raise ContractViolation("EXTEND-1", "the *_cpu lengths differ from the device lengths")
        new_pages: list[int] = rules.check_extend(
            pre, seq, host_list(last_loc), page_size=page_size, num_pages=len(self.status) - 1,
            status_of=self.status_of, extend_num_tokens=extend_num_tokens)
        return new_pages

    def check_decode(self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                     last_loc: torch.Tensor, page_size: int) -> list[int]:
        """``alloc_decode``: new pages per request (``DECODE-*``); host copy must match."""
        seq = host_list(seq_lens)
        if host_list(seq_lens_cpu) != seq:
            raise ContractViolation("DECODE-1", "seq_lens_cpu differs from seq_lens")
        new_pages: list[int] = rules.check_decode(
            seq, host_list(last_loc), page_size=page_size, num_pages=len(self.status) - 1,
            status_of=self.status_of)
        return new_pages

    # -- consistency -----------------------------------------------------------------------
    def check_invariants(self) -> list[str]:
        """Self-consistency: page 0 reserved, known statuses, listed pages carry their status."""
        problems = [] if self.status[0] == RESERVED else ["INV-3: page 0 is not reserved"]
        known = {FREE, STAGED, OWNED, DEFERRED, DEFERRED_SEGMENT}
        problems += [f"MODEL-3: page {p} has status {st!r}"
                     for p, st in enumerate(self.status[1:], 1) if st not in known]
        for pages, status in ((self.staged, STAGED), (self.deferred, DEFERRED),
                              (self.deferred_segments, DEFERRED_SEGMENT)):
            problems += [f"MODEL-3: page {p} listed {status} but is {self.status[p]}"
                         for p in pages if self.status[p] != status]
        return problems

    def disagreements(self, free: list[int], staged: list[int]) -> list[str]:
        """Where the table disagrees with the allocator's lists; empty when consistent."""
        expected = [RESERVED] + [OWNED] * (len(self.status) - 1)
        for pages, status in ((free, FREE), (staged, STAGED), (self.deferred, DEFERRED),
                              (self.deferred_segments, DEFERRED_SEGMENT)):
            for page in pages:
                if 0 < page < len(expected):
                    expected[page] = status
        bad = [p for p in range(len(expected)) if expected[p] != self.status[p]]
        problems = self.check_invariants()
        if bad:
            problems.append(f"MODEL-3: checked-mode status of pages {bad[:10]} disagrees")
        if staged != self.staged:
            problems.append("MODEL-3: checked-mode staged list disagrees with the staging buffer")
        return problems
