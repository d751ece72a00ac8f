"""Capacity arithmetic of the unified full + Mamba composite (``UMB-3``, ``UMB-4``, ``UMB-6``).

SGLang 0.5.23's ``UnifiedMambaTokenToKVPoolAllocator`` is the tri-pool's chain with no float
(``UNI-14``): ``[ state end (grows up, one slot a page) | full end (grows down) ]``. An empty float
is transparent, so the token and state views are the tri-pool's (:mod:`kvpool.spec.unified_float`)
read on a chain whose float holds nothing (``UnifiedMambaModel.chain``). This module states the
rest as pure functions on ints: the state end's schedulable view and the Mamba-admission
arithmetic (PEP 316 contracts, checked by CrossHair; the recheck bound is proved for unbounded
sizes by ``tests/formal/test_formal_z3_unified_mamba.py``).
"""

from __future__ import annotations

from . import unified_layout as ul

MAX_CHECKED = ul.MAX_CHECKED


def state_schedulable_slots(gap_bytes: int, state_bytes: int, state_room: int,
                            state_holes: int, full_hole_bytes: int) -> int:
    """``mamba_allocator.schedulable_available_size()`` (``UMB-5``, ``UMB-6``): the state view
    (``unified_layout.side_available_pages`` on the state grid) with the bytes an urgent flush of the full end would release (``full_hole_bytes``; 0 under
    eager compaction or a closed move gate) added to the gap.

    pre: 0 <= gap_bytes <= MAX_CHECKED and 1 <= state_bytes <= 256
    pre: 0 <= state_room <= 64 and 0 <= state_holes <= 64
    pre: 0 <= full_hole_bytes <= MAX_CHECKED
    post: __return__ >= min(gap_bytes // state_bytes, state_room) + state_holes
    post: (__return__ - state_holes) * state_bytes <= gap_bytes + full_hole_bytes
    post: __return__ - state_holes <= state_room
    """
    return min((gap_bytes + full_hole_bytes) // state_bytes, state_room) + state_holes


def mamba_slot_full_token_cost(state_bytes: int, full_entry_bytes: int, dcp_size: int = 1) -> int:
    """Full tokens whose bytes one Mamba state slot takes from the shared gap, rounded up
    (``UMB-6``): ``ceil(state_bytes * dcp_size / full_entry_bytes)``.

    pre: 1 <= state_bytes <= MAX_CHECKED and 1 <= full_entry_bytes <= MAX_CHECKED
    pre: 1 <= dcp_size <= 8
    post: __return__ * full_entry_bytes >= state_bytes * dcp_size
    post: (__return__ - 1) * full_entry_bytes < state_bytes * dcp_size
    """
    return -(-state_bytes * dcp_size // full_entry_bytes)


def missing_state_slots(target_slots: int, schedulable_slots: int) -> int:
    """Slots a Mamba admission of ``target_slots`` lacks beyond the state end's schedulable
    view (``UMB-6``); never negative.

    pre: 0 <= target_slots <= MAX_CHECKED and 0 <= schedulable_slots <= MAX_CHECKED
    post: __return__ == max(0, target_slots - schedulable_slots)
    """
    return max(0, target_slots - schedulable_slots)


def full_tokens_before_recheck(missing_slots: int, state_bytes: int, full_entry_bytes: int,
                               dcp_size: int = 1) -> int:
    """Full tokens to free before the next Mamba capacity check can succeed (``UMB-6``): 0 when
    nothing is missing, else ``ceil(((missing - 1) * state_bytes + 1) * dcp / entry_bytes)``.
    The current view may hide at most one slot less one byte of residual room, so the bound
    skips only checks that cannot succeed from full bytes alone.

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
    return -(-((missing_slots - 1) * state_bytes + 1) * dcp_size // full_entry_bytes)
