"""UNI-14, UNI-16: the tri-pool's capacity views (``kvpool.spec.unified_float``) worked by hand on
small float chains, each at the boundary where one more page stops fitting.

The geometry (page size 2): one 1280-byte buffer; a state slot is 96 bytes, an SWA page 32, a
full page 64; the sink is ``max(2 * 32, 96) = 96`` bytes, so the first allocatable page is
state slot 1, SWA page 3 and full page 2 (``UNI-2``). A chain is written as the state end's
slots above the sink, the float's span ``[low, high)`` with its holes, and full's span pages.
Every expected value below is derived in the comment above it from those frontiers.
"""

from __future__ import annotations

import pytest
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

PS = 2
STATE, SWA, FULL = Grid(96, 13, 1), Grid(32, 40, 3), Grid(64, 20, 2)


def chain(*, state_slots: int = 0, state_holes: int = 0, state_drains: bool = False,
          swa: tuple[int, int, int] = (40, 40, 0), full_pages: int = 0, full_holes: int = 0,
          full_drains: bool = False, static: tuple[int, int] = (80, 80)) -> FloatChain:
    """A chain of the module's geometry: ``state_slots`` slots above the sink (``state_holes``
    of them holes), the float's ``(low, high, holes)``, ``full_pages`` full pages below the top
    (``full_holes`` of them holes); the default float is empty, parked at the grid's top."""
    low, high, swa_holes = swa
    return FloatChain(
        page_size=PS, state=STATE, swa=SWA, full=FULL,
        state_high_byte=(STATE.min_page + state_slots) * STATE.page_bytes,
        state_holes=state_holes, state_drains=state_drains, swa_low_page=low,
        swa_high_page=high, swa_holes=swa_holes,
        full_low_byte=(FULL.num_pages - full_pages) * FULL.page_bytes,
        full_span_pages=full_pages, full_holes=full_holes, full_drains=full_drains,
        full_static_tokens=static[0], swa_static_tokens=static[1],
        full_live_tokens=(full_pages - full_holes) * PS,
        swa_live_tokens=(high - low - swa_holes) * PS)


# An opaque float in the middle, no holes: state end at byte 288 (SWA page 9), float [12, 16)
# (bytes [384, 512)), full from byte 960 (SWA page 30, full page 15) up.
MIDDLE = chain(state_slots=2, swa=(12, 16, 0), full_pages=5)
# The float squeezed: the state end reaches its low byte 384, full its high byte 512.
SQUEEZED = chain(state_slots=3, swa=(12, 16, 0), full_pages=12)
# An opaque float high up: state end at byte 192 (SWA page 6), float [20, 24), full from 896.
HIGH = chain(state_slots=1, state_holes=1, state_drains=True, swa=(20, 24, 0), full_pages=6)
# An empty float: state end at 384 (two of its three slots holes, drainable), full from 640.
EMPTY_DRAINS = chain(state_slots=3, state_holes=2, state_drains=True, full_pages=10)
# An empty float, state end at the sink (byte 96 = full page 1.5, so full's gap reaches its
# first page 2 exactly), full's five pages from 960 with two drainable holes.
EMPTY_FULL_HOLES = chain(full_pages=5, full_holes=2, full_drains=True)
# An empty float parked at [10, 12) with both pages holes; state end at the sink, full empty.
EMPTY_PARKED = chain(swa=(10, 12, 2))
# An empty float, state end at 288 (SWA page 9), full from 640 (SWA page 20).
EMPTY_NARROW = chain(state_slots=2, full_pages=10)


def test_snapshots_are_immutable_values() -> None:
    with pytest.raises(AttributeError):
        STATE.num_pages = 14  # type: ignore[misc]
    with pytest.raises(AttributeError):
        MIDDLE.swa_holes = 1  # type: ignore[misc]
    assert len({MIDDLE, chain(state_slots=2, swa=(12, 16, 0), full_pages=5), SQUEEZED}) == 2


def test_the_float_is_transparent_exactly_when_it_holds_no_live_page() -> None:
    assert EMPTY_PARKED.swa_live_pages == 0 and EMPTY_PARKED.transparent
    assert chain().transparent  # parked at [40, 40)
    assert MIDDLE.swa_live_pages == 4 and not MIDDLE.transparent
    assert chain(swa=(10, 13, 2)).swa_live_pages == 1
    # full grows down to the float's top byte, or through an empty float to the state end's
    assert MIDDLE.below_full_byte() == 16 * 32
    assert EMPTY_NARROW.below_full_byte() == 3 * 96


def test_full_fills_its_gap_down_to_the_floats_top_and_no_further_UNI_14() -> None:
    # gap 960 - 512 = 448 bytes: exactly 7 full pages
    assert fits_on_chain(MIDDLE, 1, 0) and fits_on_chain(MIDDLE, 7, 0)
    assert not fits_on_chain(MIDDLE, 8, 0)
    assert not fits_on_chain(MIDDLE, 100, 0) and not fits_on_chain(MIDDLE, 0, 100)
    # the full end's 12 pages reach the float's top: nothing fits, nothing needed does
    assert fits_on_chain(SQUEEZED, 0, 0)
    assert not fits_on_chain(SQUEEZED, 1, 0) and not fits_on_chain(SQUEEZED, 0, 1)


def test_swa_takes_one_band_below_or_above_its_span_after_fulls_pages_UNI_14() -> None:
    # below [288, 384): SWA pages 9..11 (3); above [512, 960 - 64 F): pages 16..29-2F
    assert fits_on_chain(MIDDLE, 0, 14) and not fits_on_chain(MIDDLE, 0, 15)
    assert fits_on_chain(MIDDLE, 1, 12) and not fits_on_chain(MIDDLE, 1, 13)
    # with 6 full pages the band above holds 2, the band below still 3 (not 2 + 3)
    assert fits_on_chain(MIDDLE, 6, 3) and not fits_on_chain(MIDDLE, 6, 4)
    # float high up: below [192, 640) is pages 6..19 (14), above [768, 896) 4 at most
    assert fits_on_chain(HIGH, 2, 14) and not fits_on_chain(HIGH, 2, 15)
    assert not fits_on_chain(HIGH, 3, 0)  # full's gap 896 - 768 = 128 bytes: 2 pages


def test_an_empty_float_takes_the_band_between_the_state_end_and_full_UNI_14() -> None:
    # gap 640 - 384 = 256 bytes (4 full pages); SWA band [384, 640 - 64 F): 8 - 2F pages
    assert fits_on_chain(EMPTY_DRAINS, 4, 0) and not fits_on_chain(EMPTY_DRAINS, 5, 0)
    assert fits_on_chain(EMPTY_DRAINS, 2, 4) and not fits_on_chain(EMPTY_DRAINS, 2, 5)
    assert fits_on_chain(EMPTY_DRAINS, 3, 2) and not fits_on_chain(EMPTY_DRAINS, 3, 3)


def test_holes_are_taken_first_and_the_index_space_is_reached_exactly_UNI_14() -> None:
    # full: 2 holes, then 13 pages down from 960 to 128 (>= 96, the state end); 15 is also the
    # index space 20 - 2 - 5 + 2; a 16th page would need byte 64
    assert fits_on_chain(EMPTY_FULL_HOLES, 15, 0) and not fits_on_chain(EMPTY_FULL_HOLES, 16, 0)
    # SWA: 2 holes, then the whole band [96, 1280): 37 pages (its index space 40 - 3)
    assert fits_on_chain(EMPTY_PARKED, 0, 39) and not fits_on_chain(EMPTY_PARKED, 0, 40)
    # an opaque float's holes: [12, 16) with 2 holes; 2 + 14 above, as in MIDDLE
    holed = chain(state_slots=2, swa=(12, 16, 2), full_pages=5)
    assert fits_on_chain(holed, 0, 16) and not fits_on_chain(holed, 0, 17)
    # 7 full pages close the band above: its 2 holes and the 3 pages below remain
    assert fits_on_chain(holed, 7, 5) and not fits_on_chain(holed, 7, 6)


@pytest.mark.parametrize(("c", "pages"), [
    (MIDDLE, 4),  # n = 4: above 14 - 8 = 6 >= 4; n = 5: max(3, 4) < 5
    (SQUEEZED, 0),
    (HIGH, 2),  # full's gap: 2 pages; the band below holds 14
    (EMPTY_DRAINS, 2),  # n <= 8 - 2n
    (EMPTY_FULL_HOLES, 10),  # n - 2 full pages down from 960: SWA band 3..(34 - 2n): n <= 31 - 2n
    (EMPTY_NARROW, 3),  # band [288, 640 - 64 n): pages 9..(20 - 2n), n <= 11 - 2n
])
def test_available_size_is_the_most_pages_both_sides_take_at_once_UNI_14(c: FloatChain,
                                                                          pages: int) -> None:
    assert joint_available_tokens(c) == pages * PS
    assert fits_on_chain(c, pages, pages) and not fits_on_chain(c, pages + 1, pages + 1)


@pytest.mark.parametrize(("c", "pages"), [
    (MIDDLE, 7),  # 448 bytes above the float
    (SQUEEZED, 0),
    (HIGH, 2),  # the state end's drainable hole is behind the float: not credited
    (EMPTY_DRAINS, 7),  # 256 bytes + the state end's 2 holes (192 bytes) = 448
    (EMPTY_FULL_HOLES, 15),  # 864 bytes: 13 pages, plus full's 2 holes
    (EMPTY_NARROW, 5),  # 352 bytes
])
def test_schedulable_full_is_its_gap_plus_drainable_holes_UNI_14(c: FloatChain,
                                                                 pages: int) -> None:
    assert schedulable_full_tokens(c) == pages * PS


@pytest.mark.parametrize(("c", "pages"), [
    (MIDDLE, 14),  # below 12 - 9 = 3, above 30 - 16 = 14
    (SQUEEZED, 0),
    (HIGH, 17),  # below 20 - 6 = 14, plus the state end's hole (96 bytes: 3 SWA pages)
    (EMPTY_DRAINS, 14),  # [12, 20): 8 pages, plus the state end's 2 holes (6 SWA pages)
    (EMPTY_FULL_HOLES, 31),  # [3, 30): 27 pages, plus full's 2 holes (4 SWA pages)
    (EMPTY_PARKED, 39),  # [3, 40): 37 pages, plus its own 2 holes
    (EMPTY_NARROW, 11),
])
def test_schedulable_swa_is_its_larger_free_side_plus_drainable_holes_UNI_14(
        c: FloatChain, pages: int) -> None:
    assert schedulable_swa_tokens(c) == pages * PS


def test_an_empty_float_between_touching_ends_schedules_nothing_UNI_14() -> None:
    touching = chain(state_slots=3, full_pages=14)  # both frontiers at byte 384
    assert schedulable_swa_tokens(touching) == 0 and schedulable_full_tokens(touching) == 0
    assert joint_available_tokens(touching) == 0 and state_available_slots(touching) == 0


@pytest.mark.parametrize(("c", "slots"), [
    (MIDDLE, 1),  # [288, 384): one 96-byte slot
    (SQUEEZED, 0),
    (HIGH, 5),  # [192, 640): 4 slots, plus its hole
    (EMPTY_DRAINS, 4),  # up to full's 640: 2 slots, plus 2 holes
    (EMPTY_PARKED, 12),  # [96, 1280): 12 slots, the whole index space 13 - 1
    (EMPTY_NARROW, 3),  # [288, 640): 3 slots
])
def test_state_slots_are_the_gap_up_to_the_next_opaque_member_UNI_16(c: FloatChain,
                                                                     slots: int) -> None:
    assert state_available_slots(c) == slots


def test_the_static_caps_bound_the_per_side_views_UNI_9() -> None:
    # MIDDLE holds 10 full tokens and 8 SWA tokens; caps 20 and 30 leave 10 and 22
    capped = MIDDLE._replace(full_static_tokens=20, swa_static_tokens=30)
    views = capacity_views(capped)
    assert views == {"available_size": 8, "schedulable_full_available_size": 14,
                     "schedulable_swa_available_size": 28, "full_available_size": 10,
                     "swa_available_size": 22}
    loose = capacity_views(MIDDLE)  # caps 80: the schedulable views bind
    assert (loose["full_available_size"], loose["swa_available_size"]) == (14, 28)


def tiny(state_high_byte: int, full_low_byte: int) -> FloatChain:
    """A chain on byte sizes that do not divide one another (page size 1): a state slot and a
    full page of 1 byte, an SWA page of 2; a 24-byte buffer whose sink is ``max(1 * 2, 1) = 2``
    bytes. The float is empty, no holes anywhere."""
    return FloatChain(
        page_size=1, state=Grid(1, 24, 2), swa=Grid(2, 12, 1), full=Grid(1, 24, 2),
        state_high_byte=state_high_byte, state_holes=0, state_drains=False, swa_low_page=12,
        swa_high_page=12, swa_holes=0, full_low_byte=full_low_byte,
        full_span_pages=24 - full_low_byte, full_holes=0, full_drains=False,
        full_static_tokens=24, swa_static_tokens=24, full_live_tokens=24 - full_low_byte,
        swa_live_tokens=0)


def test_touching_ends_on_one_byte_pages_leave_no_room_UNI_14_UNI_16() -> None:
    # the state end's 8 slots and full's 14 pages meet at byte 10
    c = tiny(10, 10)
    assert not fits_on_chain(c, 1, 0) and fits_on_chain(c, 0, 0)
    assert schedulable_full_tokens(c) == 0 and state_available_slots(c) == 0
    # one byte apart: one full page or one state slot, no SWA page (2 bytes)
    c = tiny(10, 11)
    assert fits_on_chain(c, 1, 0) and not fits_on_chain(c, 2, 0)
    assert not fits_on_chain(c, 0, 1) and schedulable_swa_tokens(c) == 0
    assert schedulable_full_tokens(c) == 1 and state_available_slots(c) == 1


def test_drainable_state_holes_count_only_within_the_floats_index_space_UNI_14() -> None:
    # A 144-byte buffer (page size 1): state slots of 48 bytes, SWA pages of 32, full pages of
    # 16; the sink is max(32, 48) = 48 bytes, so state slot 1, SWA page 2 and full page 3 come
    # first. The state end's slots 1 and 2 are both drainable holes and reach the top (144),
    # where full, empty, begins; the float is empty.
    c = FloatChain(
        page_size=1, state=Grid(48, 3, 1), swa=Grid(32, 4, 2), full=Grid(16, 9, 3),
        state_high_byte=144, state_holes=2, state_drains=True, swa_low_page=4, swa_high_page=4,
        swa_holes=0, full_low_byte=144, full_span_pages=0, full_holes=0, full_drains=False,
        full_static_tokens=6, swa_static_tokens=2, full_live_tokens=0, swa_live_tokens=0)
    # drained, the state end frees [48, 144): 96 bytes, 3 SWA pages' worth, but SWA page 1
    # reaches into the sink: only pages 2 and 3 exist above it
    assert schedulable_swa_tokens(c) == 2
    # full: 96 bytes are 6 pages, exactly its pages 3..8
    assert schedulable_full_tokens(c) == 6
    # nothing fits without moving a page; the state end's 2 holes are its only slots
    assert joint_available_tokens(c) == 0 and state_available_slots(c) == 2


def test_the_schedulable_state_view_credits_fulls_drainable_holes_through_an_empty_float_UNI_16(
        ) -> None:
    # state end at the sink (byte 96), full from 960: 864 bytes = 9 slots of 96 now; an urgent
    # flush of full's two holes adds 128 bytes: 992 bytes = 10 slots
    assert state_available_slots(EMPTY_FULL_HOLES) == 9
    assert state_schedulable_slots(EMPTY_FULL_HOLES) == 10
    # holes that do not drain (eager, or a closed move gate) earn no credit
    assert state_schedulable_slots(EMPTY_FULL_HOLES._replace(full_drains=False)) == 9
    # an opaque float in between: a float never drains on a flush, so nothing is credited
    high = HIGH._replace(full_holes=2, full_drains=True)
    assert state_schedulable_slots(high) == state_available_slots(high) == 5
