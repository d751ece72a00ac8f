"""The releases of a unified full + SWA pool: frees, window slides, segments and free groups.

A mixin of :class:`~kvpool.impl.unified_swa.UnifiedSWAAllocator`, call for call as SGLang
0.5.23's ``UnifiedSWATokenToKVPoolAllocator``:

- ``free(ids)`` releases the pages of ``ids`` on the SWA side where still bound, then on the full
  side, and appends their virtual ids ascending to the free list (``UNI-5``, ``UNI-10``);
- ``free_swa(ids)`` (the window slid past them) releases their SWA pages only;
  ``free_full(ids)`` the full side of pages whose SWA side is released already;
- the segment forms (``free_segment``, ``free_full_segment``, ``free_swa_segment``) take a
  page-aligned segment and release the pages of every ``page_size``-th token, in that order;
- between ``free_group_begin`` and ``free_group_end`` the frees SGLang defers (``free``,
  ``free_full``, ``free_segment``, ``free_full_segment``) wait and run at the end: the plain frees
  as one ``free``, the full frees as one, then the segments' pages (the SWA side of
  ``free_segment``'s, then the full side of all, in order). Window slides run at once.

Checked mode validates before anything changes: a page that is not live is ``UNI-11``, a
``free_full`` of a page whose SWA side is still bound ``UNI-10`` (:class:`ContractViolation`,
nothing changed).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from kvpool.spec.errors import ContractViolation

from .native_ops import compiled_pages
from .unified_end import EndSubPool

__all__ = ["UnifiedFrees", "host_ids", "small_distinct"]

_MIN, _MAX = np.minimum.reduce, np.maximum.reduce  # without ndarray.min's Python wrapper


def host_ids(values: Any) -> np.ndarray:
    """Token ids (a tensor of any integer dtype and strides, or a sequence) as a flat int64
    numpy array on the host."""
    if isinstance(values, torch.Tensor):
        if values.is_cpu and values.ndim == 1 and not values.requires_grad:
            arr = values.numpy()  # a view (strided views too)
            return arr if arr.dtype == np.int64 else arr.astype(np.int64)
        return values.detach().reshape(-1).to("cpu", torch.int64).numpy()
    return np.asarray(values, dtype=np.int64).reshape(-1)


def small_distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a short int64 array, ascending (``np.unique`` without its fixed
    cost: a Python set under 32 values, else a sort and a run mask)."""
    if len(values) < 32:
        return np.array(sorted(set(values.tolist())), dtype=np.int64)
    ordered = np.sort(values)
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


class UnifiedFrees:
    """Frees of a full + SWA composite (see the module docstring)."""

    full: EndSubPool
    swa: EndSubPool
    free_virtual: np.ndarray
    page_size: int
    checked: bool
    compiled: bool  # the compiled loops read the ids (compiled_pages), where they can
    _group: dict[str, list[np.ndarray]] | None
    _mark: np.ndarray  # all False between calls: scratch for _distinct

    # -- validation --

    def _pages_of_tensor(self, free_index: Any) -> np.ndarray:
        """:meth:`_pages_of` of a call's ids (a tensor or a sequence): by the compiled loops
        where they read it (:func:`~kvpool.impl.native_ops.compiled_pages`), else by numpy."""
        got = compiled_pages(free_index, self.page_size) if self.compiled else None
        if got is None:
            return self._pages_of(host_ids(free_index))
        pages, distinct = got
        if self.checked:
            self._check_live(pages, distinct)
        return pages if distinct else self._distinct(pages)

    def _pages_of(self, ids: np.ndarray) -> np.ndarray:
        """The distinct virtual pages of ``ids``, ascending; checked: each one live
        (``UNI-11``)."""
        ps = self.page_size
        pages = ids // ps if ps > 1 else ids
        if ps > 1 and len(pages) > 1:  # drop runs of one page (a row's tokens share pages)
            step = np.empty(len(pages), dtype=bool)
            step[0] = True
            np.not_equal(pages[1:], pages[:-1], out=step[1:])
            pages = pages[step]
        ascending = len(pages) < 2 or not np.count_nonzero(pages[1:] <= pages[:-1])
        if self.checked:
            self._check_live(pages, ascending)
        return pages if ascending else self._distinct(pages)

    def _group_pages(self, ids: np.ndarray) -> np.ndarray:
        """The virtual pages of ``ids`` for a deferred free, a private copy, not deduplicated
        (the group's end does that for all its parts at once); checked: each one live
        (``UNI-11``)."""
        ps = self.page_size
        if ps > 1:
            pages = ids // ps
            if len(pages) > 1:  # drop runs of one page (a row's tokens share pages)
                step = np.empty(len(pages), dtype=bool)
                step[0] = True
                np.not_equal(pages[1:], pages[:-1], out=step[1:])
                pages = pages[step]
        else:
            pages = ids.copy()
        if self.checked:
            self._check_live(pages)
        return pages

    def _distinct(self, pages: np.ndarray) -> np.ndarray:
        """The distinct values of ``pages`` (ids in range), ascending: a sort for a few hundred,
        else a mark table, O(ids)."""
        if len(pages) < 256:
            return small_distinct(pages)
        mark = self._mark
        mark[pages] = True
        out = np.flatnonzero(mark)
        mark[out] = False
        return out

    def _check_live(self, pages: np.ndarray, ascending: bool = False) -> None:
        if len(pages) == 0:
            return
        limit = len(self.full.v2p)
        if ascending:
            outside = int(pages[0]) < 0 or int(pages[-1]) >= limit
        else:  # one reduction: a negative id reads as a huge unsigned one
            outside = int(_MAX(pages.view(np.uint64))) >= limit
        if outside:
            bad = pages[(pages < 0) | (pages >= limit)]
            raise ContractViolation("UNI-11", f"virtual pages {bad.tolist()[:8]} are out of "
                                              f"range [0, {limit})")
        phys = self.full.v2p[pages]
        if int(_MIN(phys)) < 0:
            dead = np.unique(pages[phys < 0])
            raise ContractViolation("UNI-11", f"virtual pages {dead.tolist()[:8]} are not live")

    def _check_swa_released(self, pages: np.ndarray) -> None:
        bound_mask = self.swa.v2p[pages] >= 0
        if np.count_nonzero(bound_mask):
            bound = pages[bound_mask]
            raise ContractViolation("UNI-10", f"free_full of pages {sorted(bound.tolist())[:8]} "
                                              "whose SWA side is live")

    # -- releases --

    def _release_both(self, pages: np.ndarray) -> None:
        """Release ``pages`` (distinct, live) on the SWA side where bound and on the full side;
        append them to the free virtual ids in this order."""
        if len(pages) == 0:
            return
        swa_live = pages[self.swa.v2p[pages] >= 0]
        self.swa.release(swa_live)
        self.full.release(pages)
        self.free_virtual = np.concatenate((self.free_virtual, pages))

    def _defer(self, kind: str, pages: np.ndarray) -> bool:
        if self._group is None:
            return False
        self._group[kind].append(pages)
        return True

    def free(self, free_index: torch.Tensor) -> None:
        """Free the pages of ``free_index`` on both sides (deferred inside a free group).

        Raises:
            ContractViolation: checked, ``UNI-11`` when a page is not live; nothing changed.
        """
        if free_index is None or free_index.numel() == 0:
            return
        if self._group is not None:
            self._group["free"].append(self._group_pages(host_ids(free_index)))
            return
        self._release_both(self._pages_of_tensor(free_index))

    def free_full(self, free_index: torch.Tensor) -> None:
        """Free the full side and the virtual ids of pages whose SWA side is released.

        Raises:
            ContractViolation: checked, ``UNI-11`` (a page not live), ``UNI-10`` (its SWA side
                still bound); nothing changed.
        """
        if free_index is None or free_index.numel() == 0:
            return
        grouped = self._group is not None
        pages = (self._group_pages(host_ids(free_index)) if grouped
                 else self._pages_of_tensor(free_index))
        if self.checked:
            self._check_swa_released(pages)
        if not self._defer("free_full", pages):
            self._release_both(pages)

    def free_swa(self, free_index: torch.Tensor) -> None:
        """Release the SWA pages of ``free_index``; pages already released are skipped; the
        virtual ids and full pages stay live (``UNI-10``). Never deferred.

        Raises:
            ContractViolation: checked, ``UNI-11`` when a page is not live; nothing changed.
        """
        if free_index is None or free_index.numel() == 0:
            return
        pages = self._pages_of_tensor(free_index)
        self.swa.release(pages[self.swa.v2p[pages] >= 0])

    def _segment_pages(self, free_index: torch.Tensor, start_pos: int) -> np.ndarray:
        ps = self.page_size
        if start_pos % ps:
            raise ContractViolation("UNI-10", f"segment start {start_pos} is not page-aligned")
        ids = host_ids(free_index)
        reps = ids[::ps] // ps if ps > 1 else ids
        pages = reps[np.sort(np.unique(reps, return_index=True)[1])] if len(reps) > 1 else reps
        if self.checked:
            self._check_live(pages)
        return pages

    def free_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        """``free`` of a page-aligned row segment, its pages in segment order (deferred inside
        a free group)."""
        if free_index is None or free_index.numel() == 0:
            return
        pages = self._segment_pages(free_index, start_pos)
        if not self._defer("free_segment", pages.copy()):
            self._release_both(pages)

    def free_full_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        """``free_full`` of a page-aligned row segment (deferred inside a free group)."""
        if free_index is None or free_index.numel() == 0:
            return
        pages = self._segment_pages(free_index, start_pos)
        if not self._defer("free_full_segment", pages.copy()):
            self._release_both(pages)

    def free_swa_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        """``free_swa`` of a page-aligned row segment."""
        if free_index is None or free_index.numel() == 0:
            return
        pages = self._segment_pages(free_index, start_pos)
        self.swa.release(pages[self.swa.v2p[pages] >= 0])

    # -- groups --

    def free_group_begin(self) -> None:
        """Open a free group: the deferrable frees wait for :meth:`free_group_end`.

        Raises:
            ContractViolation: ``UNI-10`` when a group is open already; nothing changed.
        """
        if self._group is not None:
            raise ContractViolation("UNI-10", "free groups cannot be nested")
        self._group = {"free": [], "free_full": [], "free_segment": [],
                       "free_full_segment": []}

    def free_group_end(self) -> None:
        """Close the group and run its deferred frees in SGLang's order (module docstring);
        a page named twice is freed once."""
        group, self._group = self._group, None
        if group is None:
            return
        for kind in ("free", "free_full"):
            if group[kind]:
                parts = group[kind]
                pages = self._distinct(parts[0] if len(parts) == 1 else np.concatenate(parts))
                if kind == "free_full" or not self.checked:  # checked: live at the call
                    pages = pages[self.full.v2p[pages] >= 0]
                self._release_both(pages)
        if not group["free_segment"] and not group["free_full_segment"]:
            return
        both = _ordered_unique(group["free_segment"])
        full_only = _ordered_unique(group["free_full_segment"])
        if len(both) == 0 and len(full_only) == 0:
            return
        both = both[self.full.v2p[both] >= 0]
        self.swa.release(both[self.swa.v2p[both] >= 0])
        pages = _ordered_unique([both, full_only])
        pages = pages[self.full.v2p[pages] >= 0]
        self.swa.release(pages[self.swa.v2p[pages] >= 0])
        self.full.release(pages)
        self.free_virtual = np.concatenate((self.free_virtual, pages))

    def _flush_group(self) -> None:
        """Run the open group's deferred frees and reopen it (before an eviction plan)."""
        if self._group is not None and any(self._group.values()):
            self.free_group_end()
            self.free_group_begin()


def _ordered_unique(parts: list[np.ndarray]) -> np.ndarray:
    if not parts:
        return np.empty(0, dtype=np.int64)
    joined = np.concatenate(parts)
    if len(joined) < 2:
        return joined
    return joined[np.sort(np.unique(joined, return_index=True)[1])]
