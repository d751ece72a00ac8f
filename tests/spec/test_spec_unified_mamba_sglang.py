"""SGLang 0.5.23's ``UnifiedMambaTokenToKVPoolAllocator`` agrees with ``UnifiedMambaModel``.

Both are built over the same buffer (SGLang's by its own pool builder on the CPU,
``kvpool.oracle.families.unified_mamba.peer``) and driven by the same seeded random call
sequences (:mod:`unified_mamba_drive`): allocs, extends of fresh and growing rows, decodes at page
size > 1, frees and segment frees in any order, free groups (with ``prepare_mamba_allocation``
inside), state slot allocs and frees through ``a.mamba_allocator``, lazy ``flush_opportunistic``
and a disaggregation move gate, ``clear``. After every call the results, ``available_size`` /
``full_available_size`` / ``size`` (UMB-1, UMB-2, UMB-3), the state views and slot ids (UMB-4,
UMB-5), the recheck bound (UMB-6), each end's frontier and holes and the row of every live token
(UMB-7, both compaction modes) and the census's verdict (UMB-8) are equal. Skipped where SGLang
is not installed.
"""

from __future__ import annotations

import pytest
from kvpool.oracle.peers.availability import require_installed

CASES = [(ps, lazy, total) for ps in (1, 4, 16) for lazy in (False, True)
         for total in (2000, 3000, 8000)]
SEEDS = (0, 1)
STEPS = 200


@pytest.mark.parametrize(("page_size", "lazy", "total_bytes"), CASES)
def test_sglang_agrees_with_the_model_call_by_call_UMB_1_to_UMB_8(
        page_size: int, lazy: bool, total_bytes: int) -> None:
    """Every compared quantity is equal after every call of every sequence."""
    require_installed("sglang")
    from unified_mamba_drive import run

    compared = 0
    for seed in SEEDS:
        calls, mismatches = run(seed, total_bytes, page_size, lazy, STEPS)
        assert not mismatches, mismatches[0]
        compared += calls
    assert compared >= len(SEEDS) * STEPS // 2  # most steps are calls that were compared


def test_a_full_end_short_of_room_relieves_the_state_end_UMB_3_UMB_5() -> None:
    """A lazy token alloc past what full takes without relief compacts the state end's holes
    in SGLang as in the model, and both then grant it."""
    require_installed("sglang")
    from unified_mamba_drive import _ids, _t, observe, pair

    a, m = pair(3000, 4, True)
    slots = _ids(a.mamba_allocator.alloc(6))
    assert slots is not None and slots == m.alloc_state(6)
    a.mamba_allocator.free(_t(slots[:5]))
    m.free_state(slots[:5])
    n = m.available_size()
    assert n > m.full_now_tokens()
    assert _ids(a.alloc(n)) == m.alloc(n)
    assert m.state.holes == []
    seen = observe(a, m, [])
    assert all(x == y for x, y in seen.values()), seen
