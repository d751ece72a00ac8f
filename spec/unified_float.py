"""Capacity of a three-member unified chain: a grow-up state end, a float middle, a grow-down end.

SGLang 0.5.23's tri-pool (``UnifiedMambaSWATokenToKVPoolAllocator``) lays one byte buffer out as
``[ mamba state (grow-up end) | SWA (float middle) | full (grow-down end) ]`` (``UNI-14``). The
ends behave as in the two-member chain (``UNI-3``); the float middle holds a span of pages
``[low_page, high_page)`` on its own page grid with holes inside it (freed pages stay where they
are until reused or absorbed at the span's boundary). An empty float (no live page) is
*transparent*: its parked span occupies no bytes and its neighbours see through it. Where the
float's span sits is placement (the contract leaves it free, like lazy compaction's holes); the
capacity views are fixed functions of the chain's frontiers, which this module states.

Pure functions on ints and an immutable snapshot (:class:`FloatChain`, a named tuple: an
allocator builds one per capacity read, and a tuple builds in a fraction of a frozen dataclass's
time); no tensors.
"""

from __future__ import annotations

from typing import NamedTuple

from . import unified_layout as ul


class Grid(NamedTuple):
    """One chain member's page grid: ``page_bytes`` per page, pages ``[min_page, num_pages)``
    allocatable (the pages below ``min_page`` lie in the reserved sink, ``UNI-2``)."""

    page_bytes: int
    num_pages: int
    min_page: int

    def pages_in_band(self, low_byte: int, high_byte: int) -> int:
        """Whole pages of this grid inside ``[low_byte, high_byte)`` and inside the grid's
        allocatable pages (:func:`~kvpool.spec.unified_layout.band_pages`)."""
        return ul.band_pages(self.page_bytes, self.min_page, self.num_pages, low_byte,
                             high_byte)


class FloatChain(NamedTuple):
    """A snapshot of the three members' frontiers (``UNI-14``).

    Attributes:
        page_size: tokens a page of the full and SWA grids holds (the state end's pages hold one).
        state, swa, full: the members' grids.
        state_high_byte: the state end's frontier (just past its highest page, holes included).
        state_holes: pages the state end holds as holes (lazy compaction; 0 under eager).
        state_drains: an urgent flush of the state end releases its holes (lazy, no move gate).
        swa_low_page, swa_high_page: the float's span on its grid; ``swa_holes`` of its pages
            are holes, the rest live.
        full_low_byte: the full end's frontier (its lowest page's first byte, holes included).
        full_span_pages: pages between that frontier and the top (live + holes + pending).
        full_holes: the full end's drainable holes (lazy; 0 under eager); ``full_drains``: an
            urgent flush of it releases them.
        full_static_tokens, swa_static_tokens: the static per-side caps (``UNI-9``);
        full_live_tokens, swa_live_tokens: tokens live on each side.
    """

    page_size: int
    state: Grid
    swa: Grid
    full: Grid
    state_high_byte: int
    state_holes: int
    state_drains: bool
    swa_low_page: int
    swa_high_page: int
    swa_holes: int
    full_low_byte: int
    full_span_pages: int
    full_holes: int
    full_drains: bool
    full_static_tokens: int
    swa_static_tokens: int
    full_live_tokens: int
    swa_live_tokens: int

    @property
    def swa_live_pages(self) -> int:
        return self.swa_high_page - self.swa_low_page - self.swa_holes

    @property
    def transparent(self) -> bool:
        """The float holds no live page: neighbours see through it."""
        return self.swa_live_pages == 0

    def below_full_byte(self) -> int:
        """The frontier the full end grows down to: the float's top, or the state end's
        frontier through an empty float."""
        if self.transparent:
            return self.state_high_byte
        return self.swa_high_page * self.swa.page_bytes


def fits_on_chain(c: FloatChain, full_pages: int, swa_pages: int) -> bool:
    """Whether ``full_pages`` new full pages and ``swa_pages`` new SWA pages fit at once, full
    first (``UNI-14``; SGLang's ``can_reserve``):

    - full takes its drainable holes ``h_f`` first, then ``max(0, full_pages - h_f)`` new pages
      growing down into its gap (bytes down to :meth:`FloatChain.below_full_byte`);
    - SWA takes its holes ``h_s`` first, then ``max(0, swa_pages - h_s)`` new pages in ONE band:
      below its span (down to the state end's frontier) or above it (up to full's frontier
      *after* full's new pages); through an empty float, the band between the state end and
      full's new frontier;
    - neither side exceeds its page index space (``num_pages - min_page - live``).
    """
    fa, sa = c.full, c.swa
    r_f = fa.num_pages - fa.min_page - c.full_span_pages + c.full_holes
    r_s = sa.num_pages - sa.min_page - c.swa_live_pages
    if full_pages > r_f or swa_pages > c.swa_holes + r_s:
        return False
    full_bytes = max(0, full_pages - c.full_holes) * fa.page_bytes
    if full_bytes > max(0, c.full_low_byte - c.below_full_byte()):
        return False
    full_low_after = c.full_low_byte - full_bytes
    if c.transparent:
        room = sa.pages_in_band(c.state_high_byte, full_low_after)
    else:
        room = max(sa.pages_in_band(c.state_high_byte, c.swa_low_page * sa.page_bytes),
                   sa.pages_in_band(c.swa_high_page * sa.page_bytes, full_low_after))
    return max(0, swa_pages - c.swa_holes) <= room


def joint_available_tokens(c: FloatChain) -> int:
    """``available_size()``: the most tokens ``n`` (whole pages) such that ``n`` pages fit on
    both sides at once (:func:`fits_on_chain`, monotone in ``n``)."""
    lo, hi = 0, c.full.num_pages
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits_on_chain(c, mid, mid) else (lo, mid - 1)
    return lo * c.page_size


def schedulable_full_tokens(c: FloatChain) -> int:
    """``schedulable_full_available_size()``: full's new pages in its gap (plus the holes an
    urgent flush of the nearest opaque member below would release: the state end's, through an
    empty float; a float never drains) within its index space, plus its own holes."""
    fa = c.full
    extra = 0
    if c.transparent and c.state_drains:
        extra = c.state_holes * c.state.page_bytes
    gap = max(0, c.full_low_byte - c.below_full_byte()) + extra
    index_room = fa.num_pages - fa.min_page - c.full_span_pages
    return (min(gap // fa.page_bytes, index_room) + c.full_holes) * c.page_size


def schedulable_swa_tokens(c: FloatChain) -> int:
    """``schedulable_swa_available_size()``: the float's larger free side (below its span down
    to the state end, above it up to full; the whole region when empty), each side credited
    with its neighbour's drainable holes, within its index space, plus its own holes."""
    sa = c.swa
    lo = max(-(-c.state_high_byte // sa.page_bytes), sa.min_page)
    hi = min(c.full_low_byte // sa.page_bytes, sa.num_pages)
    if c.transparent:
        gap_low = gap_high = max(0, hi - lo)
    else:
        gap_low, gap_high = max(0, c.swa_low_page - lo), max(0, hi - c.swa_high_page)
    if c.state_drains:
        gap_low += c.state_holes * c.state.page_bytes // sa.page_bytes
    if c.full_drains:
        gap_high += c.full_holes * c.full.page_bytes // sa.page_bytes
    index_room = sa.num_pages - sa.min_page - c.swa_live_pages
    return (min(max(gap_low, gap_high), index_room) + c.swa_holes) * c.page_size


def state_available_slots(c: FloatChain) -> int:
    """The state end's available slots (``UNI-16``; SGLang's ``mamba_allocator.available_size()``):
    whole slots of its grid between its frontier and the member above it (the float's low
    frontier, or full's through an empty float), within its index space (its pages above the
    sink less its span), plus its drainable holes (lazy compaction; none under eager). Holes of
    the member above are not credited: a state take moves the float only when it is short."""
    m = c.state
    above = c.full_low_byte if c.transparent else c.swa_low_page * c.swa.page_bytes
    gap_slots = max(0, above - c.state_high_byte) // m.page_bytes
    span = c.state_high_byte // m.page_bytes - m.min_page
    return min(gap_slots, max(0, m.num_pages - m.min_page - span)) + c.state_holes


def state_schedulable_slots(c: FloatChain) -> int:
    """The state end's schedulable slots (``UNI-16``; SGLang's
    ``mamba_allocator.schedulable_available_size()``): :func:`state_available_slots` with the
    gap credited with the bytes an urgent flush of its growth-side neighbour releases. That
    neighbour is full through an empty float (its holes, when it drains: lazy, no move gate
    closed); a float never drains on a flush, so with one in between nothing is credited."""
    if not (c.transparent and c.full_drains):
        return state_available_slots(c)
    credit = c.full_holes * c.full.page_bytes
    return state_available_slots(c._replace(full_low_byte=c.full_low_byte + credit))


def capacity_views(c: FloatChain) -> dict[str, int]:
    """The tri-pool's capacity views by name (``UNI-14``): ``available_size`` (joint),
    ``schedulable_*`` (per side), ``full_available_size`` / ``swa_available_size`` (the
    schedulable view capped by the static cap's remainder, ``UNI-9``)."""
    full_sched, swa_sched = schedulable_full_tokens(c), schedulable_swa_tokens(c)
    return {
        "available_size": joint_available_tokens(c),
        "schedulable_full_available_size": full_sched,
        "schedulable_swa_available_size": swa_sched,
        "full_available_size": min(c.full_static_tokens - c.full_live_tokens, full_sched),
        "swa_available_size": min(c.swa_static_tokens - c.swa_live_tokens, swa_sched),
    }
