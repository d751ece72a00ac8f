"""The models' self-checks name what is broken: a state corrupted on purpose (a group closed
under deferred pages, a mapping left behind by a released page) is reported by its clause, and
the mapping census names each violation it finds in otherwise healthy data."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kvpool.spec import AllocatorModel, HybridModel
from kvpool.spec.hybrid_rules import mapping_census
from kvpool.spec.rules import FREE, OWNED


def test_model_reports_segment_pages_deferred_with_the_group_closed_GROUP_2() -> None:
    model = AllocatorModel(32, 4)
    row = model.alloc_extend([0], [8], [-1])
    assert row is not None
    model.free_group_begin()
    model.free_segment(row[:4], start_pos=0)          # page deferred until the group ends
    model.check_invariants()
    model.free_group = None                           # closed without releasing it
    with pytest.raises(AssertionError, match="GROUP-2: deferred segment pages"):
        model.check_invariants()


def test_hybrid_reports_swa_pages_deferred_with_the_group_closed_GROUP_2() -> None:
    h = HybridModel(64, 32, 4)
    row = h.alloc_extend([0], [8], [-1])
    assert row is not None
    h.free_group_begin()
    h.free_swa(row[:4])                               # SWA page deferred until the group ends
    h.check_invariants()
    h.full.free_group = None                          # the full side closed the group alone
    with pytest.raises(AssertionError, match="GROUP-2: SWA pages deferred"):
        h.check_invariants()


def test_hybrid_reports_a_mapping_kept_by_a_released_full_page_SWA_2() -> None:
    h = HybridModel(64, 32, 4)
    row = h.alloc_extend([0], [4], [-1])
    assert row is not None
    h.full._release([row[0] // 4])                    # released without clearing its pairs
    problems = h.verify_byte_accounting()
    assert [p for p in problems if p.startswith("SWA-")] == [
        f"SWA-2: full slot {s} is mapped but its page is free" for s in row]


def held(page: int) -> str:
    return OWNED


@pytest.mark.parametrize(("pairs", "full_status", "deferred", "expected"), [
    ([(4, 8)], held, [], []),                                           # healthy
    ([(4, 8)], lambda page: FREE, [],
     ["SWA-2: full slot 4 is mapped but its page is free"]),
    ([], held, [3, 3], ["SWA-4: an SWA page is deferred twice in [3, 3]"]),
    ([(4, 12)], held, [3], ["SWA-4: an SWA page is both mapped and deferred"]),
    ([(4, 9)], held, [], ["SWA-2: full slot 4 and SWA slot 9 differ in page offset"]),
    ([(4, 8), (5, 13)], held, [],                                       # page 1 -> 2 and 3
     ["SWA-3: full page 1 and SWA page 3 do not page in step",
      "SWA-4: held SWA pages [3] have no mapped peer (leak); [] are mapped or deferred but "
      "not held"]),
])
def test_mapping_census_names_each_violation_SWA_2_SWA_4(
        pairs: list[tuple[int, int]], full_status: Callable[[int], str], deferred: list[int],
        expected: list[str]) -> None:
    """The SWA pages (1..4, page size 4) that the pairs or the deferred list name are held,
    the others free."""
    held_swa = {s // 4 for _, s in pairs} | set(deferred)
    problems = mapping_census(pairs, page_size=4, full_status_of=full_status,
                              swa_status_of=lambda p: OWNED if p in held_swa else FREE,
                              swa_num_pages=4, swa_deferred=deferred)
    assert problems == expected
