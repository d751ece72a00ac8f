"""kvpool's tri-pool on its own (no peer): the chain's layout, the float's holes and parking, state
slots, checked mode's typed errors, the census and ``clear()``."""

from __future__ import annotations

import pytest
import torch
from kvpool.impl import UnifiedMambaSWAAllocator
from kvpool.spec.errors import ContractViolation
from kvpool.spec.unified_float import capacity_views, state_available_slots


def pool(ps: int = 1, lazy: bool = False) -> UnifiedMambaSWAAllocator:
    # 64 full + 64 SWA pages of 32-byte tokens and 8 state slots of 176 bytes
    return UnifiedMambaSWAAllocator(ps * 64 * 64 + 8 * 176, ps, lazy=lazy)


def ids(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


@pytest.mark.parametrize("ps", [1, 4])
def test_members_sit_in_chain_order_and_the_views_are_the_chains(ps: int) -> None:
    a = pool(ps)
    assert a.alloc_state(2) is not None
    rows = a.alloc(4 * ps)
    assert rows is not None
    state, swa, full = (a.unified_state().sides[k] for k in ("state", "swa", "full"))
    assert state.span_high * state.page_bytes <= swa.span_low * swa.page_bytes
    assert swa.span_high * swa.page_bytes <= full.span_low * full.page_bytes
    assert (state.live_pages, swa.live_pages, full.live_pages) == (2, 4, 4)
    views = capacity_views(a.float_chain())
    assert a.available_size() == views["available_size"] > 0
    assert a.swa_available_size() == views["swa_available_size"]
    assert a.state_available_size() == state_available_slots(a.float_chain())
    assert a.verify_byte_accounting() == []


def test_the_float_keeps_holes_in_eager_mode_and_parks_when_empty() -> None:
    a = pool()
    rows = a.alloc(6)
    assert rows is not None
    a.free_swa(rows[2:3])
    assert a.swa.num_holes() == 1 and a.swa.live == 5
    assert a.translate_loc_from_full_to_swa(rows[2:3]).tolist() == [0]  # slid out: the sink
    again = a.alloc(1)  # the hole is reused in place
    assert again is not None and a.swa.num_holes() == 0
    a.free(rows)
    a.free(again)
    assert a.swa.transparent and a.swa.span() == (a.swa.num_pages, a.swa.num_pages)
    assert a.verify_byte_accounting() == []


def test_state_slots_shrink_the_token_views_and_come_back() -> None:
    a = pool()
    before = a.available_size()
    slots = a.alloc_state(3)
    assert slots is not None and a.available_size() < before
    a.free_state_slots(slots)
    assert a.available_size() == before
    a.set_state_slots(2)
    assert int((a.state.v2p >= 0).sum()) == 2


def test_checked_mode_raises_typed_errors_and_changes_nothing() -> None:
    a = pool()
    rows = a.alloc(3)
    assert rows is not None
    a.free(rows[:1])
    state = a.unified_state()
    with pytest.raises(ContractViolation, match="UNI-11"):
        a.free(rows[:1])
    with pytest.raises(ContractViolation, match="UNI-11"):
        a.translate_loc_from_full_to_swa(rows[:1])
    with pytest.raises(ContractViolation, match="UNI-10"):
        a.free_full(rows[1:2])  # its SWA page is still bound
    with pytest.raises(ContractViolation, match="UNI-11"):
        a.free_state_slots(ids([5]))
    assert a.unified_state() == state


def test_the_census_reports_a_planted_fault_and_clear_empties_everything() -> None:
    a = pool()
    assert a.alloc(4) is not None and a.alloc_state(1) is not None
    assert a.unified_plant("stale_binding:swa")
    assert any("UNI-4" in line for line in a.verify_byte_accounting())
    b = pool()
    assert b.alloc(4) is not None
    assert b.unified_plant("frontier_cross")
    assert any("UNI-3" in line for line in b.verify_byte_accounting())
    b.clear()
    fresh = pool()
    assert b.unified_state() == fresh.unified_state() and b.verify_byte_accounting() == []


def test_a_buffer_without_room_above_the_sink_is_refused() -> None:
    with pytest.raises(ContractViolation, match="UNI-2"):
        UnifiedMambaSWAAllocator(160, 1)
