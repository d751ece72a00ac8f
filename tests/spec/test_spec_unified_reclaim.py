"""The unified composite's eviction plan (``UnifiedSWAModel.reclaim_plan``, UNI-8) and the
oracle's prefix-cache stand-in for it (``oracle/families/unified/cache.py``), without SGLang.

The plan is checked against its definition by brute force on small states of both modes: the
least SWA reclaim that fits with all the full reclaim allowed, then the least full reclaim with
that SWA reclaim; ``(0, 0)`` exactly when the pages fit after compaction, None exactly when even
every evictable page does not make them fit.
"""

from __future__ import annotations

import random

import pytest
from kvpool.oracle.families.unified.cache import SWACache, evict_spec
from kvpool.spec.unified import UnifiedSWAModel


def _random_state(seed: int, lazy: bool, ps: int) -> UnifiedSWAModel:
    rng = random.Random(seed)
    m = UnifiedSWAModel(32 * ps * rng.randint(8, 20), ps, 32, 32, lazy=lazy)
    rows = []
    for _ in range(rng.randint(1, 8)):
        row = m.alloc(ps * rng.randint(1, 3))
        if row is not None:
            rows.append(row)
        if rows and rng.random() < 0.3:
            m.free(rows.pop(rng.randrange(len(rows))))
        if rows and rng.random() < 0.3:
            m.free_swa(rows[rng.randrange(len(rows))][:ps])
    return m


@pytest.mark.parametrize(("lazy", "blocked"), [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("ps", [1, 4])
def test_the_plan_is_the_least_reclaim_that_fits_UNI_8(lazy: bool, blocked: bool,
                                                       ps: int) -> None:
    """``blocked``: a move gate is closed, released pages count as holes where they are."""
    for seed in range(40):
        m = _random_state(seed, lazy, ps)
        m.moves_blocked = blocked

        def fits(n: int, f: int, s: int, m: UnifiedSWAModel = m) -> bool:
            return m.fits_after_reclaim(n, f, s, compacted=not blocked)

        for need in range(0, 4 * ps * 4, ps):
            for full_e, swa_e in ((0, 0), (3 * ps, 0), (40 * ps, 40 * ps), (2 * ps + 1, ps)):
                plan = m.reclaim_plan(need, full_e, swa_e)
                n = -(-need // ps)
                most_f = min(len(m.full.v2p), full_e // ps)
                most_s = min(len(m.swa.v2p), swa_e // ps)
                assert fits(n, 0, 0) == m.fits(n, compacted=not blocked)
                if fits(n, 0, 0):
                    assert plan == (0, 0)
                    continue
                if not fits(n, most_f, most_s):
                    assert plan is None
                    continue
                assert plan is not None
                f, s = plan[0] // ps, plan[1] // ps
                assert plan == (f * ps, s * ps) and f <= most_f and s <= most_s
                assert fits(n, f, s)
                assert s == 0 or not fits(n, most_f, s - 1)
                assert f == 0 or not fits(n, f - 1, s)


def test_the_cache_evicts_oldest_rows_then_swa_pages() -> None:
    m = UnifiedSWAModel(32 * 20, 1, 32, 32, lazy=False)
    a, b, c = m.alloc(3), m.alloc(2), m.alloc(2)
    assert a is not None and b is not None and c is not None
    cache = SWACache(m, [(a, 0), (b, 0), (c, 0)], tensors=False)
    assert (cache.full_evictable_size(), cache.swa_evictable_size()) == (7, 7)
    cache.evict_for_alloc(type("P", (), {"num_tokens": 2, "swa_num_tokens": 5})())
    assert cache.requests == [(2, 5)]
    assert sorted(m.full.v2p) == b + c  # the oldest row went whole
    assert sorted(m.swa.v2p) == c  # then the next row's SWA pages
    assert (cache.full_evictable_size(), cache.swa_evictable_size()) == (4, 2)


def test_the_hook_evicts_the_plan_then_gates_UNI_8() -> None:
    m = UnifiedSWAModel(32 * 20, 1, 32, 32, lazy=True)
    a, b = m.alloc(6), m.alloc(3)
    assert a is not None and b is not None
    assert evict_spec(m, 12, []) == (None, [])  # nothing evictable: refused, nothing asked
    plan = m.reclaim_plan(6, 6, 6)
    assert plan == (6, 5)
    assert evict_spec(m, 6, [(a, 0)]) == (True, [plan])  # the row went whole, then compaction
    assert sorted(m.full.v2p) == b and m.fits(6, compacted=False)
