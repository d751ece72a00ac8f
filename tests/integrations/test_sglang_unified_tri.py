"""kvpool's tri-pool inside SGLang (``kvpool.integrations.sglang_unified_tri``): ``install()``
makes SGLang's own ``init_unified_mamba_swa_pools`` (through its CPU fixture ``build_tri_pool``)
build it over SGLang's ``UnifiedKVPool`` / ``UnifiedSWAKVPool`` / ``UnifiedMambaPool``, with
SGLang's request pool driving its state end; under one random sequence of requests, window
releases and state slots, every live token's K/V and every live state slot's bytes stay intact
in SGLang's buffer while compaction moves them, and every result, view and scheduler hook agrees
with SGLang's own tri-pool."""

from __future__ import annotations

import random
import types
from typing import Any

import pytest
import torch
from served import assert_serves_sglangs_surface

pytestmark = pytest.mark.peers


@pytest.fixture(scope="module")
def parts(sglang_runtime: dict[str, types.ModuleType]) -> Any:
    from kvpool.oracle.families.unified.peer import load_unified

    fixtures = load_unified()
    import kvpool.integrations.sglang as ks
    import kvpool.integrations.sglang_unified_tri as kt
    import sglang.srt.mem_cache.allocator.unified_hybrid_swa as site

    return types.SimpleNamespace(ks=ks, kt=kt, site=site, fixtures=fixtures)


def build(parts: Any, *, kvpool: bool, page_size: int, lazy: bool) -> tuple[Any, Any]:
    """SGLang's pool bundle and its allocator, from SGLang's own builder (after
    ``install()`` when ``kvpool``)."""
    if not kvpool:
        return parts.fixtures.build_tri_pool(page_size=page_size, lazy=lazy)  # type: ignore[no-any-return]
    with parts.ks.using_kvpool():
        return parts.fixtures.build_tri_pool(page_size=page_size, lazy=lazy)  # type: ignore[no-any-return]


def test_install_builds_kvpools_tri_pool(parts: Any) -> None:
    original = parts.site.UnifiedMambaSWATokenToKVPoolAllocator
    assert not parts.ks.installed()
    bundle, alloc = build(parts, kvpool=True, page_size=4, lazy=True)
    assert type(alloc) is parts.kt.UnifiedMambaSWATokenToKVPoolAllocator
    assert isinstance(alloc, parts.site.UnifiedSWAAllocatorBase)
    assert parts.site.UnifiedMambaSWATokenToKVPoolAllocator is original
    _, theirs = build(parts, kvpool=False, page_size=4, lazy=True)
    assert type(theirs) is original
    # SGLang's request pool drives kvpool's state end; its Mamba pool holds the state bytes
    slots = bundle.req_to_token_pool.mamba_allocator
    assert slots._multi_ended_allocator is alloc.mamba_allocator
    assert alloc.mamba_kvcache is bundle.req_to_token_pool.mamba_pool
    assert alloc.get_kvcache() is bundle.token_to_kv_pool
    assert alloc.mamba_full_cache_donor() is alloc


def test_every_public_attribute_of_sglangs_tri_pool_is_served(parts: Any) -> None:
    """All but ``TRI_NOT_SERVED``, which no SGLang code outside its allocator package reads;
    the state end has every attribute SGLang's request pool and scheduler read of SGLang's."""
    bundle, mine = build(parts, kvpool=True, page_size=1, lazy=False)
    _, theirs = build(parts, kvpool=False, page_size=1, lazy=False)
    assert_serves_sglangs_surface(theirs, mine, parts.kt.TRI_NOT_SERVED)
    read = ("virtual_to_physical", "allocated_count", "schedulable_available_size",
            "available_size", "page_size", "grow_direction", "watermark_physical", "num_pages",
            "min_page_index", "alloc", "free", "clear", "is_slot_allocated",
            "allocator_state_str", "entry_bytes", "entry_bytes_per_page", "max_slots")
    assert [n for n in read if not hasattr(mine.mamba_allocator, n)] == []
    slots = bundle.req_to_token_pool.mamba_allocator
    taken = slots.alloc(3)
    assert mine.mamba_allocator.is_slot_allocated(int(taken[0]))
    assert mine.mamba_allocator.allocated_count() == 3
    assert sorted(slots.free_slots.tolist()) == list(
        range(mine.mamba_allocator.watermark_physical, mine.mamba_allocator.num_pages))
    slots.clear()
    assert mine.mamba_allocator.allocated_count() == 0 == mine.state.live


class Bytes:
    """Signatures in SGLang's buffers: a token's in layer 0's K row of each side (two int16
    elements), a state slot's in the first eight bytes of its Mamba entry."""

    def __init__(self, bundle: Any, alloc: Any) -> None:
        self.alloc, self.kv = alloc, bundle.token_to_kv_pool
        self.state_pool = bundle.req_to_token_pool.mamba_pool
        self.slots = bundle.req_to_token_pool.mamba_allocator

    def _rows(self, ids: torch.Tensor, side: str) -> tuple[torch.Tensor, torch.Tensor]:
        if side == "full":
            return self.kv.full_kv_pool.k_buffer[0], self.alloc.translate_kv_loc(ids)
        return self.kv.swa_kv_pool.k_buffer[0], self.alloc.translate_loc_from_full_to_swa(ids)

    def write_tokens(self, ids: torch.Tensor, sig: torch.Tensor, side: str) -> None:
        buffer, rows = self._rows(ids, side)
        buffer.view(torch.int16)[rows, 0, :2] = torch.stack((sig % 30000, sig // 30000), 1).to(
            torch.int16)

    def read_tokens(self, ids: torch.Tensor, side: str) -> torch.Tensor:
        buffer, rows = self._rows(ids, side)
        pair = buffer.view(torch.int16)[rows, 0, :2].to(torch.int64)
        return pair[:, 0] + pair[:, 1] * 30000

    def _entries(self, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.state_pool._entry_view(), self.slots.translate(slots)

    def write_state(self, slots: torch.Tensor, sig: torch.Tensor) -> None:
        entries, physical = self._entries(slots)
        entries[physical, :8] = sig.to(torch.int64).view(torch.uint8).view(-1, 8)

    def read_state(self, slots: torch.Tensor) -> torch.Tensor:
        entries, physical = self._entries(slots)
        return entries[physical, :8].contiguous().view(torch.int64).view(-1)


def hooks(alloc: Any, ps: int) -> tuple[Any, ...]:
    """SGLang's scheduler-facing hooks and views at a few demands."""
    out: list[Any] = [alloc.available_size(), alloc.full_available_size(),
                      alloc.swa_available_size(), alloc.mamba_allocator.available_size(),
                      alloc.mamba_allocator.schedulable_available_size()]
    for tokens in (ps, 8 * ps, 40 * ps):
        out += [alloc.can_reserve(tokens, tokens), alloc.can_reserve(tokens, 0),
                alloc.prealloc_fits(None, tokens, tokens, full_budget_tokens=10 ** 6),
                alloc.full_tokens_before_mamba_recheck(tokens // ps)]
    return tuple(out)


def drive(parts: Any, *, seed: int, ps: int, lazy: bool, steps: int,
          break_state_moves: bool = False) -> int:
    """kvpool's tri-pool inside SGLang and SGLang's own under one random sequence: results,
    views and hooks agree after every call, and every live signature reads back from kvpool's
    bundle. Returns the state slot copies kvpool issued."""
    rng = random.Random(seed)
    (ours_b, ours), (theirs_b, theirs) = (build(parts, kvpool=k, page_size=ps, lazy=lazy)
                                          for k in (True, False))
    moved = [0]
    move = ours.mamba_kvcache.move_physical_pages

    def counting(dst: torch.Tensor, src: torch.Tensor, page_size: int) -> None:
        moved[0] += len(dst)
        if not break_state_moves:
            move(dst, src, page_size)

    ours.mamba_kvcache.move_physical_pages = counting
    data = Bytes(ours_b, ours)
    pools = ((ours_b, ours), (theirs_b, theirs))
    rows: list[tuple[torch.Tensor, int]] = []  # a request's ids and its SWA-released tokens
    states: list[torch.Tensor] = []
    for step in range(steps):
        pick, where = rng.random(), f"seed {seed} step {step}"
        if pick < 0.35:
            need = rng.randrange(1, 24) * ps
            got = [a.alloc(need) for _, a in pools]
            assert (got[0] is None) == (got[1] is None), where
            if got[0] is not None:
                assert got[0].tolist() == got[1].tolist(), where
                for side in ("full", "swa"):
                    data.write_tokens(got[0], got[0], side)
                rows.append((got[0], 0))
        elif pick < 0.55 and rows:
            ids, _ = rows.pop(rng.randrange(len(rows)))
            for _, a in pools:
                a.free(ids.sort().values)
        elif pick < 0.7 and rows:
            k = rng.randrange(len(rows))
            ids, done = rows[k]
            upto = min(len(ids), done + rng.randrange(1, 4) * ps)
            if upto > done:
                for _, a in pools:
                    a.free_swa(ids[done:upto].sort().values)
                rows[k] = (ids, upto)
        elif pick < 0.88:
            count = rng.randrange(1, 4)
            got = [b.req_to_token_pool.mamba_allocator.alloc(count) for b, _ in pools]
            assert (got[0] is None) == (got[1] is None), where
            if got[0] is not None:
                assert got[0].tolist() == got[1].tolist(), where
                data.write_state(got[0], 1000 + got[0])
                states.append(got[0])
        elif states:
            slots = states.pop(rng.randrange(len(states))).sort().values
            for b, _ in pools:
                b.req_to_token_pool.mamba_allocator.free(slots)
        assert hooks(ours, ps) == hooks(theirs, ps), f"{where}: views or hooks differ"
        for ids, done in rows:
            assert data.read_tokens(ids, "full").tolist() == ids.tolist(), f"{where}: full K/V"
            live = ids[done:]
            assert data.read_tokens(live, "swa").tolist() == live.tolist(), f"{where}: SWA K/V"
        for slots in states:
            assert data.read_state(slots).tolist() == (1000 + slots).tolist(), f"{where}: state"
        assert ours.verify_byte_accounting() == []
    return moved[0]


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_every_token_and_state_byte_survives_inside_sglang(parts: Any, page_size: int,
                                                          lazy: bool) -> None:
    moved = sum(drive(parts, seed=seed, ps=page_size, lazy=lazy, steps=120)
                for seed in range(3))
    assert moved > 0  # state slots were compacted under the bytes


def test_state_moves_that_skip_sglangs_pool_fail_the_byte_check(parts: Any) -> None:
    """kvpool's state end whose slot copies never reach SGLang's Mamba pool: a live state's
    bytes are lost."""
    with pytest.raises(AssertionError, match="state"):
        for seed in range(3):
            drive(parts, seed=seed, ps=4, lazy=False, steps=120, break_state_moves=True)
