"""``PureSWAModel`` (SWA-21..25): SGLang 0.5.23's pure sliding-window allocator as the hybrid
model's variant -- one token pool as both sides, the identity mapping, one capacity view, the
SWA release as the only release; caller errors change nothing."""

from __future__ import annotations

import pytest
from kvpool.spec import ContractViolation, HybridResizeConfig
from kvpool.spec.hybrid_pure import PureSWAModel


def test_one_pool_serves_both_sides_SWA_21() -> None:
    m = PureSWAModel(8)
    assert m.full is m.swa and m.page_size == 1 and m.size == 8
    with pytest.raises(ContractViolation) as err:
        PureSWAModel(8, 4)
    assert err.value.clause == "SWA-21"
    for call in (lambda: m.alloc_extend([0], [4], [-1], 4), lambda: m.alloc_decode([2], [1]),
                 lambda: m.alloc_extend_swa_tail([0], [4], [-1], 4, 4)):
        with pytest.raises(NotImplementedError, match="SWA-21"):
            call()


def test_translation_is_the_identity_SWA_22() -> None:
    m = PureSWAModel(8)
    row = m.alloc(3)
    assert row is not None
    assert m.translate_loc_from_full_to_swa([*row, -1]) == [*row, -1]
    assert m.mapping_pairs() == {s: s for s in range(1, 9)}  # held or free
    m.free_swa(row[:1])
    before = m.snapshot()
    with pytest.raises(ContractViolation) as err:  # a free slot has nothing to translate
        m.translate_loc_from_full_to_swa(row[:1])
    assert err.value.clause == "SWA-16" and m.snapshot() == before


def test_the_three_views_are_one_number_SWA_23() -> None:
    m = PureSWAModel(6, need_sort=True)
    assert m.alloc(4) == [1, 2, 3, 4]
    views = (m.available_size(), m.full_available_size(), m.swa_available_size())
    assert views == (2, 2, 2)
    before = m.snapshot()
    assert m.alloc(3) is None and m.snapshot() == before


def test_a_slide_releases_the_slot_and_free_full_nothing_SWA_24() -> None:
    m = PureSWAModel(4)
    row = m.alloc(3)
    assert row == [1, 2, 3]
    m.free_swa_segment(row[:2], start_pos=0)  # the window slid past two tokens
    assert m.full.get_all_free_pages() == [4, 1, 2] and m.available_size() == 3
    again = m.alloc(3)  # another request takes the slid-out slots
    assert again == [4, 1, 2]
    m.free_full(row[:2])  # the finishing request's head: nothing left to release
    assert m.available_size() == 0
    before = m.snapshot()
    for call in (m.free, m.free_swa):
        with pytest.raises(ContractViolation) as err:  # named twice: a double release
            call([3, 3])
        assert err.value.clause == "SWA-11" and m.snapshot() == before
    m.free_group_begin()
    m.free(row[2:])
    with pytest.raises(ContractViolation) as err:  # deferred by the open group already
        m.free_swa(row[2:])
    assert err.value.clause == "SWA-11"
    m.free_segments([(again[:1], 0), (again[1:], 1)])
    m.free_group_end()
    assert m.full.get_all_free_pages() == [3, 4, 1, 2]  # enqueue order, one free
    m.check_invariants()


def test_resize_takes_one_size_SWA_25() -> None:
    m = PureSWAModel(4)
    m.alloc(2)
    before = m.snapshot()
    with pytest.raises(ContractViolation) as err:
        m.resize(HybridResizeConfig(8, 6))
    assert err.value.clause == "SWA-25" and m.snapshot() == before
    m.resize(HybridResizeConfig(8, 8))
    assert m.size == 8 and m.available_size() == 8 and len(m.mapping_pairs()) == 8
    assert m.verify_byte_accounting() == []
