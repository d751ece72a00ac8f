"""The hybrid model's caller rules and its segment and merge paths, one case per way a call can
go wrong or take a rarely reached branch: every refused call names its clause and leaves both
pools and the mapping unchanged (``ERR-1``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kvpool.spec import ContractViolation, HybridModel
from kvpool.spec.rules import OWNED


def with_row(num_tokens: int = 8, ps: int = 4, **kw: bool) -> tuple[HybridModel, list[int]]:
    """64 full slots, 32 SWA slots; one row of ``num_tokens`` positions from an empty prefix."""
    h = HybridModel(64, 32, ps, **kw)
    row = h.alloc(num_tokens) if ps == 1 else h.alloc_extend([0], [num_tokens], [-1])
    assert row is not None
    return h, row


FREES: dict[str, Callable[[HybridModel, list[int]], None]] = {
    "free_swa": lambda h, idx: h.free_swa(idx),
    "free_full": lambda h, idx: h.free_full(idx),
    "free": lambda h, idx: h.free(idx),
    "free_swa_segment": lambda h, idx: h.free_swa_segment(idx, start_pos=0),
    "free_full_segment": lambda h, idx: h.free_full_segment(idx, start_pos=0),
    "free_segment": lambda h, idx: h.free_segment(idx, start_pos=0),
}


@pytest.mark.parametrize("call", list(FREES))
@pytest.mark.parametrize(("slot", "clause"), [
    (0, "FREE-2"),          # the padding page (its SWA peer reads as released)
    (4.0, "FREE-1"),        # equal to the mapped slot 4, but not an int
    (10_000, "FREE-1"),     # outside the full pool
])
def test_frees_refuse_bad_slots_unchanged_FREE_1_FREE_2(call: str, slot: Any, clause: str) -> None:
    h, _ = with_row()
    before = h.snapshot()
    with pytest.raises(ContractViolation) as err:
        FREES[call](h, [slot])
    assert err.value.clause == clause
    assert h.snapshot() == before


@pytest.mark.parametrize("start_pos", [None, 0.0])
def test_swa_segment_start_must_be_a_count_SEG_1(start_pos: Any) -> None:
    h, row = with_row()
    before = h.snapshot()
    with pytest.raises(ContractViolation, match="SEG-1"):
        h.free_swa_segment(row[:4], start_pos=start_pos)
    assert h.snapshot() == before


def test_segments_out_of_order_are_refused_SEG_4() -> None:
    h, row = with_row()
    before = h.snapshot()
    with pytest.raises(ContractViolation, match="SEG-4"):
        h.free_segments([(row[4:], 4), (row[:4], 0)])
    assert h.snapshot() == before


def test_free_names_a_slot_twice_at_page_size_1_SWA_11() -> None:
    h, row = with_row(4, ps=1)
    before = h.snapshot()
    with pytest.raises(ContractViolation, match="SWA-11"):
        h.free([row[0], row[0]])
    assert h.snapshot() == before


def test_translate_refuses_a_bad_index_after_minus_one_SWA_16() -> None:
    h, row = with_row()
    for indices in ([-1, 0], [row[0], 0], [-1, 10_000]):
        with pytest.raises(ContractViolation, match="SWA-16"):
            h.translate_loc_from_full_to_swa(indices)


def test_decode_after_a_partial_page_whose_swa_peer_is_released_SWA_8() -> None:
    h, row = with_row(6)
    h.free_swa(row)
    before = h.snapshot()
    with pytest.raises(ContractViolation, match="SWA-8"):
        h.alloc_decode([7], [row[5]])
    assert h.snapshot() == before


def test_extend_without_new_tokens_reads_no_swa_peer_SWA_8() -> None:
    h, row = with_row(6)
    h.free_swa(row)
    assert h.alloc_extend([6], [6], [row[5]]) == []


@pytest.mark.parametrize("size", [None, -1, 1.5])
def test_alloc_refuses_a_bad_size_ALLOC_2(size: Any) -> None:
    h = HybridModel(8, 4)
    with pytest.raises(ContractViolation, match="ALLOC-2"):
        h.alloc(size)
    assert h.alloc(3) == [1, 2, 3]                            # page size 1 by default


def test_extend_counts_the_staged_pages_of_each_side_SORT_2_SWA_7() -> None:
    """The SWA free list is empty but one page is staged: the extend merges and succeeds."""
    h, row = with_row(32, need_sort=True)                    # every SWA page held
    h.free(row[:4])                                           # its pages staged on both sides
    got = h.alloc_extend([0], [4], [-1])
    assert got is not None and h.translate_loc_from_full_to_swa(got[:1]) == [4]


@pytest.mark.parametrize(("prefix", "seq"), [(0, 4), (16, 20)])
def test_swa_side_merges_only_above_its_bound_SORT_2(prefix: int, seq: int) -> None:
    """Bound 4 // 4 + 1 + 1 = 3 (new tokens only) equals the SWA free list (pages 6..8): no
    merge, so the staged page 5 stays staged and the SWA side takes page 6."""
    h, a = with_row(16, need_sort=True)                      # SWA pages 1..4
    b = h.alloc_extend([0], [4], [-1])                        # SWA page 5
    assert b is not None
    h.free(b)
    got = h.alloc_extend([prefix], [seq], [a[-1] if prefix else -1])
    assert got is not None
    assert [s // 4 for s in h.translate_loc_from_full_to_swa(got)] == [6] * 4
    assert h.swa.staged == [5]


def test_segments_free_both_sides_FREE_SEG_2_SWA_14() -> None:
    h, row = with_row(12)
    h.free_segments([([], 0), (row[:5], 0), (row[5:], 5)])    # empty; page 2 shared
    assert (h.mapping, h.full_available_size(), h.swa_available_size()) == ({}, 64, 32)
    h.check_invariants()
    h, row = with_row(12)
    h.free_segments([(row[:6], 0), (row[6:8], 6), (row[8:], 8)])  # the middle one trimmed away
    assert (h.mapping, h.full_available_size(), h.swa_available_size()) == ({}, 64, 32)
    h.check_invariants()


def test_full_segments_free_the_full_side_SWA_12() -> None:
    h, row = with_row()
    h.free_swa(row)
    h.free_full_segment(row[:4], start_pos=0)
    h.free_full_segments([(row[4:], 4)])
    assert (h.full_available_size(), h.swa_available_size()) == (64, 32)
    h.check_invariants()


@pytest.mark.parametrize("side", ["full", "swa"])
def test_check_invariants_checks_each_pool_MODEL_3(side: str) -> None:
    h, _ = with_row()
    pool = h.full if side == "full" else h.swa
    pool._status[pool.free_pages[0]] = OWNED             # a free page that says it is held
    with pytest.raises(AssertionError, match="MODEL-3"):
        h.check_invariants()


def test_debug_print_names_need_sort() -> None:
    assert "need_sort=True" in HybridModel(16, 8, 4, need_sort=True).debug_print()
