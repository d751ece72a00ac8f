"""UNI-2, UNI-8, UNI-9, UNI-13: the full + SWA model (``kvpool.spec.unified``) at its bounds,
worked by hand: the default static caps, views on sides of unequal page bytes, the eviction fit
at the virtual-id bound and with or without compaction, empty requests, the decode node's SWA
tail, and the census's sink clause."""

from __future__ import annotations

import pytest
from kvpool.spec import ContractViolation
from kvpool.spec.contract import Divergence
from kvpool.spec.unified import UnifiedSWAModel, fresh_rows_read_zero


def ids_all_live() -> UnifiedSWAModel:
    """640 bytes, page size 1, 32-byte entries on both sides: the sink is 32 bytes, each side
    has pages 1..19, so 19 virtual ids. Nineteen one-token requests of a decode node, none
    with an SWA page (``swa_tail_len`` 0): full holds every id (band [32, 640)), SWA is
    empty."""
    u = UnifiedSWAModel(640, 1, 32, 32, lazy=False)
    for _ in range(19):
        assert u.alloc_extend_swa_tail(0, 1, -1, 0) is not None
    return u


def test_the_default_caps_are_each_sides_pages_above_the_sink_UNI_9() -> None:
    # page size 2: full pages of 2 * 16 = 32 bytes, SWA pages of 16; sink max(2 * 16, 0) = 32
    # bytes; full has 20 pages from 1, SWA 40 from 2
    u = UnifiedSWAModel(640, 2, 16, 8, lazy=False)
    assert (u.total_bytes, u.floor_bytes) == (640, 32)
    assert (u.full_max_tokens, u.swa_max_tokens) == (19 * 2, 38 * 2)
    # the gap [32, 640): 608 bytes, 19 full pages or 38 SWA pages, each side's whole room
    assert u.schedulable_available_size("full") == 38 == u.full_available_size()
    assert u.schedulable_available_size("swa") == 76 == u.swa_available_size()


def test_static_caps_count_live_tokens_not_pages_UNI_9() -> None:
    u = UnifiedSWAModel(640, 2, 16, 8, lazy=False, full_max_tokens=10, swa_max_tokens=12)
    assert u.alloc(4) is not None  # two pages a side, four tokens
    # gap [64, 576): 16 full pages, 32 SWA pages: the caps' remainders 10 - 4 and 12 - 4 bind
    assert u.schedulable_available_size("full") == 32 and u.full_available_size() == 6
    assert u.schedulable_available_size("swa") == 64 and u.swa_available_size() == 8


def test_a_closed_move_gate_credits_no_byte_UNI_9() -> None:
    # 30 bytes, page size 1: full pages of 3 bytes (10, from 1), SWA pages of 2 (15, from 2)
    u = UnifiedSWAModel(30, 1, 3, 2, lazy=True)
    assert u.alloc(1) is not None  # SWA band [4, 6), full band [27, 30): a 21-byte gap
    u.moves_blocked = True
    assert u.schedulable_available_size("swa") == 10  # not 11: 21 bytes hold 10 pages of 2
    assert u.schedulable_available_size("full") == 7


def test_nothing_fits_beyond_the_virtual_ids_but_nothing_always_fits_UNI_8() -> None:
    u = ids_all_live()
    assert u.free_virtual == [] and u.gap_bytes() == 0
    assert u.census() == []  # full's band reaches the sink's edge (byte 32), not into it
    assert u.fits(0, compacted=False) and u.fits(0, compacted=True)
    assert not u.fits(1, compacted=True)
    assert u.fits_after_reclaim(0, 0, 0) and u.fits_after_reclaim(0, 0, 0, compacted=False)
    assert not u.fits_after_reclaim(1, 0, 0)
    # one reclaimed full page frees 32 bytes; a page needs 32 on each side: two are needed
    assert not u.fits_after_reclaim(1, 1, 0) and u.fits_after_reclaim(1, 2, 0)
    # without compaction the two reclaimed pages are full's holes: SWA has no byte
    assert not u.fits_after_reclaim(1, 2, 0, compacted=False)
    assert u.reclaim_plan(1, 19, 0) == (2, 0)


def test_reclaimed_full_pages_leave_the_live_swa_pages_their_ids_UNI_8() -> None:
    # 640 bytes, page size 1: full pages of 64 bytes (10, from 1: 9 ids), SWA pages of 8
    # (80, from 8); eight pages a side fill the gap [64, 576 + 64)
    u = UnifiedSWAModel(640, 1, 64, 8, lazy=False)
    assert u.alloc(8) is not None and u.available_size() == 0
    # all 8 full pages reclaimed, no SWA page: 8 SWA pages stay live, so only 1 more id
    assert u.fits_after_reclaim(1, 8, 0) and not u.fits_after_reclaim(2, 8, 0)


def test_pages_released_without_compaction_serve_only_their_side_UNI_8() -> None:
    # 640 bytes, page size 1, lazy: full pages of 32 bytes (19 ids), SWA pages of 8 (from 4)
    u = UnifiedSWAModel(640, 1, 32, 8, lazy=True)
    row = u.alloc(5)  # full pages 15..19 (band [480, 640)), SWA pages 4..8 ([32, 72))
    assert row is not None
    # five full pages back as holes: n - 5 new pages a side, 40 bytes each, in the 408-byte gap
    u_slid = UnifiedSWAModel(640, 1, 32, 8, lazy=True)
    slid = u_slid.alloc(5)
    assert slid is not None
    u_slid.free_swa(slid)  # SWA's five pages become holes
    assert u_slid.fits_after_reclaim(15, 5, 0, compacted=False)
    assert not u_slid.fits_after_reclaim(16, 5, 0, compacted=False)
    # five SWA pages back as holes: n full pages (32 bytes) and n - 5 SWA pages (8) in 408
    assert u.fits_after_reclaim(11, 0, 5, compacted=False)
    assert not u.fits_after_reclaim(12, 0, 5, compacted=False)


def test_an_empty_allocation_takes_nothing_and_a_negative_one_is_refused_UNI_8() -> None:
    u = UnifiedSWAModel(640, 4, 8, 8, lazy=False)
    before = list(u.free_virtual)
    assert u.alloc(0) == [] and u.free_virtual == before
    with pytest.raises(ContractViolation, match="UNI-8"):
        u.alloc(-4)


def test_the_swa_tail_is_counted_from_the_new_tokens_UNI_8() -> None:
    # page size 4, 32-byte entries: pages of 128 bytes; ids 1..19
    u = UnifiedSWAModel(2560, 4, 32, 32, lazy=False)
    assert u.alloc(8) == list(range(4, 12))  # virtual pages 1 and 2
    with pytest.raises(ContractViolation, match="UNI-8"):
        u.alloc_extend_swa_tail(5, 7, 8, 3)  # only 2 new tokens
    # five tokens held (position 4 is id 8 on page 2): 5..7 continue it, 8..9 open page 3
    assert u.alloc_extend_swa_tail(5, 10, 8, 2) == [9, 10, 11, 12, 13]
    assert 3 in u.swa.v2p and u.free_virtual == list(range(4, 20))  # one page taken


def test_the_census_names_a_band_in_the_sink_UNI_2_UNI_13() -> None:
    u = UnifiedSWAModel(640, 1, 32, 32, lazy=False)
    assert u.alloc(2) is not None
    u.check_invariants()
    u.swa.min_page = 0  # SWA's band now starts at byte 0, inside the 32-byte sink
    assert any("UNI-2" in p for p in u.census())
    with pytest.raises(AssertionError, match="UNI-2"):
        u.check_invariants()
    v = UnifiedSWAModel(640, 1, 32, 32, lazy=False)
    assert v.alloc(2) is not None
    v.full.watermark = -1  # full's band now starts at byte 0
    assert any("UNI-2" in p for p in v.census())


def test_the_census_names_the_crossing_frontiers_UNI_3_UNI_13() -> None:
    u = UnifiedSWAModel(640, 1, 32, 32, lazy=False)
    assert u.alloc(9) is not None  # SWA band [32, 320), full band [352, 640)
    u.swa.watermark = 12  # SWA's band [32, 384) overlaps full's
    assert "[chain] UNI-3 swa high frontier 384 crosses full low 352" in u.census()
    # with full empty (its band [640, 640)) SWA's frontier past the top crosses it too
    v = UnifiedSWAModel(640, 1, 32, 32, lazy=False)
    v.swa.watermark = 21
    assert "[chain] UNI-3 swa high frontier 672 crosses full low 640" in v.census()


def test_fresh_rows_need_one_dirty_flag_a_slot_DATA_4() -> None:
    fresh_rows_read_zero([4, 5], [False, False], "full")
    with pytest.raises(Divergence, match="DATA-4"):
        fresh_rows_read_zero([4, 5], [False, True], "swa")
    with pytest.raises(ValueError):
        fresh_rows_read_zero([4, 5], [False], "full")  # a slot without its flag
