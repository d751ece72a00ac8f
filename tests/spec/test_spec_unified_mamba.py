"""The unified full + Mamba model (``SPEC.md`` §21, ``UMB-1`` .. ``UMB-8``) on its own, no SGLang.

Geometry as SGLang's CPU fixture: full tokens of 32 bytes, Mamba states of 176 bytes.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable

import pytest
from kvpool.spec.errors import ContractViolation
from kvpool.spec.unified_mamba import UnifiedMambaModel
from kvpool.spec.unified_mamba_views import full_tokens_before_recheck, mamba_slot_full_token_cost

ENTRY, STATE = 32, 176


def model(total: int = 4408, ps: int = 4, lazy: bool = False) -> UnifiedMambaModel:
    return UnifiedMambaModel(total, ps, ENTRY, STATE, lazy=lazy)


def test_layout_and_empty_views_UMB_1_UMB_3_UMB_4() -> None:
    m = model()
    floor = max(4 * ENTRY, STATE)
    assert m.full.min_page * m.full.page_bytes >= floor > (m.full.min_page - 1) * m.full.page_bytes
    assert m.state.min_page * STATE >= floor
    assert m.full.pages == 4408 // ENTRY // 4 and m.state.pages == 4408 // STATE
    gap = m.full.pages * m.full.page_bytes - m.state.min_page * STATE
    assert m.available_size() == m.full_available_size() == min(
        gap // m.full.page_bytes, m.full.pages - m.full.min_page) * 4
    assert m.state_available_size() == min(gap // STATE, m.state.pages - m.state.min_page)
    assert (m.size_full, m.size_mamba) == (4408 // ENTRY - 1, 4408 // STATE - 1)
    assert m.size() == m.available_size()


def test_state_slots_take_gap_bytes_from_tokens_UMB_3_UMB_5() -> None:
    m = model()
    before = m.available_size()
    slots = m.alloc_state(3)
    assert slots == [1, 2, 3]
    gap = m.full.pages * m.full.page_bytes - (m.state.min_page + 3) * STATE
    assert m.available_size() == min(gap // m.full.page_bytes, m.full.pages - m.full.min_page) * 4
    assert before - m.available_size() <= 3 * mamba_slot_full_token_cost(STATE, ENTRY)
    m.free_state([2])
    assert m.state.watermark == m.state.min_page + 2  # eager: compacted at once
    assert m.free_state_ids[-1] == 2
    m.check_invariants()


def test_alloc_up_to_available_is_granted_then_refused_UMB_3() -> None:
    for lazy in (False, True):
        m = model(lazy=lazy)
        m.alloc_state(2)
        n = m.available_size()
        assert m.alloc(n) is not None
        assert m.alloc(4) is None
        m.check_invariants()


def test_lazy_relief_compacts_the_state_end_UMB_3_UMB_5() -> None:
    m = model(lazy=True)
    slots = m.alloc_state(6)
    assert slots is not None
    m.free_state(slots[:5])
    assert len(m.state.holes) == 5
    credit = m.available_size()
    assert m.full_now_tokens() < credit  # the holes are credited, not yet usable
    assert m.alloc(credit) is not None  # granted: the state end was compacted
    assert m.state.holes == [] and m.state.span_pages() == 1
    m.check_invariants()


def test_move_gate_withholds_the_credit_UMB_3() -> None:
    m = model(lazy=True)
    slots = m.alloc_state(6)
    assert slots is not None
    m.free_state(slots)
    open_view = m.available_size()
    m.set_move_gate(False)
    assert m.available_size() < open_view
    assert m.alloc(open_view) is None and len(m.state.holes) == 6
    m.set_move_gate(True)
    assert m.available_size() == open_view


def test_free_group_defers_and_prepare_runs_it_UMB_2_UMB_5() -> None:
    m = model()
    ids = m.alloc(8)
    assert ids is not None
    m.free_group_begin()
    m.free(ids[:4])
    assert m.free_virtual[-1] != ids[0] // 4  # deferred
    m.prepare_mamba_allocation(1)
    assert m.free_virtual[-1] == ids[0] // 4 and m.group == []  # ran, group open
    m.free(ids[4:])
    m.free_group_end()
    assert m.group is None and len(m.full.v2p) == 0


def test_clear_restores_construction_UMB_1() -> None:
    m, fresh = model(lazy=True), model(lazy=True)
    m.alloc(12)
    m.alloc_state(2)
    m.clear()
    assert (m.free_virtual, m.free_state_ids, m.available_size(), m.state_available_size()) == (
        fresh.free_virtual, fresh.free_state_ids, fresh.available_size(),
        fresh.state_available_size())


def test_caller_errors_leave_the_model_unchanged_UMB_8() -> None:
    m = model()
    ids = m.alloc(8)
    slots = m.alloc_state(2)
    assert ids is not None and slots is not None
    m.free(ids[:4])
    snapshot = copy.deepcopy(m.__dict__)
    calls: list[Callable[[], object]] = [
        lambda: m.free(ids[:4]), lambda: m.translate(ids[:1]),
        lambda: m.free_state([slots[0], slots[0]]), lambda: m.free_state([20]),
        lambda: m.alloc(3), lambda: m.set_move_gate(False)]
    for call in calls:
        with pytest.raises(ContractViolation) as err:
            call()
        assert err.value.clause == "UMB-8"
        assert m.__dict__ == snapshot


def test_census_reports_planted_faults_UMB_8() -> None:
    m = model()
    ids = m.alloc(8)
    assert ids is not None
    v = ids[0] // 4
    m.full.v2p[v] = m.full.v2p[ids[4] // 4]  # stale binding
    assert any("UNI-4" in p for p in m.census())
    m = model()
    m.alloc(8)
    m.alloc_state(1)
    m.state.watermark = m.full.watermark + 40  # frontier cross
    assert any("UMB-8" in p and "crosses" in p for p in m.census())


def test_recheck_bound_arithmetic_UMB_6() -> None:
    assert mamba_slot_full_token_cost(STATE, ENTRY) == 6
    assert full_tokens_before_recheck(0, STATE, ENTRY) == 0
    assert full_tokens_before_recheck(1, STATE, ENTRY) == 1
    assert full_tokens_before_recheck(2, STATE, ENTRY) == -(-(STATE + 1) // ENTRY)
    m = model()
    while m.alloc(4) is not None:
        pass
    assert m.full_tokens_before_mamba_recheck(1) == (1 if m.state_available_size() == 0 else 0)


def test_random_sequences_keep_the_census_empty_UMB_8() -> None:
    for seed in range(6):
        rng = random.Random(seed)
        m = model(ps=rng.choice([1, 4]), lazy=rng.random() < 0.5)
        live: list[list[int]] = []
        slots: list[int] = []
        for _ in range(120):
            op = rng.randrange(5)
            if op == 0 and (got := m.alloc(m.page_size * rng.randint(1, 3))):
                live.append(got)
            elif op == 1 and live:
                m.free(live.pop(rng.randrange(len(live))))
            elif op == 2 and (s := m.alloc_state(1)):
                slots += s
            elif op == 3 and slots:
                m.free_state([slots.pop(rng.randrange(len(slots)))])
            elif op == 4:
                m.flush_opportunistic() if m.lazy else m.prepare_mamba_allocation(2)
            m.check_invariants()
            assert m.size() == m.available_size() + sum(map(len, live)) * 0 + len(
                m.full.v2p) * m.page_size


def test_free_order_eager_lazy_and_segments_UMB_2() -> None:
    """Eager frees append ids ascending; lazy at page size 1 in the order given; a segment
    free appends the page of every ``page_size``-th id in row order."""
    for lazy in (False, True):
        m = model(ps=1, lazy=lazy)
        ids = m.alloc(3)
        assert ids is not None
        given = [ids[2], ids[0], ids[1]]
        m.free(given)
        assert m.free_virtual[-3:] == (given if lazy else sorted(ids))
    m = model(ps=4)
    a, b = m.alloc(4), m.alloc(4)
    assert a is not None and b is not None
    m.free(a)
    row = m.alloc_extend([0], [m.available_size()], [-1])  # takes every free page, a's last
    assert row is not None
    pages = [t // 4 for t in row[::4]]
    assert pages[-1] == a[0] // 4 and pages != sorted(pages)
    m.free_segment(row[4:], 4)
    assert m.free_virtual == pages[1:]


def test_refused_alloc_keeps_its_relief_and_extend_refuses_first_UMB_2_UMB_3() -> None:
    """An ``alloc`` past even the credited view still flushes the state end before it is
    refused; an extend needing more pages than free ids is refused before any relief."""
    m = model(lazy=True)
    slots = m.alloc_state(6)
    assert slots is not None
    m.free_state(slots[:5])
    assert m.alloc_extend([0], [4 * len(m.free_virtual) + 4], [-1]) is None
    assert len(m.state.holes) == 5
    assert m.alloc(m.available_size() + 4) is None
    assert m.state.holes == [] and m.state.span_pages() == 1
    m.check_invariants()


def test_group_caller_errors_leave_the_model_unchanged_UMB_8() -> None:
    m = model(ps=4)
    ids = m.alloc(12)
    assert ids is not None
    m.free_group_begin()
    m.free_segment(ids[4:], 4)
    m.free(ids[:1])
    m.free(ids[1:2])  # another token of a queued page: SGLang deduplicates at ps > 1
    snapshot = copy.deepcopy(m.__dict__)
    for call in (lambda: m.free(ids[4:5]), lambda: m.free_segment(ids[8:], 8),
                 lambda: m.free_segment(ids[:4], 0), m.free_group_begin,
                 lambda: m.free_segment(ids[2:], 2)):
        with pytest.raises(ContractViolation, match="UMB-8"):
            call()
        assert m.__dict__ == snapshot
    m.free_group_end()
    assert m.full.v2p == {} and sorted(m.free_virtual) == list(range(m.full.min_page,
                                                                      m.full.pages))


def test_views_are_the_end_pair_formulas_an_empty_float_is_transparent_UMB_3_UMB_4() -> None:
    """The tri-pool views on the empty-float chain equal the two-end formulas: full's gap
    (plus drainable state holes) in whole pages within its room, plus its holes; the state
    end's gap in whole slots within its room, plus its holes."""
    rng = random.Random(7)
    for _ in range(40):
        m = model(total=rng.choice([3000, 4408, 9000]), ps=rng.choice([1, 4]), lazy=True)
        live: list[list[int]] = []
        for _ in range(rng.randint(0, 30)):
            if rng.random() < 0.6 and (got := m.alloc(m.page_size * rng.randint(1, 2))):
                live.append(got)
            elif rng.random() < 0.5 and (s := m.alloc_state(1)):
                if rng.random() < 0.5:
                    m.free_state(s)
            elif live:
                m.free(live.pop(rng.randrange(len(live))))
        m.set_move_gate(rng.random() < 0.7)
        f, s = m.full, m.state
        gap = m.gap_bytes()
        credit = 0 if m.moves_blocked else len(s.holes) * s.page_bytes
        assert m.available_size() == (min((gap + credit) // f.page_bytes, f.room())
                                      + len(f.holes)) * m.page_size
        assert m.state_available_size() == min(gap // STATE, s.room()) + len(s.holes)


def test_lazy_flush_pairs_the_page_nearest_the_frontier_with_the_farthest_hole_UMB_7() -> None:
    """Idle flush: the holes touching full's frontier are absorbed, the live page nearest the
    frontier moves to the hole farthest from it and becomes a hole; an urgent flush (relief)
    then retreats the frontier past every hole."""
    m = model(ps=1, lazy=True)
    ids = m.alloc(4)
    assert ids is not None
    assert m.translate(ids) == [133, 134, 135, 136] and m.full.watermark == 132
    m.free([ids[0], ids[2]])  # holes 133 (at the frontier) and 135
    assert m.flush_opportunistic() == 1
    assert (m.full.watermark, m.translate([ids[1]]), m.full.holes) == (133, [135], [134])
    assert m.full.moves[-1] == (134, 135)
    m.full.flush()
    assert m.full.holes == [] and m.full.watermark == 134 and m.translate(ids[1:4:2]) == [135, 136]
    m.check_invariants()
