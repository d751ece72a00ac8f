"""UNI-16: the tri-pool's state end shows the slots it takes now as
``kvpool.spec.unified_float.state_available_slots`` derives them from the float chain.

The formula against a slot-by-slot count on random chains (no peer needed); then SGLang 0.5.23's
tri-pool (``mamba_allocator.available_size()``) and kvpool's (``state_available_size()``) against
the formula on their own chains under random token calls and state-slot takes and releases
(SGLang's part skipped where it is not installed).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kvpool.oracle.families.unified.float_views import chain_of
from kvpool.oracle.families.unified.kvpool_target import kvpool_unified_tri
from kvpool.oracle.families.unified.peer_state import set_state_slots, state_available
from kvpool.oracle.peers.availability import require_installed
from kvpool.spec.unified_float import FloatChain, Grid, state_available_slots


@st.composite
def chains(draw: Any) -> FloatChain:
    slot_bytes = draw(st.sampled_from([48, 64, 176]))
    state = Grid(slot_bytes, draw(st.integers(2, 40 * 32 // slot_bytes)), 1)
    swa = full = Grid(32, 40, 2)
    state_span = draw(st.integers(0, state.num_pages - state.min_page))
    state_high = (state.min_page + state_span) * state.page_bytes
    low = draw(st.integers(-(-state_high // 32), 40))
    high = draw(st.integers(low, 40))
    full_low = draw(st.integers(high, 40)) * 32
    holes = draw(st.integers(0, high - low))
    return FloatChain(
        page_size=1, state=state, swa=swa, full=full, state_high_byte=state_high,
        state_holes=draw(st.integers(0, state_span)), state_drains=False, swa_low_page=low,
        swa_high_page=high, swa_holes=holes, full_low_byte=full_low,
        full_span_pages=40 - full_low // 32, full_holes=0, full_drains=False,
        full_static_tokens=40, swa_static_tokens=40, full_live_tokens=0,
        swa_live_tokens=high - low - holes)


@settings(max_examples=200, deadline=None)
@given(chains())
def test_state_slots_available_are_the_free_slots_below_the_next_member_UNI_16(
        c: FloatChain) -> None:
    m = c.state
    above = c.full_low_byte if c.transparent else c.swa_low_page * c.swa.page_bytes
    top = c.state_high_byte // m.page_bytes  # the first slot past the state end's span
    free = [p for p in range(max(top, m.min_page), m.num_pages) if (p + 1) * m.page_bytes <= above]
    assert state_available_slots(c) == len(free) + c.state_holes


def drive(a: Any, seed: int, steps: int = 60) -> int:
    """Random allocs, frees and state-slot counts on tri-pool ``a``; after each, its state
    end's view must be the formula's. The number of steps where the float was live."""
    rng, rows, live_float = random.Random(seed), [], 0
    for _ in range(steps):
        pick = rng.random()
        if pick < 0.4:
            out = a.alloc(rng.randrange(1, 12) * a.page_size)
            if out is not None:
                rows.append(out)
        elif pick < 0.6 and rows:
            a.free(rows.pop(rng.randrange(len(rows))))
        elif pick < 0.75 and rows:
            a.free_swa(rows[rng.randrange(len(rows))][: a.page_size])
        else:
            set_state_slots(a, rng.randrange(0, 5))
        chain = chain_of(a)
        live_float += not chain.transparent
        assert state_available(a) == state_available_slots(chain)
    return live_float


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("ps", [1, 4])
def test_kvpool_state_end_shows_the_formula_UNI_16(ps: int, lazy: bool) -> None:
    a = kvpool_unified_tri(total_bytes=0, page_size=ps, lazy=lazy)
    assert sum(drive(a, seed) for seed in range(3)) > 0


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("ps", [1, 4])
def test_sglang_state_end_shows_the_formula_UNI_16(ps: int, lazy: bool) -> None:
    require_installed("sglang")
    from kvpool.oracle.families.unified.targets import sglang_unified_tri

    a = sglang_unified_tri(total_bytes=0, page_size=ps, lazy=lazy)
    assert sum(drive(a, seed) for seed in range(3)) > 0
