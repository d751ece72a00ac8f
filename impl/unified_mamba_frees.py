"""The releases of a unified full + Mamba composite: token frees, segments, groups, state slots.

A mixin of :class:`~kvpool.impl.unified_mamba.UnifiedMambaAllocator`, call for call as SGLang
0.5.23's ``UnifiedMambaTokenToKVPoolAllocator`` (``UMB-2``, ``UMB-5``):

- ``free(ids)`` releases the full pages of ``ids`` and appends their virtual page ids to the
  free list: ascending and distinct, except under lazy compaction at page size 1, where the
  ids go in the order given, as do the holes they leave;
- ``free_segment(ids, start_pos=...)`` (page-aligned) releases the page of every
  ``page_size``-th token, in segment order (page size 1: a plain ``free``);
- between ``free_group_begin`` and ``free_group_end`` both wait: the plain frees run first, as
  one ``free`` of their ids concatenated, then the segments' pages, concatenated;
- ``free_state_slots(slots)`` (``mamba_allocator.free``) releases state slots at once (a group
  does not defer them), their ids appended ascending (lazy: in the order given).

Checked mode validates before anything changes and refuses with ``ContractViolation("UMB-8")``:
an id out of range or whose page is not live, an id named twice at page size 1 (at larger
page sizes a free's pages are deduplicated), a segment naming a page twice, a page a group
already holds for a segment free (or, at page size 1, for any free), a misaligned segment,
nested groups, a state slot that is not live or named twice.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from kvpool.spec.errors import ContractViolation

from .native_ops import compiled_pages
from .unified_end import EndSubPool
from .unified_frees import host_ids, small_distinct

__all__ = ["UnifiedMambaFrees"]

_PLAIN, _SEGMENT = 1, 2  # what an open group holds a page for


class UnifiedMambaFrees:
    """Frees of a full + Mamba composite (module docstring)."""

    full: EndSubPool
    state: EndSubPool
    free_virtual: np.ndarray
    free_state: np.ndarray
    page_size: int
    lazy: bool
    checked: bool
    compiled: bool  # a plain free's pages by the compiled loops, where they read the ids

    def _init_frees(self, num_virtual: int) -> None:
        self._group: list[np.ndarray] | None = None
        self._segment_group: list[np.ndarray] | None = None
        self._held = np.zeros(num_virtual, dtype=np.int8)  # by virtual page, in an open group
        self._held_pages: list[np.ndarray] = []  # the pages marked in _held

    def _reset_group(self, *, everything: bool = False) -> None:
        """No group open; the held marks cleared (``everything``: the whole table, else the
        pages marked)."""
        self._group = self._segment_group = None
        if everything:
            self._held.fill(0)
        for pages in self._held_pages:
            self._held[pages] = 0
        self._held_pages = []

    # -- validation --

    def _check_pages(self, pool: EndSubPool, pages: np.ndarray, what: str) -> None:
        """Each of ``pages`` in range and live on ``pool`` (``UMB-8``)."""
        if len(pages) == 0:
            return
        limit = len(pool.v2p)
        bad = pages[(pages < 0) | (pages >= limit)]
        if len(bad):
            raise ContractViolation("UMB-8", f"{what} {bad.tolist()[:8]} are out of range "
                                             f"[0, {limit})")
        dead = pages[pool.v2p[pages] < 0]
        if len(dead):
            raise ContractViolation("UMB-8", f"{what} {sorted(set(dead.tolist()))[:8]} are not "
                                             "live")

    @staticmethod
    def _check_distinct(ids: np.ndarray, what: str) -> None:
        if len(ids) > 1 and len(small_distinct(ids)) != len(ids):
            raise ContractViolation("UMB-8", f"{what} names an id twice")

    def _free_pages(self, ids: np.ndarray) -> np.ndarray:
        """The virtual pages a ``free`` of token ``ids`` releases, in release order; checked:
        validated."""
        ps = self.page_size
        if self.checked:
            if ps == 1:
                self._check_distinct(ids, "free")
            self._check_pages(self.full, ids // ps if ps > 1 else ids, "virtual pages")
        if ps == 1 and self.lazy:
            return ids.copy()
        return small_distinct(ids // ps if ps > 1 else ids)

    def _compiled_free(self, free_index: Any) -> bool:
        """A ``free`` outside a group whose release order is ascending (not lazy at page
        size 1) through the compiled loops' sorted distinct pages: True when done; False,
        nothing changed, where they do not read the ids or the pages come back unsorted (the
        numpy form serves). Checked: as :meth:`_free_pages`."""
        if not self.compiled or (self.page_size == 1 and self.lazy):
            return False
        got = compiled_pages(free_index, self.page_size)
        if got is None or not got[1]:
            return False
        pages = got[0]
        if self.checked:
            if self.page_size == 1 and len(pages) != free_index.numel():
                raise ContractViolation("UMB-8", "free names an id twice")
            self._check_pages(self.full, pages, "virtual pages")
        self._release(pages)
        return True

    def _segment_pages(self, ids: np.ndarray, start_pos: int) -> np.ndarray:
        ps = self.page_size
        if start_pos % ps:
            raise ContractViolation("UMB-8", f"segment start {start_pos} is not page-aligned")
        pages = ids[::ps] // ps
        if self.checked:
            self._check_distinct(pages, "free_segment")
            self._check_pages(self.full, pages, "virtual pages")
        return pages

    def _hold(self, pages: np.ndarray, kind: int) -> None:
        """Mark ``pages`` as held by the open group for a ``kind`` free; checked: refuse a
        page the group already holds for a segment free, or at page size 1 for any free."""
        if self.checked and len(pages):
            held = self._held[pages]
            clash = held == _SEGMENT if kind == _PLAIN and self.page_size > 1 else held != 0
            if clash.any():
                raise ContractViolation("UMB-8", f"pages {pages[clash].tolist()[:8]} are freed "
                                                 "twice in one free group")
        self._held[pages] = np.maximum(self._held[pages], kind)
        self._held_pages.append(pages)

    # -- releases --

    def _release(self, pages: np.ndarray) -> None:
        """Release live ``pages`` on full (eager compacts at once) and append their ids."""
        if len(pages) == 0:
            return
        self.full.release(pages)
        self.free_virtual = np.concatenate((self.free_virtual, pages))

    def free(self, free_index: torch.Tensor) -> None:
        """Free the full pages of ``free_index`` (deferred inside a free group).

        Raises:
            ContractViolation: checked, ``UMB-8`` (module docstring); nothing changed.
        """
        if free_index is None or free_index.numel() == 0:
            return
        if self._group is None and self._compiled_free(free_index):
            return
        ids = host_ids(free_index)
        pages = self._free_pages(ids)
        if self._group is not None:
            self._hold(pages, _PLAIN)
            self._group.append(ids.copy())
            return
        self._release(pages)

    def free_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        """``free`` of a page-aligned row segment: the page of every ``page_size``-th token,
        in segment order (deferred inside a free group).

        Raises:
            ContractViolation: ``UMB-8`` for a misaligned ``start_pos``; checked, as ``free``.
        """
        if free_index is None or free_index.numel() == 0:
            return
        if self.page_size == 1:
            self.free(free_index)
            return
        pages = self._segment_pages(host_ids(free_index), start_pos)
        if self._segment_group is not None:
            self._hold(pages, _SEGMENT)
            self._segment_group.append(pages.copy())
            return
        self._release(pages)

    # -- groups --

    def free_group_begin(self) -> None:
        """Open a free group: ``free`` and ``free_segment`` wait for :meth:`free_group_end`.

        Raises:
            ContractViolation: ``UMB-8`` when a group is open already; nothing changed.
        """
        if self._group is not None:
            raise ContractViolation("UMB-8", "free groups cannot be nested")
        self._group, self._segment_group = [], []

    def free_group_end(self) -> None:
        """Close the group and run its frees: the plain ones as one ``free``, then the
        segments' pages."""
        plain, segments = self._group, self._segment_group
        self._reset_group()
        if plain:
            ids = plain[0] if len(plain) == 1 else np.concatenate(plain)
            ps = self.page_size
            self._release(ids.copy() if ps == 1 and self.lazy else
                          small_distinct(ids // ps if ps > 1 else ids))
        if segments:
            self._release(segments[0] if len(segments) == 1 else np.concatenate(segments))

    def flush_deferred_full_frees(self) -> None:
        """Run an open free group's deferred frees; the group stays open."""
        if self._group is not None and (self._group or self._segment_group):
            self.free_group_end()
            self.free_group_begin()

    # -- state slots --

    def free_state_slots(self, slots: Any) -> None:
        """Release state slots (``UMB-5``): eager compacts the state end at once, lazy leaves
        holes; the ids join the state end's free list.

        Raises:
            ContractViolation: checked, ``UMB-8`` when a slot is not live or named twice;
                nothing changed.
        """
        if slots is None:
            return
        ids = host_ids(slots)
        if len(ids) == 0:
            return
        if self.checked:
            self._check_distinct(ids, "a state free")
            self._check_pages(self.state, ids, "state slots")
        pages = ids.copy() if self.lazy else small_distinct(ids)
        self.state.release(pages)
        self.free_state = np.concatenate((self.free_state, pages))
