"""UMB-2, UMB-5, UMB-7: the full + Mamba model's releases (``kvpool.spec.unified_mamba_frees``,
``kvpool.spec.unified_mamba_end``) worked by hand on small composites.

Geometry: 4408 bytes, full tokens of 32 bytes, state slots of 176 bytes; the sink is
``max(ps * 32, 176) = 176`` bytes at page size 1 or 4, so state slot 1 comes first (25 slots);
at page size 1 full page 6 comes first (137 pages), at page size 4 full page 2 (34 pages).
"""

from __future__ import annotations

import pytest
from kvpool.spec.errors import ContractViolation
from kvpool.spec.unified_mamba import UnifiedMambaModel


def model(ps: int, lazy: bool = False) -> UnifiedMambaModel:
    return UnifiedMambaModel(4408, ps, 32, 176, lazy=lazy)


def test_a_segment_free_at_page_size_one_is_a_plain_free_UMB_2() -> None:
    m = model(1)
    assert (m.full.min_page, m.full.pages) == (6, 137)
    row = m.alloc(3)
    assert row == [6, 7, 8]
    m.free_segment([8, 7, 6], 0)  # as free(): the ids join the free list ascending
    assert m.full.v2p == {} and m.free_virtual == [*range(9, 137), 6, 7, 8]
    m.check_invariants()


def test_a_segment_must_start_on_a_page_UMB_8() -> None:
    m = model(4)
    row = m.alloc(8)
    assert row is not None
    before = (dict(m.full.v2p), list(m.free_virtual))
    with pytest.raises(ContractViolation, match="UMB-8"):
        m.free_segment(row[4:], 3)
    assert (m.full.v2p, m.free_virtual) == before
    m.free_segment(row[4:], 4)
    assert len(m.full.v2p) == 1


def test_a_free_at_page_size_one_refuses_an_id_twice_or_queued_UMB_8() -> None:
    m = model(1)
    row = m.alloc(2)
    assert row is not None
    with pytest.raises(ContractViolation, match="UMB-8"):
        m.free([row[0], row[0]])
    m.free_group_begin()
    m.free(row[:1])
    with pytest.raises(ContractViolation, match="UMB-8"):
        m.free(row[:1])  # queued already in the open group
    m.free_group_end()
    assert list(m.full.v2p) == [row[1]]


def lazy_state_end(slots: int, freed: list[int]) -> UnifiedMambaModel:
    """A lazy composite whose state end took slots 1..``slots`` (slot k on page k) and then
    released ``freed`` in that order: its holes, in release order."""
    m = model(4, lazy=True)
    assert m.alloc_state(slots) == list(range(1, slots + 1))
    m.free_state(freed)
    assert m.state.holes == freed
    return m


def test_a_partial_drain_takes_the_lowest_hole_UMB_7() -> None:
    m = lazy_state_end(5, [4, 2])
    assert m.alloc_state(1) == [6]
    assert m.state.v2p[6] == 2 and m.state.holes == [4]


def test_a_full_drain_takes_the_holes_in_release_order_UMB_7() -> None:
    m = lazy_state_end(5, [4, 2])
    assert m.alloc_state(2) == [6, 7]
    assert (m.state.v2p[6], m.state.v2p[7]) == (4, 2) and m.state.holes == []


def test_an_urgent_flush_moves_pages_only_toward_the_end_UMB_7() -> None:
    m = lazy_state_end(5, [2, 4])
    m.state.flush()
    # slot 5 (the page nearest the frontier) fills hole 2; slot 3 stays, as hole 4 lies above
    # it; the frontier retreats by both holes, to page 4
    assert m.state.v2p == {1: 1, 3: 3, 5: 2} and m.state.watermark == 4
    assert m.state.holes == [] and m.census() == []


def test_an_idle_flush_makes_at_most_its_bound_of_moves_UMB_7() -> None:
    m = lazy_state_end(6, [2, 3])
    assert m.state.flush_idle(max_moves=1) == 1
    # slot 6 moved to page 2; hole 3 is unused, page 6 the moved-from one
    assert m.state.v2p[6] == 2 and m.state.holes == [3, 6] and m.state.watermark == 7


def test_taking_no_page_keeps_the_holes_order_UMB_7() -> None:
    m = lazy_state_end(5, [4, 2])
    assert m.state.take(0) == [] and m.state.holes == [4, 2]
