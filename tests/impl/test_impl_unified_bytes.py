"""The bytes of kvpool's unified full + SWA pool (``UNI-1``, ``UNI-6``, ``DATA-1``, ``DATA-2``).

Every handed-out token's K/V rows get a signature through the write translations (the family's
:class:`~kvpool.oracle.families.unified.store.KVRowStore`: ``translate_write_loc`` on the full
side, ``translate_loc_from_full_to_swa`` on the SWA side); after every call of a random sequence
(frees and window slides compacting pages, eager and lazy) each live token reads its own
signature back through the read translations. Fresh pages read as zeros (hand-out zeroing), the
views lie in the buffer as SGLang lays them out, and ``get_cpu_copy`` / ``load_cpu_copy`` round
trip. A pool that skips a page copy fails.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch
from kvpool.impl.unified_swa import UnifiedSWAAllocator
from kvpool.oracle.families.unified.store import KVRowStore
from kvpool.spec.unified import UnifiedSWAModel
from test_impl_unified import build
from test_impl_unified_sglang import SkipsAPageCopy
from unified_driver import Driver


def stores(a: Any) -> tuple[KVRowStore, KVRowStore]:
    kv = a.get_kvcache()
    return (KVRowStore(kv.full_kv_pool, 1, a.translate_write_loc, a.translate_kv_loc),
            KVRowStore(kv.swa_kv_pool, 2, a.translate_loc_from_full_to_swa,
                       a.translate_loc_from_full_to_swa))


def run(seed: int, ps: int, lazy: bool, steps: int, cls: type = UnifiedSWAAllocator) -> None:
    """Signatures written at hand-out read back intact after every call; AssertionError else."""
    rng = random.Random(seed)
    target, model = build(rng.choice([24, 40, 64]) * ps * 32, ps, lazy, cls)
    driver = Driver(rng, ps, model, [target])
    full, swa = stores(target)
    sig: dict[int, int] = {}
    for i in range(steps):
        name, out = driver.step()
        handed = out[-1] if name in ("alloc", "extend", "decode", "tail") else None
        fresh = [t for t in (handed or []) if t not in sig]
        for t in fresh:
            sig[t] = rng.randrange(1, 1000)
        if fresh:
            x = torch.tensor(fresh)
            data = torch.tensor([[sig[t], t % 1000] for t in fresh])
            full.write(x, data)
            on_swa = [t for t in fresh if t // ps in model.swa.v2p]
            if on_swa:
                swa.write(torch.tensor(on_swa), torch.tensor([[sig[t], t % 1000]
                                                             for t in on_swa]))
        live = [t for t in sig if t // ps in model.full.v2p]
        for t in [t for t in sig if t // ps not in model.full.v2p]:
            del sig[t]
        if not live:
            continue
        want = [[sig[t], t % 1000] for t in live]
        assert full.read(torch.tensor(live)).tolist() == want, f"seed {seed} step {i} {name}"
        bound = [t for t in live if t // ps in model.swa.v2p]
        if bound:
            got = swa.read(torch.tensor(bound)).tolist()
            assert got == [[sig[t], t % 1000] for t in bound], f"seed {seed} step {i} {name} swa"


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("ps", [1, 4, 16])
def test_signatures_survive_compaction(ps: int, lazy: bool) -> None:
    for seed in range(6):
        run(seed, ps, lazy, 60)


def test_a_pool_that_skips_a_page_copy_loses_bytes() -> None:
    with pytest.raises(AssertionError):
        for seed in range(10):
            run(seed, 4, False, 60, SkipsAPageCopy)


def test_views_are_sglangs_layout_and_fresh_pages_read_zero() -> None:
    a = UnifiedSWAAllocator(64 * 4 * 32, 4)
    kv = a.get_kvcache()
    raw = kv.raw
    k, v = kv.full_kv_pool.k_buffer[0], kv.full_kv_pool.v_buffer[0]
    assert k.shape == (64 * 4, 1, 8) and k.dtype == torch.float16
    assert k.stride() == (16, 8, 1) and v.storage_offset() - k.storage_offset() == 8
    raw.fill_(7)
    ids = a.alloc(8)
    assert ids is not None
    rows = a.translate_kv_loc(ids)
    assert (k[rows] == 0).all() and (v[rows] == 0).all()  # zeroed at hand-out
    swa_rows = a.translate_loc_from_full_to_swa(ids)
    assert (kv.swa_kv_pool.k_buffer[0][swa_rows] == 0).all()
    k[rows[0], 0, 0] = 1.5
    byte = int(rows[0]) * 32
    assert raw[byte:byte + 2].view(torch.float16).item() == 1.5


def test_cpu_copy_round_trip() -> None:
    a = UnifiedSWAAllocator(64 * 4 * 32, 4)
    ids = a.alloc(8)
    assert ids is not None
    full, swa = stores(a)
    full.write(ids, torch.stack([ids, ids], dim=1))
    swa.write(ids, torch.stack([ids, ids + 1], dim=1))
    copy = a.get_cpu_copy(ids)
    full.write(ids, torch.zeros(8, 2, dtype=torch.int64))
    swa.write(ids, torch.zeros(8, 2, dtype=torch.int64))
    a.load_cpu_copy(copy, ids)
    assert full.read(ids).tolist() == torch.stack([ids, ids], dim=1).tolist()
    assert swa.read(ids).tolist() == torch.stack([ids, ids + 1], dim=1).tolist()


def test_the_model_and_the_pool_share_their_geometry() -> None:
    a, m = build(40 * 16 * 32, 16, False)
    assert isinstance(m, UnifiedSWAModel)
    for side, pool in (("full", m.full), ("swa", m.swa)):
        state = a.unified_state().sides[side]
        assert (state.num_pages, state.min_page, state.page_bytes) == (
            pool.pages, pool.min_page, pool.page_bytes)
