"""Byte-denominated capacity of a tri-pool: views and the allocation ladder (``UNI-14``).

A mixin of :class:`~kvpool.impl.unified_tri.UnifiedMambaSWAAllocator`. The capacity views are
the spec's functions of the chain's frontiers (:mod:`kvpool.spec.unified_float`, evaluated on
:meth:`TriCapacityGate.float_chain`); the gate is SGLang 0.5.23's
``UnifiedMambaSWATokenToKVPoolAllocator.ensure_capacity`` ladder: the demand fits the chain as
it stands (``can_reserve``); else, for unequal demands (a prealloc), every member is flushed
(the float's boundary holes absorbed, the lazy ends compacted) and the float opens the short
side; for equal demands, the ends are flushed when that alone makes it fit, the float's span
retreats from full when a fresh band below it makes room, and otherwise the shortfall ladder
runs (flush, then open the float's short side). A refusal is answered only after the moves
the ladder made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvpool.spec.unified_float import (
    FloatChain,
    Grid,
    capacity_views,
    fits_on_chain,
    joint_available_tokens,
    schedulable_full_tokens,
    schedulable_swa_tokens,
    state_available_slots,
    state_schedulable_slots,
)

from .unified_end import EndSubPool

__all__ = ["TriCapacityGate"]


def _grid(pool: Any) -> Grid:
    """The member's page grid (its geometry never changes: built once, kept on the member)."""
    grid: Grid | None = getattr(pool, "_grid", None)
    if grid is None:
        grid = pool._grid = Grid(pool.page_bytes, pool.num_pages, pool.min_page)
    return grid


class TriCapacityGate:
    """Capacity views and the allocation gate of a tri-pool (module docstring)."""

    full: EndSubPool
    swa: Any  # a FloatSubPool (typed as the two-member pool's mixins type their SWA side)
    state: EndSubPool
    page_size: int
    lazy: bool
    total_bytes: int
    full_max_tokens: int
    swa_max_tokens: int
    free_virtual: Any
    moves_blocked: Callable[[], bool]  # the composite's: whether a move gate is closed

    # -- frontiers --

    def state_high_byte(self) -> int:
        return self.state.band()[1]

    def full_low_byte(self) -> int:
        return self.full.band()[0]

    def full_below_byte(self) -> int:
        """What the full end grows down to: the float's top, or the state end's frontier
        through an empty float."""
        return self.state_high_byte() if self.swa.transparent else self.swa.band()[1]

    def _end_holes(self, pool: EndSubPool) -> int:
        return pool.num_holes() if pool.lazy else 0

    def float_chain(self) -> FloatChain:
        """The chain's frontiers as a spec snapshot (``UNI-14``)."""
        f, s, m, ps = self.full, self.swa, self.state, self.page_size
        drains = not self.moves_blocked()
        return FloatChain(
            page_size=ps, state=_grid(m), swa=_grid(s), full=_grid(f),
            state_high_byte=self.state_high_byte(), state_holes=self._end_holes(m),
            state_drains=m.lazy and drains, swa_low_page=s.low, swa_high_page=s.high,
            swa_holes=s.num_holes(), full_low_byte=self.full_low_byte(),
            full_span_pages=f.span_pages(), full_holes=self._end_holes(f),
            full_drains=f.lazy and drains, full_static_tokens=self.full_max_tokens,
            swa_static_tokens=self.swa_max_tokens, full_live_tokens=f.live * ps,
            swa_live_tokens=s.live * ps)

    # -- views --

    def capacity_views(self) -> dict[str, int]:
        """Every capacity view by name (:func:`kvpool.spec.unified_float.capacity_views`)."""
        return dict(capacity_views(self.float_chain()))

    # each view evaluates only its own function of the chain (capacity_views: all of them)

    def available_size(self) -> int:
        """Tokens ``alloc`` takes on both sides now, without moving a page (``UNI-14``)."""
        return int(joint_available_tokens(self.float_chain()))

    def schedulable_full_available_size(self) -> int:
        return int(schedulable_full_tokens(self.float_chain()))

    def schedulable_swa_available_size(self) -> int:
        return int(schedulable_swa_tokens(self.float_chain()))

    def full_available_size(self) -> int:
        """``min(static cap - live full tokens, schedulable full tokens)`` (``UNI-9``)."""
        chain = self.float_chain()
        return int(min(chain.full_static_tokens - chain.full_live_tokens,
                       schedulable_full_tokens(chain)))

    def swa_available_size(self) -> int:
        """``min(static cap - live SWA tokens, schedulable SWA tokens)`` (``UNI-9``)."""
        chain = self.float_chain()
        return int(min(chain.swa_static_tokens - chain.swa_live_tokens,
                       schedulable_swa_tokens(chain)))

    def state_available_size(self) -> int:
        """State slots the state end takes now (``UNI-16``): its gap up to the float (or full
        through an empty float) within its index room, plus its holes under lazy compaction."""
        return int(state_available_slots(self.float_chain()))

    def state_schedulable_size(self) -> int:
        """State slots after an urgent flush of the growth-side neighbour (``UNI-16``): full's
        drainable holes credited through an empty float, else :meth:`state_available_size`."""
        return int(state_schedulable_slots(self.float_chain()))

    # -- the gate --

    def can_reserve(self, full_tokens: int, swa_tokens: int) -> bool:
        """Whether the demand fits the chain as it stands (no move)."""
        if full_tokens < 0 or swa_tokens < 0:
            return False
        ps = self.page_size
        return bool(fits_on_chain(self.float_chain(), -(-full_tokens // ps),
                                  -(-swa_tokens // ps)))

    def _flush_ends(self) -> None:
        if not self.moves_blocked():
            self.full.flush(urgent=True) if self.full.lazy else None
            self.state.flush(urgent=True) if self.state.lazy else None

    def _flush_all(self) -> None:
        self.swa.flush()
        self._flush_ends()

    def ensure_capacity(self, full_tokens: int, swa_tokens: int) -> bool:
        """Gate one allocation (module docstring)."""
        if full_tokens < 0 or swa_tokens < 0:
            return False
        if self.can_reserve(full_tokens, swa_tokens):
            return True
        ps = self.page_size
        if full_tokens != swa_tokens:
            self._flush_all()
            if self.can_reserve(full_tokens, swa_tokens):
                return True
            self._open_short_side(-(-full_tokens // ps), -(-swa_tokens // ps))
            return self.can_reserve(full_tokens, swa_tokens)
        need = -(-full_tokens // ps) * ps
        if not self._id_capacity(need):
            return False
        if need <= self.available_size():
            return True
        if self._end_reclaim_satisfied(need):
            self._flush_ends()
            return need <= self.available_size()
        if self._float_high_target(need) is not None:
            self._flush_ends()
            if not self._id_capacity(need):
                return False
            if need <= self.available_size():
                return True
            target = self._float_high_target(need, flush_ends=False)
            if target is None:
                return False
            self.swa.make_room("high", target)
            return self._id_capacity(need) and need <= self.available_size()
        if self._byte_shortfall(need) > 0:
            return False
        self._flush_all()
        if need <= self.available_size():
            return True
        self._open_short_side(need // ps, need // ps)
        return need <= self.available_size()

    def _id_capacity(self, num_tokens: int) -> bool:
        pages, s = num_tokens // self.page_size, self.swa
        return pages <= len(self.free_virtual) and pages <= s.num_pages - s.min_page - s.live

    def _end_frontiers(self, num_tokens: int, flush_ends: bool) -> tuple[int, int, int]:
        """The full end's frontier before and after the allocation, the state end's after the
        ends' permitted flushes."""
        f, m = self.full, self.state

        def credit(pool: EndSubPool) -> int:
            drains = flush_ends and pool.lazy and not self.moves_blocked()
            return pool.num_holes() if drains else 0

        full_credit, state_credit = credit(f), credit(m)
        extension = max(0, num_tokens // self.page_size - (self._end_holes(f) - full_credit))
        before = self.full_low_byte() + full_credit * f.page_bytes
        after = before - extension * f.page_bytes
        return before, after, self.state_high_byte() - state_credit * m.page_bytes

    def _end_reclaim_satisfied(self, num_tokens: int) -> bool:
        if not self._id_capacity(num_tokens):
            return False
        if num_tokens <= self.available_size():
            return True
        f, s = self.full, self.swa
        _, full_after, state_after = self._end_frontiers(num_tokens, True)
        pages = num_tokens // self.page_size
        if full_after < f.min_page * f.page_bytes:
            return False
        band = _grid(s).pages_in_band
        if s.transparent:
            return bool(pages <= band(state_after, full_after))
        if full_after < s.band()[1]:
            return False
        extension = max(0, pages - s.num_holes())
        return bool(extension <= max(band(state_after, s.band()[0]),
                                     band(s.band()[1], full_after)))

    def _float_high_target(self, num_tokens: int, flush_ends: bool = True) -> int | None:
        """The bytes the float must open above it so that full's new pages and then the SWA
        pages fit, moving its top pages onto fresh pages below it; None when unknown."""
        if not self._id_capacity(num_tokens):
            return None
        f, s = self.full, self.swa
        if s.transparent or self.moves_blocked():
            return None
        before, after, state_after = self._end_frontiers(num_tokens, flush_ends)
        if after < f.min_page * f.page_bytes:
            return None
        pb = s.page_bytes
        low = max(-(-state_after // pb), s.min_page)
        high = min(before // pb, s.num_pages)
        limit = min(after // pb, s.num_pages) - num_tokens // self.page_size
        retreat = s.high - limit
        if retreat <= 0 or s.low - low < retreat:
            return None
        return int((high - limit) * pb)

    def _byte_shortfall(self, num_tokens: int, full_reclaim: int = 0, swa_reclaim: int = 0,
                        state_reclaim: int = 0) -> int:
        """Bytes a ``num_tokens`` allocation lacks even with every page packed (0: it may fit),
        after ``full_reclaim`` / ``swa_reclaim`` live tokens and ``state_reclaim`` live slots
        are released."""
        f, s, m, ps = self.full, self.swa, self.state, self.page_size
        live = sum(max(0, pool.live * width - back) * (pool.page_bytes // width)
                   for pool, width, back in ((f, ps, full_reclaim), (s, ps, swa_reclaim),
                                             (m, 1, state_reclaim)))
        sink = min(p.min_page * p.page_bytes for p in (f, s, m))
        need = num_tokens // self.page_size * (f.page_bytes + s.page_bytes)
        return int(max(0, need + live + sink - self.total_bytes))

    def _open_short_side(self, full_pages: int, swa_pages: int, state_pages: int = 0) -> None:
        """SGLang's float policy for a demand in pages per member: open the float's side that
        the ends' new pages fall short on (grow-down full above it, grow-up state below it)."""
        s = self.swa
        demand = [(p, n) for p, n in ((self.full, full_pages), (s, swa_pages),
                                      (self.state, state_pages)) if n > 0]
        if s.transparent or not demand:
            return
        for pool, pages in demand:
            used = pool.live if pool is s else pool.span_pages()
            if pages > pool.num_pages - pool.min_page - used:
                return
        sides = {"low": 0, "high": 0}
        for pool, pages in demand:
            if pool is not s:
                holes = self._end_holes(pool)
                side = "low" if pool.grows_up else "high"
                sides[side] += max(0, pages - holes) * pool.page_bytes
        low_byte, high_byte = s.band()
        band = {"low": max(0, low_byte - self.state_high_byte()),
                "high": max(0, self.full_low_byte() - high_byte)}
        surplus = {k: band[k] - sides[k] for k in ("low", "high")}
        f_bytes = max(0, swa_pages - s.num_holes()) * s.page_bytes
        slack = max(p.page_bytes for p, _ in demand)
        if surplus["low"] < 0 and surplus["high"] < 0:
            return
        if surplus["low"] < 0 or surplus["high"] < 0:
            short, far = ("low", "high") if surplus["low"] < 0 else ("high", "low")
            target = sides[short] + max(0, f_bytes - max(0, surplus[far])) + slack
            if target > band[short]:
                s.make_room(short, target)
            return
        if f_bytes > max(surplus.values()):
            short = "low" if surplus["low"] >= surplus["high"] else "high"
            s.make_room(short, sides[short] + f_bytes + slack)
