"""UNI-14: beyond ``available_size()``, whether a tri-pool grants an allocation is placement, not a
function of the float chain's frontiers, so the family judges those refusals as a bound.

One call sequence brings a tri-pool (page size 1, eager) twice to the same float chain (every
frontier, hole count and live count equal) with the float's holes at other pages; ``alloc(22)``,
more than ``available_size()`` either time, is granted at the first and refused at the second:
the float's boundary pages can retreat onto holes below them only where such holes sit. Shown on
kvpool's tri-pool, and on SGLang 0.5.23's where it is installed (the same outcomes).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from kvpool.oracle.families.unified.float_views import chain_of
from kvpool.oracle.families.unified.kvpool_target import kvpool_unified_tri
from kvpool.oracle.families.unified.peer_state import set_state_slots, state_of
from kvpool.oracle.peers.availability import require_installed

SEED, STEPS, ASK = 6, (36, 39), 22


def replay(a: Any, steps: int) -> None:
    """The call sequence of seed :data:`SEED` on tri-pool ``a`` (page size 1), ``steps + 1``
    calls: allocs, frees, window slides and state-slot counts."""
    rng, rows = random.Random(SEED), []
    for _ in range(steps + 1):
        pick = rng.random()
        if pick < 0.45:
            out = a.alloc(rng.randrange(1, 30))
            if out is not None:
                rows.append(out)
        elif pick < 0.7 and rows:
            a.free(rows.pop(rng.randrange(len(rows))))
        elif pick < 0.9 and rows:
            row = rows[rng.randrange(len(rows))]
            head = row[: rng.randrange(1, len(row) + 1)]
            if set(head.tolist()) <= set(state_of(a).sides["swa"].bindings):
                a.free_swa(head)
        else:
            set_state_slots(a, rng.randrange(0, 4))


def outcomes(build: Any) -> list[tuple[Any, int, bool]]:
    """At each of :data:`STEPS`, on a fresh pool: the chain, ``available_size()`` and whether
    ``alloc(ASK)`` was granted."""
    out = []
    for steps in STEPS:
        a = build(total_bytes=0, page_size=1, lazy=False)
        replay(a, steps)
        out.append((chain_of(a), int(a.available_size()), a.alloc(ASK) is not None))
    return out


def check(build: Any) -> None:
    (chain_a, avail_a, granted_a), (chain_b, avail_b, granted_b) = outcomes(build)
    assert chain_a == chain_b and not chain_a.transparent and chain_a.swa_holes > 0
    assert ASK > avail_a == avail_b
    assert (granted_a, granted_b) == (True, False)


def test_kvpool_tri_pool_grants_by_placement_beyond_available_size_UNI_14() -> None:
    check(kvpool_unified_tri)


def test_sglang_tri_pool_grants_by_placement_beyond_available_size_UNI_14() -> None:
    require_installed("sglang")
    from kvpool.oracle.families.unified.targets import sglang_unified_tri

    check(sglang_unified_tri)


@pytest.mark.parametrize("steps", STEPS)
def test_the_two_states_hold_the_float_holes_at_other_pages(steps: int) -> None:
    a = kvpool_unified_tri(total_bytes=0, page_size=1, lazy=False)
    replay(a, steps)
    assert a.swa.num_holes() > 0
    holes = {s: sorted(a.swa.holes.tolist()) for s in STEPS if s == steps}
    other = kvpool_unified_tri(total_bytes=0, page_size=1, lazy=False)
    replay(other, STEPS[0] if steps == STEPS[1] else STEPS[1])
    assert holes[steps] != sorted(other.swa.holes.tolist())
