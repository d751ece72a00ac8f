"""The unified pool's fast paths agree with their plain forms: short distinct sets, host page
copies and zeroing of whole pages, grouped frees validated without deduplication, and the lazy
flush's frontier holes found from the ends of the sorted holes."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from kvpool.impl.unified_end import EndSubPool
from kvpool.impl.unified_frees import small_distinct
from kvpool.impl.unified_store import DEFAULT_LAYOUT, UnifiedByteStore
from kvpool.impl.unified_swa import UnifiedSWAAllocator
from kvpool.spec.errors import ContractViolation


@pytest.mark.parametrize("n", [0, 1, 5, 31, 32, 63, 200])
def test_small_distinct_is_unique(n: int) -> None:
    rng = np.random.default_rng(n)
    values = rng.integers(0, max(1, n // 2 + 1), size=n).astype(np.int64)
    got = small_distinct(values)
    assert got.dtype == np.int64
    assert got.tolist() == np.unique(values).tolist()


@pytest.mark.parametrize("ps", [1, 4])
def test_host_page_copy_and_zeroing_move_whole_pages(ps: int) -> None:
    store = UnifiedByteStore(4096, ps, DEFAULT_LAYOUT, DEFAULT_LAYOUT)
    pool = store.full_kv_pool
    store.raw.copy_(torch.arange(4096, dtype=torch.int64).to(torch.uint8))
    expect = pool.host_pages.copy()
    src, dst = np.array([7, 2, 9]), np.array([1, 3, 4])
    assert pool.move_host_pages(dst, src)
    expect[dst] = expect[src]
    assert np.array_equal(pool.host_pages, expect)
    scattered = np.array([8, 2, 5])
    pool.zero_physical_pages(scattered)
    expect[scattered] = 0
    assert np.array_equal(pool.host_pages, expect)


def test_a_grouped_free_named_twice_frees_once_and_checks_at_the_call() -> None:
    a = UnifiedSWAAllocator(2 * 65 * 32, 1)
    row = a.alloc(8)
    assert row is not None
    before = a.available_size()
    a.free_group_begin()
    a.free(row[[3, 1, 3, 0]])
    a.free(row[[1, 2]])
    with pytest.raises(ContractViolation):
        a.free(torch.tensor([60], dtype=torch.int64))  # never allocated
    a.free_group_end()
    assert a.available_size() == before + 4
    assert a.free_virtual[-4:].tolist() == sorted(row[:4].tolist())
    a.check_invariants()


@pytest.mark.parametrize("grows_up", [True, False])
def test_lazy_flush_absorbs_exactly_the_frontier_holes(grows_up: bool) -> None:
    rng = random.Random(5)
    for _ in range(200):
        pool = EndSubPool("swa" if grows_up else "full", grows_up, 1, 64, 32, 64, True,
                          lambda dst, src: None)
        count = rng.randint(1, 40)
        phys = pool.take(count)
        pool.bind(np.arange(count, dtype=np.int64), phys)
        released = np.array(sorted(rng.sample(range(count), rng.randint(1, count))))
        pool.release(released)
        holes = set(pool.holes.tolist())
        wm = pool.watermark
        edge = 0  # a reference count of the holes touching the frontier
        while (wm - 1 - edge if grows_up else wm + 1 + edge) in holes:
            edge += 1
        live_before = pool.live
        moves = pool.flush(urgent=False)
        assert pool.watermark == (wm - edge if grows_up else wm + edge)
        assert pool.live == live_before
        assert pool.census() == []
        assert moves <= len(holes) - edge
