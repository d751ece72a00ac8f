"""One end sub-pool of the unified model (``EndPool``): its frontier, hand-out order, compaction,
idle flush and census, on small pools worked out by hand (UNI-3 .. UNI-6)."""

from __future__ import annotations

import pytest
from kvpool.spec.unified_tables import EndPool


def _pool(grows_up: bool, *, lazy: bool, min_page: int = 1, pages: int = 10) -> EndPool:
    return EndPool("full", grows_up, min_page, pages, 32, lazy)


def test_a_fresh_pool_has_its_frontier_at_its_end_and_all_its_room_UNI_5() -> None:
    up, down = _pool(True, lazy=False, min_page=2), _pool(False, lazy=False)
    assert (up.watermark, up.span_pages(), up.room()) == (2, 0, 8)
    assert (down.watermark, down.span_pages(), down.room()) == (9, 0, 9)
    up.bind([0, 1, 2], up.take(3))
    assert (up.span_pages(), up.room()) == (3, 5)  # 10 pages - first page 2 - span 3


def test_lazy_grow_down_takes_drained_holes_then_fresh_pages_downward_UNI_5() -> None:
    p = _pool(False, lazy=True)
    assert p.take(3) == [7, 8, 9]
    p.bind([0, 1, 2], [7, 8, 9])
    p.release([1])  # page 8 becomes a hole
    got = p.take(3)  # one hole, then two fresh pages past the frontier (6, then 5)
    assert got == [8, 6, 5]
    assert p.watermark == 4 and p.holes == []


def test_bind_needs_one_physical_page_per_virtual_page_UNI_4() -> None:
    p = _pool(True, lazy=False)
    with pytest.raises(ValueError):
        p.bind([0, 1], [1])


def test_clear_forgets_every_binding_and_its_bytes_UNI_12() -> None:
    p = _pool(True, lazy=True)
    p.bind([0, 1], p.take(2))
    p.release([0])
    p.clear()
    assert (p.v2p, p.p2v, p.holes, p.content, p.watermark) == ({}, {}, [], {}, 1)


def test_the_idle_flush_moves_toward_the_end_and_stops_at_the_first_wrong_way_pair() -> None:
    p = _pool(True, lazy=True)  # grows up from page 1
    p.bind([0, 1, 2, 3], p.take(4))  # pages 1..4, frontier 5
    p.release([0, 2])  # holes 1 and 3; neither touches the frontier
    assert p.flush_idle() == 1  # page 4 -> hole 1; page 2 -> hole 3 would move away from the end
    assert p.moves == [(4, 1)] and p.v2p == {1: 2, 3: 1}
    assert p.holes == [3, 4] and p.watermark == 5 and p.census() == []


def test_the_idle_flush_of_a_grow_down_pool_fills_the_farthest_holes_first() -> None:
    p = _pool(False, lazy=True)  # grows down from page 9
    p.bind(list(range(6)), p.take(6))  # pages 4..9, frontier 3
    p.release([4, 5])  # holes 8 and 9, at the far end
    # live pages nearest the frontier first (4, 5) to the holes farthest from it (9, 8)
    assert p.flush_idle() == 2
    assert p.moves == [(4, 9), (5, 8)]
    assert p.watermark == 3 and p.holes == [4, 5] and p.census() == []


def test_the_idle_flush_absorbs_the_holes_touching_the_frontier() -> None:
    p = _pool(False, lazy=True)
    p.bind(list(range(4)), p.take(4))  # pages 6..9, frontier 5
    p.release([0, 1])  # holes 6 and 7, both touching the frontier in turn
    assert p.flush_idle() == 0 and p.moves == []
    assert p.watermark == 7 and p.holes == [] and p.census() == []


def test_the_idle_flush_moves_at_most_max_moves_pages() -> None:
    p = _pool(True, lazy=True)
    p.bind(list(range(6)), p.take(6))  # pages 1..6, frontier 7
    p.release([0, 1])  # holes 1, 2
    assert p.flush_idle(max_moves=1) == 1
    assert p.moves == [(6, 1)] and p.holes == [2, 6]


def test_the_idle_flush_does_nothing_without_lazy_holes() -> None:
    eager, lazy = _pool(True, lazy=False), _pool(True, lazy=True)
    for p in (eager, lazy):
        p.bind([0, 1], p.take(2))
    eager.release([0])  # eager compaction closed the hole at once
    assert eager.flush_idle() == 0 and lazy.flush_idle() == 0
    assert eager.moves == [(2, 1)] and lazy.moves == []


def test_a_healthy_pool_from_page_zero_has_an_empty_census_UNI_13() -> None:
    p = EndPool("swa", True, 0, 8, 32, False)
    assert p.band() == (0, 0) and p.census() == []
    p.bind([0, 1], p.take(2))
    assert p.census() == []


@pytest.mark.parametrize("grows_up", [True, False])
def test_the_census_names_a_frontier_out_of_bounds_UNI_3(grows_up: bool) -> None:
    p = _pool(grows_up, lazy=False)
    p.watermark = 15 if grows_up else -5
    assert any("UNI-3 frontier out of bounds" in m for m in p.census())


@pytest.mark.parametrize("grows_up", [True, False])
def test_the_census_names_a_live_page_just_outside_the_span_UNI_5(grows_up: bool) -> None:
    p = _pool(grows_up, lazy=False)
    p.bind([0, 1], p.take(2))
    stray = p.watermark  # the frontier page itself lies outside the span
    p.bind([7], [stray])
    assert any("UNI-5 live pages outside the span" in m for m in p.census())


def test_the_census_names_holes_that_are_not_free_pages_of_the_span_UNI_5() -> None:
    p = _pool(True, lazy=True)
    p.bind([0, 1, 2], p.take(3))
    p.release([1])
    p.holes.append(8)  # past the frontier: not in the span
    assert any("UNI-5 holes not free pages" in m for m in p.census())
    eager = _pool(True, lazy=False)
    eager.bind([0, 1], eager.take(2))
    eager.holes.append(1)  # a live page listed as a hole, under eager compaction
    assert any("UNI-5 holes not free pages" in m for m in eager.census())
