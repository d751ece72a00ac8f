"""The shared allocator base and its checked-mode status table: a page size below 1 is refused
at construction, the self-checks name a group closed while segment pages are still deferred
(``GROUP-2``) and each table inconsistency (``MODEL-3``), and checked decode refuses what the
spec refuses."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from impl_adapter import make_impl, to_plain
from kvpool.impl import PagedTokenToKVPoolAllocator
from kvpool.spec import AllocatorModel, ContractViolation
from kvpool.spec.rules import OWNED


@pytest.mark.parametrize("page_size", [0, -4])
def test_page_size_below_one_is_refused(page_size: int) -> None:
    with pytest.raises(ValueError, match=f"page_size must be >= 1, got {page_size}"):
        PagedTokenToKVPoolAllocator(64, page_size, torch.float16, "cpu", None, False)


@pytest.mark.parametrize("ps", [1, 4])
def test_check_invariants_names_segment_pages_deferred_with_the_group_closed_GROUP_2(
        ps: int) -> None:
    """Paged allocators (page size 1 included) keep a group's segment pages apart."""
    alloc = make_impl(paged=True, size=16 * ps, page_size=ps, need_sort=False)
    row = alloc.alloc(4 * ps)
    assert row is not None
    alloc.free_group_begin()
    alloc.free_segment(row[: 2 * ps], start_pos=0)          # deferred until the group ends
    alloc.check_invariants()
    alloc.free_group = None                                 # closed without releasing them
    with pytest.raises(AssertionError, match="GROUP-2: deferred segment pages"):
        alloc.check_invariants()


def _checked_paged() -> tuple[Any, Any]:
    alloc = make_impl(paged=True, size=32, page_size=4, need_sort=True, checked=True)
    row = alloc.alloc(8)                                     # pages 1, 2
    assert row is not None and alloc._table is not None
    return alloc, alloc._table


def test_checked_decode_refuses_a_last_loc_just_past_the_pool_like_the_spec() -> None:
    alloc, _ = _checked_paged()
    model = AllocatorModel(32, 4, need_sort=True)
    model.alloc(8)
    beyond = 9 * 4 + 1                                       # page 9 of 8
    with pytest.raises(ContractViolation) as want:
        model.alloc_decode([3], [beyond])
    with pytest.raises(ContractViolation) as got:
        alloc.alloc_decode(torch.tensor([3]), torch.tensor([3]), torch.tensor([beyond]))
    assert got.value.clause == want.value.clause


def test_status_table_self_check_names_each_inconsistency_MODEL_3() -> None:
    _, table = _checked_paged()
    assert table.check_invariants() == []
    table.status[1] = "bogus"
    assert table.check_invariants() == ["MODEL-3: page 1 has status 'bogus'"]
    table.status[1] = OWNED
    table.staged.append(3)                                   # page 3 is free, not staged
    assert table.check_invariants() == ["MODEL-3: page 3 listed staged but is free"]


def test_status_table_leaves_pages_outside_the_pool_to_the_census() -> None:
    alloc, table = _checked_paged()
    free = to_plain(alloc.get_all_free_pages())
    assert table.disagreements(free, []) == []
    assert table.disagreements([0, *free, len(table.status)], []) == []


@pytest.mark.parametrize("size", [-8, 1.5])
def test_checked_construction_refuses_a_bad_size_LIFE_2(size: Any) -> None:
    with pytest.raises(ContractViolation, match="LIFE-2"):
        PagedTokenToKVPoolAllocator(size, 4, torch.float16, "cpu", None, False, checked=True)


def test_unchecked_segment_double_free_past_the_pool_changes_nothing_FREE_3() -> None:
    """Unchecked, a double free is not looked for, but more free pages than exist are refused
    before any segment moves (all or nothing)."""
    alloc = make_impl(paged=True, size=16, page_size=4, need_sort=False)
    row = alloc.alloc(8)                                     # pages 1, 2; pages 3, 4 free
    assert row is not None
    alloc.free_segments([(row[:4], 0)])                      # page 1 back: 3 free
    before = to_plain(alloc.get_all_free_pages())
    with pytest.raises(ContractViolation, match="FREE-3"):
        alloc.free_segments([(row[:4], 0), (row[4:], 4)])    # page 1 again and page 2: 5 > 4
    assert to_plain(alloc.get_all_free_pages()) == before


def test_unchecked_group_end_past_the_pool_changes_nothing_FREE_3() -> None:
    alloc = make_impl(paged=True, size=16, page_size=4, need_sort=False)
    row = alloc.alloc(12)                                    # pages 1..3; page 4 free
    assert row is not None
    before = to_plain(alloc.get_all_free_pages())
    alloc.free_group_begin()
    alloc.free(row[8:])                                      # page 3, a free() input
    alloc.free_segment(row[:8], start_pos=0)                 # pages 1, 2 deferred
    alloc.free_segment(row[:8], start_pos=0)                 # and again (unchecked)
    with pytest.raises(ContractViolation, match="FREE-3"):
        alloc.free_group_end()                               # 1 + 1 + 4 pages > 4
    assert to_plain(alloc.get_all_free_pages()) == before


def test_deferred_pages_and_debug_print_follow_the_group_GROUP_3() -> None:
    alloc = make_impl(paged=True, size=32, page_size=4, need_sort=False)
    model = AllocatorModel(32, 4)
    row = alloc.alloc(16)
    assert row is not None and to_plain(row) == model.alloc(16)
    assert to_plain(alloc.deferred_pages()) == model.deferred_pages() == []
    assert "deferred: closed" in alloc.debug_print()
    for side in (alloc, model):
        side.free_group_begin()
    alloc.free(row[:4])
    model.free(to_plain(row[:4]))
    alloc.free_segment(row[8:], start_pos=8)
    model.free_segment(to_plain(row[8:]), start_pos=8)
    assert to_plain(alloc.deferred_pages()) == model.deferred_pages() == [1, 3, 4]
    assert "deferred: closed" not in alloc.debug_print()
