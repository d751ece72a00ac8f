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
