"""UMB-1, UMB-2, UMB-5, UMB-7, UMB-8: the full + Mamba model (``kvpool.spec.unified_mamba``) at
its bounds, worked by hand: a buffer too small for an end, a decode that opens no page with
every id live, state takes and admissions that need the full end's holes closed, the idle
flush under eager compaction, the census's sink and partition lines.

Geometry (page size 4): 4408 bytes, full tokens of 32 bytes (pages of 128), state slots of 176
bytes; the sink is ``max(4 * 32, 176) = 176`` bytes: state slots 1..24, full pages 2..33 (32
virtual ids).
"""

from __future__ import annotations

import pytest
from kvpool.spec.errors import ContractViolation
from kvpool.spec.unified_mamba import UnifiedMambaModel


def model(lazy: bool = False) -> UnifiedMambaModel:
    return UnifiedMambaModel(4408, 4, 32, 176, lazy=lazy)


def full_of_holes() -> UnifiedMambaModel:
    """Lazy: all 32 full pages taken (full's band reaches byte 256, 80 bytes above the sink,
    too few for a state slot), then freed as holes: the frontier stays at 256."""
    m = model(lazy=True)
    row = m.alloc(128)
    assert row is not None and m.full.band()[0] == 256
    m.free(row)
    assert len(m.full.holes) == 32 and m.full.band()[0] == 256
    assert m.state_available_size() == 0
    # closing the holes frees [176, 4352): 4176 bytes, 23 slots of 176
    assert m.state_schedulable_size() == 23
    return m


def test_a_buffer_with_no_slot_above_the_sink_is_refused_UMB_1() -> None:
    with pytest.raises(ContractViolation, match=r"UMB-1.*state"):
        # one 176-byte slot, the sink's (full: 9 pages of 32, three above the sink)
        UnifiedMambaModel(300, 1, 32, 176, lazy=False)
    with pytest.raises(ContractViolation, match=r"UMB-1.*full"):
        # a 32-byte sink (one full token); 50 bytes hold one full page, the sink's
        UnifiedMambaModel(50, 1, 32, 16, lazy=False)
    m = model()
    assert (m.total_bytes, m.floor_bytes) == (4408, 176)
    assert (m.state.min_page, m.state.pages, m.full.min_page, m.full.pages) == (1, 25, 2, 34)


def test_a_decode_that_opens_no_page_needs_no_free_id_UMB_2() -> None:
    m = model()
    row = m.alloc(128)  # every id live
    assert row is not None and m.free_virtual == []
    assert m.alloc_decode([2], [row[0]]) == [row[0] + 1]  # position 1 continues page 1's row
    assert m.alloc_decode([5], [row[3]]) is None  # position 4 would open a page


def test_a_state_take_closes_fulls_holes_when_short_UMB_5() -> None:
    m = full_of_holes()
    assert m.alloc_state(23) == list(range(1, 24))
    assert m.full.holes == [] and m.full.band()[0] == 4352
    m.check_invariants()
    m = full_of_holes()
    assert m.alloc_state(24) is None  # 24 slots need 4224 bytes
    assert m.full.holes == []  # the relief stays


def test_an_admission_within_the_schedulable_view_closes_fulls_holes_UMB_5() -> None:
    m = full_of_holes()
    m.prepare_mamba_allocation(5)
    assert m.full.holes == [] and m.state_available_size() == 23


def test_eager_compaction_moves_nothing_at_idle_time_UMB_7() -> None:
    m = model()
    row = m.alloc(8)
    assert row is not None
    m.free(row[:4])
    assert m.flush_opportunistic() == 0


def test_the_census_names_a_band_in_the_sink_and_broken_id_lists_UMB_8() -> None:
    m = model()
    assert m.alloc(8) is not None and m.alloc_state(2) == [1, 2]
    assert m.census() == []
    m.full.watermark = -1  # full's band now starts at byte 0
    assert "[chain] UMB-1 a band reaches into the reserved sink" in m.census()
    m = model()
    m.state.min_page = 0  # the state end's band now starts at byte 0
    assert "[chain] UMB-1 a band reaches into the reserved sink" in m.census()
    m = model()
    m.free_virtual.pop()
    assert m.census() == ["[full] UMB-8 free ids and live ids do not partition the ids"]
    m = model()
    m.free_state_ids.pop()
    assert m.census() == ["[state] UMB-8 free ids and live ids do not partition the ids"]


def test_clear_closes_an_open_free_group_UMB_2() -> None:
    m = model()
    m.free_group_begin()
    m.clear()
    assert (m.group, m.group_pages) == (None, None)
    m.free_group_begin()  # not nested: the cleared model had none open
    m.free_group_end()


def test_empty_and_negative_takes_take_nothing_UMB_2_UMB_5() -> None:
    m = UnifiedMambaModel(4408, 1, 32, 176, lazy=False)  # page size 1: full pages 6..136
    ids, slots = list(m.free_virtual), list(m.free_state_ids)
    assert m.alloc(0) == [] and m.alloc_state(0) == [] and m.alloc_state(-1) == []
    assert (m.free_virtual, m.free_state_ids) == (ids, slots) and m.full.v2p == {}


def test_a_state_take_within_its_view_leaves_fulls_holes_UMB_5() -> None:
    m = model(lazy=True)
    row = m.alloc(64)  # 16 full pages: full's band from byte 4352 - 2048 = 2304
    assert row is not None
    m.free(row[:4])  # one page, a hole
    assert m.state_available_size() == 12  # [176, 2304): 2128 bytes, 12 slots
    assert m.alloc_state(12) == list(range(1, 13))
    assert len(m.full.holes) == 1  # no relief was needed


def test_a_closed_move_gate_credits_no_byte_to_the_state_view_UMB_5() -> None:
    # page size 1, full tokens of 31 bytes (20 pages, from 6), state slots of 176 (3, from 1)
    m = UnifiedMambaModel(620, 1, 31, 176, lazy=True)
    assert m.alloc(3) is not None  # full's band from byte 17 * 31 = 527
    m.set_move_gate(False)
    # [176, 527): 351 bytes, one slot and 175 bytes over
    assert m.state_schedulable_size() == 1 == m.state_available_size()


def test_an_admission_relieves_only_between_the_two_views_UMB_5() -> None:
    m = model(lazy=True)
    row = m.alloc(64)
    assert row is not None
    m.free(row[:4])
    m.prepare_mamba_allocation(12)  # the available view (12) covers it
    assert len(m.full.holes) == 1
    m = full_of_holes()
    m.prepare_mamba_allocation(23)  # exactly the schedulable view
    assert m.full.holes == []


def test_the_idle_flush_counts_both_ends_moves_unless_the_gate_is_closed_UMB_7() -> None:
    m = model(lazy=True)
    assert m.alloc_state(5) == [1, 2, 3, 4, 5]
    m.free_state([2])
    m.set_move_gate(False)
    assert m.flush_opportunistic() == 0 and m.state.holes == [2]
    m.set_move_gate(True)
    assert m.flush_opportunistic() == 1  # slot 5 moves into hole 2; full has no hole
    assert m.state.v2p[5] == 2 and m.state.holes == [5]


def test_translate_reads_the_rows_of_fulls_pages_UMB_7() -> None:
    m = model()
    assert m.alloc(8) == list(range(8, 16))  # virtual pages 2 and 3
    assert m.full.v2p == {2: 32, 3: 33}  # the two pages below full's top, in order
    assert m.translate([8, 13]) == [32 * 4, 33 * 4 + 1]


def test_the_census_names_crossing_frontiers_not_touching_ones_UMB_8() -> None:
    m = model()
    assert m.alloc_state(7) is not None and m.alloc(92) is not None
    assert m.state.band()[1] == 1408 == m.full.band()[0]  # 8 slots of 176, 11 pages of 128
    assert m.census() == []
    m = model()
    assert m.alloc(8) is not None  # full's band from 4096
    m.state.watermark = 24  # the state end's band reaches 4224
    assert "[chain] UMB-8 state high frontier 4224 crosses full low 4096" in m.census()


def test_full_may_reach_the_sinks_edge_UMB_1_UMB_8() -> None:
    # page size 1, full tokens of 32 bytes, state slots of 64: the sink is 64 bytes, full's
    # first page is 2 (byte 64); 18 pages fill [64, 640) with the state end empty
    m = UnifiedMambaModel(640, 1, 32, 64, lazy=False)
    assert m.alloc(18) is not None and m.full.band()[0] == 64 == m.floor_bytes
    assert m.census() == []


def test_a_full_take_within_its_view_leaves_the_state_ends_holes_UMB_5() -> None:
    m = model(lazy=True)
    assert m.alloc_state(3) == [1, 2, 3]
    m.free_state([2])  # a hole below the state end's frontier (byte 704)
    # without relief: [704, 4352), 28 pages of 128; with it (the hole's 176 bytes) 29
    assert m.full_now_tokens() == 112 and m.available_size() == 116
    assert m.alloc(112) is not None
    assert m.state.holes == [2]  # exactly the view: no relief was needed
