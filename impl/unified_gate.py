"""Byte-denominated capacity of a unified full + SWA pool (``UNI-7`` .. ``UNI-9``).

The formulas are the spec's (:mod:`kvpool.spec.unified_layout`, the model's ``fits`` /
``fits_after_reclaim`` / ``reclaim_plan``), evaluated on the live sub-pools; SGLang 0.5.23's
``UnifiedSWATokenToKVPoolAllocator`` gates the same way (``_fits_page_demand``,
``ensure_capacity``, ``reclaim_plan``). A mixin of
:class:`~kvpool.impl.unified_swa.UnifiedSWAAllocator`, which provides ``full``, ``swa`` (the
:class:`~kvpool.impl.unified_end.EndSubPool` sides), ``free_virtual``, ``page_size``, ``lazy``,
the static caps and ``moves_blocked()``.
"""

from __future__ import annotations

import numpy as np
from kvpool.spec import unified_layout as ul

from .unified_end import EndSubPool

__all__ = ["CapacityGate"]


class CapacityGate:
    """Capacity views and the allocation gate of a full + SWA composite."""

    full: EndSubPool
    swa: EndSubPool
    free_virtual: np.ndarray
    page_size: int
    lazy: bool
    full_max_tokens: int
    swa_max_tokens: int

    def moves_blocked(self) -> bool:
        raise NotImplementedError

    def _gap_bytes(self) -> int:
        """Free bytes between the SWA (grow-up) and the full (grow-down) frontier."""
        gap = (self.full.watermark + 1) * self.full.page_bytes - (
            self.swa.watermark * self.swa.page_bytes)
        return gap if gap > 0 else 0

    # -- views --

    def available_size(self) -> int:
        """Tokens ``alloc`` takes now without compaction (``UNI-7``)."""
        f, s = self.full, self.swa
        if not self.lazy:
            pages = ul.eager_joint_pages(self._gap_bytes(), f.page_bytes, s.page_bytes,
                                         f.room(), s.room())
        else:
            pages = ul.lazy_joint_pages(self._gap_bytes(), f.page_bytes, s.page_bytes,
                                        f.num_holes(), s.num_holes(), f.room(), s.room())
        return int(min(pages, len(self.free_virtual))) * self.page_size

    def _schedulable(self, pool: EndSubPool, other: EndSubPool) -> int:
        credit = 0 if self.moves_blocked() else other.num_holes() * other.page_bytes
        pages = ul.side_available_pages(self._gap_bytes() + credit, pool.page_bytes,
                                        pool.room(), pool.num_holes())
        return int(pages) * self.page_size

    def full_available_size(self) -> int:
        """``min(static cap - live full tokens, schedulable full tokens)`` (``UNI-9``)."""
        return min(self.full_max_tokens - self.full.live * self.page_size,
                   self._schedulable(self.full, self.swa))

    def swa_available_size(self) -> int:
        """``min(static cap - live SWA tokens, schedulable SWA tokens)`` (``UNI-9``)."""
        return min(self.swa_max_tokens - self.swa.live * self.page_size,
                   self._schedulable(self.swa, self.full))

    # -- the gate --

    def fits(self, full_pages: int, swa_pages: int, *, compacted: bool, full_reclaim: int = 0,
             swa_reclaim: int = 0) -> bool:
        """Whether ``full_pages`` / ``swa_pages`` new pages fit (``UNI-8``), after
        ``full_reclaim`` / ``swa_reclaim`` live pages a side are released; ``compacted``: after
        both sides' holes are closed (released pages included), else the released pages are
        holes where they are (SGLang's ``_fits_page_demand``)."""
        f, s = self.full, self.swa
        ids = f.num_pages - f.min_page
        full_back, swa_back = min(full_reclaim, f.live), min(swa_reclaim, s.live)
        full_live, swa_live = f.live - full_back, s.live - swa_back
        full_cap = min(ids, f.num_pages - f.min_page)
        swa_cap = min(ids, s.num_pages - s.min_page)
        if full_live + full_pages > full_cap or swa_live + swa_pages > swa_cap:
            return False
        if compacted:
            virtual_room = ids - full_live
            gap = ul.gap_bytes((s.min_page + swa_live) * s.page_bytes,
                               (f.num_pages - full_live) * f.page_bytes)
            return full_pages <= virtual_room and ul.fits_pages(
                full_pages, swa_pages, 0, 0, full_cap - full_live, swa_cap - swa_live, gap,
                f.page_bytes, s.page_bytes)
        if full_pages > len(self.free_virtual) + full_back:
            return False
        full_holes, swa_holes = len(f.holes) + full_back, len(s.holes) + swa_back
        full_room, swa_room = f.room(), s.room()
        if full_pages > full_holes + full_room or swa_pages > swa_holes + swa_room:
            return False  # ``unified_layout.fits_pages``, inline
        extend = (max(0, full_pages - full_holes) * f.page_bytes
                  + max(0, swa_pages - swa_holes) * s.page_bytes)
        return extend <= self._gap_bytes()

    def ensure_capacity(self, full_tokens: int, swa_tokens: int) -> bool:
        """Gate one allocation (``UNI-8``): True when it fits now; under lazy compaction with no
        move gate closed, when it fits after compaction, both sides are compacted first."""
        if full_tokens < 0 or swa_tokens < 0:
            return False
        if full_tokens == 0 and swa_tokens == 0:
            return True
        ps = self.page_size
        full_pages, swa_pages = -(-full_tokens // ps), -(-swa_tokens // ps)
        if self.fits(full_pages, swa_pages, compacted=False):
            return True
        if not self.lazy or self.moves_blocked():
            return False
        if not self.fits(full_pages, swa_pages, compacted=True):
            return False
        self.full.flush(urgent=True)
        self.swa.flush(urgent=True)
        return self.fits(full_pages, swa_pages, compacted=False)

    def reclaim_plan(self, full_tokens: int, swa_tokens: int, *, full_evictable_tokens: int = 0,
                     swa_evictable_tokens: int = 0) -> tuple[int, int] | None:
        """The ``(full, swa)`` tokens to evict so that the demand fits after compaction
        (``UNI-8``): ``(0, 0)`` when it fits already; else the least SWA reclaim that fits with
        all evictable full pages, then the least full reclaim with it, in whole pages; None
        when even everything evictable does not make it fit. Counts no compaction while a
        move gate is closed."""
        if full_tokens < 0 or swa_tokens < 0:
            return None
        ps = self.page_size
        full_pages, swa_pages = -(-full_tokens // ps), -(-swa_tokens // ps)
        compacted = not self.lazy or not self.moves_blocked()

        def ok(full: int, swa: int) -> bool:
            return self.fits(full_pages, swa_pages, compacted=compacted, full_reclaim=full,
                             swa_reclaim=swa)

        if ok(0, 0):
            return (0, 0)
        most_full = min(self.full.live, max(0, full_evictable_tokens) // ps)
        most_swa = min(self.swa.live, max(0, swa_evictable_tokens) // ps)
        if not ok(most_full, most_swa):
            return None
        swa = _first_fit(most_swa, lambda n: ok(most_full, n))
        full = _first_fit(most_full, lambda n: ok(n, swa))
        return full * ps, swa * ps


def _first_fit(high: int, predicate: object) -> int:
    """The least ``n`` in ``[0, high]`` with ``predicate(n)`` (monotone; ``predicate(high)``
    holds)."""
    low = 0
    while low < high:
        mid = (low + high) // 2
        if predicate(mid):  # type: ignore[operator]
            high = mid
        else:
            low = mid + 1
    return low
