"""The unified model's decode gate (UNI-15), its idle-time compaction (UNI-6's
``flush_opportunistic``) and the zeroed hand-out rule of the data plane (DATA-4)."""

from __future__ import annotations

import pytest
from kvpool.spec.contract import Divergence
from kvpool.spec.unified import UnifiedSWAModel, fresh_rows_read_zero


def test_the_decode_gate_answers_from_the_joint_view_UNI_15() -> None:
    u = UnifiedSWAModel(640, 1, 32, 32, lazy=False)
    u.alloc(3)
    joint, full = u.available_size(), u.full_available_size()
    assert joint < full  # a side alone could take more than both together
    assert u.check_decode_capacity(joint)
    assert not u.check_decode_capacity(joint + 1)
    assert not u.check_decode_capacity(full)


def test_the_idle_flush_absorbs_frontier_holes_and_moves_toward_the_end_UNI_6() -> None:
    u = UnifiedSWAModel(640, 1, 32, 32, lazy=True)
    row = u.alloc(4)  # swa pages 1..4 (grow up from 5), full pages 16..19 (grow down from 15)
    u.free([row[0], row[3]])  # full holes 16 (at the frontier), 19; swa holes 1, 4 (frontier)
    moved = u.flush_opportunistic()
    assert moved == 2  # each side: absorbs its frontier hole, moves one page into the other
    assert (u.full.span_pages(), u.swa.span_pages()) == (3, 3)  # the frontier kept after that
    assert u.full.holes == [17] and u.swa.holes == [3]  # the moved-from pages are holes now
    assert u.translate(row[1:3]) == [19, 18] and u.translate(row[1:3], "swa") == [2, 1]
    assert u.census() == []
    assert u.flush_opportunistic() == 0  # both holes touch the frontier now: absorbed
    assert (u.full.span_pages(), u.swa.span_pages()) == (2, 2) and not u.swa.holes


def test_the_idle_flush_does_nothing_when_eager_or_gated_UNI_6() -> None:
    eager = UnifiedSWAModel(640, 1, 32, 32, lazy=False)
    eager.free(eager.alloc(2)[:1])
    assert eager.flush_opportunistic() == 0
    gated = UnifiedSWAModel(640, 1, 32, 32, lazy=True)
    gated.free(gated.alloc(3)[:1])
    gated.moves_blocked = True
    assert gated.flush_opportunistic() == 0 and gated.swa.holes == [1]


def test_a_fresh_slot_must_read_as_zeros_DATA_4() -> None:
    fresh_rows_read_zero([4, 5], [False, False], "full")
    with pytest.raises(Divergence, match="token 5") as err:
        fresh_rows_read_zero([4, 5, 6], [False, True, True], "swa")
    assert err.value.clause == "DATA-4"
