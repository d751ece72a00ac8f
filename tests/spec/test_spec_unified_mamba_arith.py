"""UMB-6: the full + Mamba composite's admission arithmetic (``kvpool.spec.unified_mamba_views``)
worked by hand: the state end's schedulable slots, a slot's cost in full tokens, the slots an
admission lacks and the full tokens to free before its next check."""

from __future__ import annotations

import pytest
from kvpool.spec.unified_mamba_views import (
    full_tokens_before_recheck,
    mamba_slot_full_token_cost,
    missing_state_slots,
    state_schedulable_slots,
)


@pytest.mark.parametrize(("args", "slots"), [
    ((1000, 176, 10, 2, 0), 7),  # 1000 // 176 = 5 slots of the gap, plus 2 holes
    ((1000, 176, 10, 2, 100), 8),  # full's 100 hole bytes make 1100: 6 slots
    ((1000, 176, 4, 0, 0), 4),  # the index room binds
    ((100, 176, 4, 3, 0), 3),  # no whole slot in the gap: only the holes
])
def test_state_schedulable_slots_are_gap_slots_within_room_plus_holes_UMB_6(
        args: tuple[int, int, int, int, int], slots: int) -> None:
    assert state_schedulable_slots(*args) == slots


@pytest.mark.parametrize(("args", "tokens"), [
    ((176, 64), 3),  # 176 bytes: 2.75 full tokens of 64, rounded up
    ((128, 64), 2),  # exactly 2
    ((176, 64, 2), 6),  # two context-parallel ranks: 352 bytes
    ((1, 64), 1),
])
def test_a_slot_costs_its_bytes_in_full_tokens_rounded_up_UMB_6(args: tuple[int, ...],
                                                                 tokens: int) -> None:
    assert mamba_slot_full_token_cost(*args) == tokens


@pytest.mark.parametrize(("target", "schedulable", "missing"), [(5, 3, 2), (3, 5, 0), (4, 4, 0)])
def test_missing_slots_are_the_shortfall_never_negative_UMB_6(target: int, schedulable: int,
                                                              missing: int) -> None:
    assert missing_state_slots(target, schedulable) == missing


@pytest.mark.parametrize(("args", "tokens"), [
    ((0, 176, 64), 0),  # nothing missing: nothing to free
    ((1, 176, 64), 1),  # one slot: one byte of it may already be free: 1 token
    ((3, 176, 64), 6),  # 2 * 176 + 1 = 353 bytes: 5.5 tokens of 64
    ((3, 176, 64, 2), 12),  # 706 bytes
    ((2, 128, 64), 3),  # 129 bytes: just over 2 tokens
    ((2, 127, 64), 2),  # 128 bytes: exactly 2
])
def test_full_tokens_before_recheck_skip_only_hopeless_checks_UMB_6(args: tuple[int, ...],
                                                                    tokens: int) -> None:
    assert full_tokens_before_recheck(*args) == tokens
