# ruff: noqa: E501  (contract lines are copied verbatim from the spec)
"""Deliberately wrong variants of ``kvpool.spec.unified_mamba_views``, each with the real contract.

``test_formal_z3_unified_mamba.py`` runs ``crosshair check`` on each and expects a
counterexample, and checks that each variant's ``pre:``/``post:`` lines are the real function's,
word for word.
"""

from __future__ import annotations

from kvpool.spec.unified_mamba_views import MAX_CHECKED

__all__ = ["MAX_CHECKED"]  # names the copied contracts use
REAL = {
    "full_tokens_before_recheck_no_residue": "full_tokens_before_recheck",
    "mamba_slot_full_token_cost_floor": "mamba_slot_full_token_cost",
    "missing_state_slots_unclamped": "missing_state_slots",
    "state_schedulable_slots_credit_past_room": "state_schedulable_slots",
}


def full_tokens_before_recheck_no_residue(missing_slots: int, state_bytes: int,
                                          full_entry_bytes: int, dcp_size: int = 1) -> int:
    """Bug: the bytes of all missing slots, not less the residue the view may hide.

    pre: 0 <= missing_slots <= 64
    pre: 1 <= state_bytes <= MAX_CHECKED and 1 <= full_entry_bytes <= MAX_CHECKED
    pre: 1 <= dcp_size <= 8
    post: __return__ >= 0
    post: missing_slots > 0 or __return__ == 0
    post: missing_slots == 0 or __return__ * full_entry_bytes >= ((missing_slots - 1) * state_bytes + 1) * dcp_size
    post: missing_slots == 0 or (__return__ - 1) * full_entry_bytes < ((missing_slots - 1) * state_bytes + 1) * dcp_size
    """
    if missing_slots <= 0:
        return 0
    return -(-missing_slots * state_bytes * dcp_size // full_entry_bytes)


def mamba_slot_full_token_cost_floor(state_bytes: int, full_entry_bytes: int,
                                     dcp_size: int = 1) -> int:
    """Bug: floor division under-reserves a state's bytes.

    pre: 1 <= state_bytes <= MAX_CHECKED and 1 <= full_entry_bytes <= MAX_CHECKED
    pre: 1 <= dcp_size <= 8
    post: __return__ * full_entry_bytes >= state_bytes * dcp_size
    post: (__return__ - 1) * full_entry_bytes < state_bytes * dcp_size
    """
    return state_bytes * dcp_size // full_entry_bytes


def missing_state_slots_unclamped(target_slots: int, schedulable_slots: int) -> int:
    """Bug: a surplus reads as negative missing slots.

    pre: 0 <= target_slots <= MAX_CHECKED and 0 <= schedulable_slots <= MAX_CHECKED
    post: __return__ == max(0, target_slots - schedulable_slots)
    """
    return target_slots - schedulable_slots


def state_schedulable_slots_credit_past_room(gap_bytes: int, state_bytes: int, state_room: int,
                                             state_holes: int, full_hole_bytes: int) -> int:
    """Bug: the credited bytes are counted past the state end's index room.

    pre: 0 <= gap_bytes <= MAX_CHECKED and 1 <= state_bytes <= 256
    pre: 0 <= state_room <= 64 and 0 <= state_holes <= 64
    pre: 0 <= full_hole_bytes <= MAX_CHECKED
    post: __return__ >= min(gap_bytes // state_bytes, state_room) + state_holes
    post: (__return__ - state_holes) * state_bytes <= gap_bytes + full_hole_bytes
    post: __return__ - state_holes <= state_room
    """
    return (gap_bytes + full_hole_bytes) // state_bytes + state_holes
