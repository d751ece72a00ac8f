"""The releases of the unified full + Mamba model: token frees, segments, groups, state frees.

A mixin of :class:`~kvpool.spec.unified_mamba.UnifiedMambaModel`, call for call as SGLang
0.5.23's ``UnifiedMambaTokenToKVPoolAllocator`` (``UMB-2``, ``UMB-5``): a free releases pages of
the full end and appends their virtual ids to its free-id list (ascending and deduplicated,
except lazily at page size 1: in the order given); a segment free releases the page of every
``page_size``-th id in row order; a free group defers both until it ends. Caller errors raise
``ContractViolation("UMB-8")`` before anything changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import ContractViolation
from .unified_tables import EndPool


class UnifiedMambaFrees:
    """Frees of the full end and of the state end (``UMB-2``, ``UMB-5``, ``UMB-8``)."""

    page_size: int
    lazy: bool
    full: EndPool
    state: EndPool
    free_virtual: list[int]
    free_state_ids: list[int]
    group: list[int] | None
    group_pages: list[int] | None

    def _live_pages(self, ids: Sequence[int]) -> list[int]:
        pages = [t // self.page_size for t in ids]
        dead = sorted({v for v in pages if v not in self.full.v2p})
        if dead:
            raise ContractViolation("UMB-8", f"virtual pages {dead} are not live")
        return pages

    def _queued(self) -> tuple[set[int], set[int]]:
        """Pages an open free group holds back: of its plain frees, of its segment frees."""
        return ({t // self.page_size for t in self.group or []}, set(self.group_pages or []))

    def _release_full(self, pages: list[int]) -> None:
        self.full.release(pages)
        self.free_virtual += pages

    def free(self, ids: Sequence[int]) -> None:
        """Free the pages of ``ids`` (``UMB-2``): deferred while a free group is open; their
        virtual ids join the back of the free list ascending (lazy at page size 1: in the
        order given).

        Raises:
            ContractViolation: ``UMB-8`` when a page is not live, at page size 1 an id is
                named twice, or a page is queued already in the open group (by a segment free,
                or at page size 1 by any free); nothing changed.
        """
        if not ids:
            return
        pages = self._live_pages(ids)
        queued_plain, queued_segments = self._queued()
        twice = set(pages) & (queued_segments | (queued_plain if self.page_size == 1 else set()))
        if twice or (self.page_size == 1 and len(set(pages)) != len(pages)):
            raise ContractViolation("UMB-8", f"ids named twice in {list(ids)} (or already "
                                             f"queued in the open free group: {sorted(twice)})")
        if self.group is not None:
            self.group += list(ids)
            return
        self._release_full(pages if self.lazy and self.page_size == 1 else sorted(set(pages)))

    def free_segment(self, ids: Sequence[int], start_pos: int) -> None:
        """Free a page-aligned segment of a request's rows (``UMB-2``): the page of every
        ``page_size``-th id, in row order (deferred while a free group is open); page size 1
        is :meth:`free`.

        Raises:
            ContractViolation: ``UMB-8`` when ``start_pos`` is not page-aligned, a page is not
                live, named twice or queued already in the open group; nothing changed.
        """
        if not ids:
            return
        if self.page_size == 1:
            self.free(ids)
            return
        if start_pos % self.page_size:
            raise ContractViolation("UMB-8", f"segment start {start_pos} is not page-aligned")
        pages = self._live_pages(ids[::self.page_size])
        queued_plain, queued_segments = self._queued()
        if len(set(pages)) != len(pages) or set(pages) & (queued_plain | queued_segments):
            raise ContractViolation("UMB-8", f"segment pages named twice: {pages}")
        if self.group_pages is None:
            self._release_full(pages)
        else:
            self.group_pages += pages

    def free_group_begin(self) -> None:
        """Open a free group: frees wait until :meth:`free_group_end` (``UMB-2``).

        Raises:
            ContractViolation: ``UMB-8`` when a group is open already.
        """
        if self.group is not None:
            raise ContractViolation("UMB-8", "free groups cannot be nested")
        self.group, self.group_pages = [], []

    def free_group_end(self) -> None:
        """Close the group: its plain frees run as one :meth:`free`, then its segment pages."""
        plain, pages = self.group or [], self.group_pages or []
        self.group = self.group_pages = None
        if plain:
            self.free(plain)
        if pages:
            self._release_full(pages)

    def flush_deferred_full_frees(self) -> None:
        """Run an open group's deferred frees and reopen it (``UMB-5``)."""
        if self.group is not None and (self.group or self.group_pages):
            self.free_group_end()
            self.free_group_begin()

    def free_state(self, slots: Sequence[int]) -> None:
        """Release state slots (``UMB-5``): eager compaction closes the end at once, lazy keeps
        holes; the ids join the back of the free list (eager ascending, lazy as given).

        Raises:
            ContractViolation: ``UMB-8`` when a slot is not live or named twice; nothing changed.
        """
        dead = sorted({v for v in slots if v not in self.state.v2p})
        if dead or len(set(slots)) != len(slots):
            raise ContractViolation("UMB-8", f"state slots {dead or list(slots)} are not live "
                                             f"or named twice")
        ordered = list(slots) if self.lazy else sorted(slots)
        self.state.release(ordered)
        self.free_state_ids += ordered

