"""kvpool's unified pools with a Mamba state end inside SGLang: the tri-pool
(``kvpool.integrations.sglang_unified_tri``, full + SWA + state) and the full + Mamba pool
(``kvpool.integrations.sglang_unified_mamba``). ``install()`` makes SGLang's own factories
(``init_unified_mamba_swa_pools`` through its CPU fixture ``build_tri_pool``;
``init_unified_mamba_pools``) build them over SGLang's ``UnifiedKVPool``, its K/V pools and its
``UnifiedMambaPool``, with SGLang's request pool driving their state end. Under one random
sequence of requests, window releases (tri-pool) and state slots, every live token's K/V and
every live state slot's bytes stay intact in SGLang's buffers while compaction moves them, and
every result, capacity view and scheduler hook agrees with SGLang's own composite
(:mod:`unified_drive`)."""

from __future__ import annotations

import random
import types
from typing import Any

import pytest
from served import assert_serves_sglangs_surface
from unified_drive import drive

pytestmark = pytest.mark.peers

MAMBA_BUFFER_BYTES = 4096  # the full + Mamba pool's token budget a page; SGLang adds the slots'


@pytest.fixture(scope="module")
def parts(sglang_runtime: dict[str, types.ModuleType]) -> Any:
    from kvpool.oracle.families.unified.peer import load_unified
    from kvpool.oracle.families.unified_mamba import peer as mamba_peer

    fixtures = load_unified()
    import kvpool.integrations.sglang as ks
    import kvpool.integrations.sglang_unified_mamba as km
    import kvpool.integrations.sglang_unified_tri as kt
    import sglang.srt.mem_cache.allocator.unified_hybrid_swa as tri_site
    import sglang.srt.mem_cache.allocator.unified_mamba as mamba_site

    return types.SimpleNamespace(
        ks=ks, fixtures=fixtures, mamba_peer=mamba_peer,
        tri=types.SimpleNamespace(ours=kt.UnifiedMambaSWATokenToKVPoolAllocator,
                                  site=tri_site, name="UnifiedMambaSWATokenToKVPoolAllocator",
                                  not_served=kt.TRI_NOT_SERVED),
        mamba=types.SimpleNamespace(ours=km.UnifiedMambaTokenToKVPoolAllocator,
                                    site=mamba_site, name="UnifiedMambaTokenToKVPoolAllocator",
                                    not_served=km.MAMBA_NOT_SERVED))


def build(parts: Any, pool: str, *, kvpool: bool, page_size: int, lazy: bool
          ) -> tuple[Any, Any]:
    """SGLang's pool bundle and its allocator from SGLang's own factory for ``pool``
    (``"tri"`` or ``"mamba"``), after ``install()`` when ``kvpool``."""
    def bundle() -> Any:
        if pool == "tri":
            return parts.fixtures.build_tri_pool(page_size=page_size, lazy=lazy)[0]
        return parts.mamba_peer.build_unified_mamba_bundle(
            total_bytes=MAMBA_BUFFER_BYTES * page_size, page_size=page_size, lazy=lazy)

    if kvpool:
        with parts.ks.using_kvpool():
            made = bundle()
    else:
        made = bundle()
    return made, made.token_to_kv_pool_allocator


def views(alloc: Any, ps: int) -> tuple[Any, ...]:
    """The capacity views (the state end's two too) and SGLang's scheduler-facing hooks at a
    few demands: the state recheck bound, and on the tri-pool ``can_reserve`` and
    ``prealloc_fits``."""
    out: list[Any] = [alloc.available_size(), alloc.full_available_size(),
                      alloc.mamba_allocator.available_size(),
                      alloc.mamba_allocator.schedulable_available_size(),
                      alloc.mamba_slot_full_token_cost()]
    for state_slots in (1, 8, 60, 150):
        out.append(alloc.full_tokens_before_mamba_recheck(state_slots))
    if hasattr(alloc, "swa_available_size"):
        out.append(alloc.swa_available_size())
        for tokens in (ps, 8 * ps, 40 * ps):
            out += [alloc.can_reserve(tokens, tokens), alloc.can_reserve(tokens, 0),
                    alloc.prealloc_fits(None, tokens, tokens, full_budget_tokens=10 ** 6)]
    return tuple(out)


def run(parts: Any, pool: str, *, seed: int, ps: int, lazy: bool,
        break_state_moves: bool = False) -> int:
    return drive(lambda kvpool: build(parts, pool, kvpool=kvpool, page_size=ps, lazy=lazy),
                 lambda alloc: views(alloc, ps), seed=seed, ps=ps, steps=120,
                 swa=pool == "tri", break_state_moves=break_state_moves)


POOLS = ["tri", "mamba"]


@pytest.mark.parametrize("pool", POOLS)
def test_install_builds_kvpools_pool(parts: Any, pool: str) -> None:
    kind = getattr(parts, pool)
    original = getattr(kind.site, kind.name)
    assert not parts.ks.installed()
    bundle, alloc = build(parts, pool, kvpool=True, page_size=4, lazy=True)
    assert type(alloc) is kind.ours
    assert getattr(kind.site, kind.name) is original  # restored on leaving using_kvpool()
    _, theirs = build(parts, pool, kvpool=False, page_size=4, lazy=True)
    assert type(theirs) is original
    # SGLang's request pool drives kvpool's state end; SGLang's pools hold the bytes
    assert bundle.req_to_token_pool.mamba_allocator._multi_ended_allocator is (
        alloc.mamba_allocator)
    assert alloc.get_kvcache() is bundle.token_to_kv_pool
    assert alloc.mamba_full_cache_donor() is alloc
    assert (alloc.size, alloc.available_size()) == (theirs.size, theirs.available_size())
    if pool == "tri":
        assert isinstance(alloc, kind.site.UnifiedSWAAllocatorBase)
    else:
        assert alloc.full_attn_allocator.entry_bytes == theirs.full_attn_allocator.entry_bytes


@pytest.mark.parametrize("pool", POOLS)
def test_every_public_attribute_of_sglangs_composite_is_served(parts: Any, pool: str) -> None:
    """All but the class's ``*_NOT_SERVED``, which no SGLang code outside its allocator package
    reads; the state end has every attribute SGLang's request pool, scheduler and invariant
    checker read of SGLang's."""
    bundle, mine = build(parts, pool, kvpool=True, page_size=1, lazy=False)
    _, theirs = build(parts, pool, kvpool=False, page_size=1, lazy=False)
    assert_serves_sglangs_surface(theirs, mine, getattr(parts, pool).not_served)
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


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("page_size", [1, 4, 16])
@pytest.mark.parametrize("pool", POOLS)
def test_every_token_and_state_byte_survives_inside_sglang(parts: Any, pool: str,
                                                          page_size: int, lazy: bool) -> None:
    moved = sum(run(parts, pool, seed=seed, ps=page_size, lazy=lazy) for seed in range(3))
    assert moved > 0  # state slots were compacted under the bytes


@pytest.mark.parametrize("pool", POOLS)
def test_state_moves_that_skip_sglangs_pool_fail_the_byte_check(parts: Any, pool: str) -> None:
    """kvpool's state end whose slot copies never reach SGLang's Mamba pool: a live state's
    bytes are lost."""
    with pytest.raises(AssertionError, match="state"):
        for seed in range(3):
            run(parts, pool, seed=seed, ps=4, lazy=False, break_state_moves=True)


@pytest.mark.parametrize("pool", POOLS)
def test_full_page_moves_that_skip_sglangs_pool_fail_the_byte_check(parts: Any,
                                                                    pool: str) -> None:
    """kvpool's full end whose page copies never reach SGLang's K/V pool: a live token's K/V
    is lost."""
    def broken(kvpool: bool) -> tuple[Any, Any]:
        bundle, alloc = build(parts, pool, kvpool=kvpool, page_size=4, lazy=False)
        if kvpool:
            bundle.token_to_kv_pool.full_kv_pool.move_physical_pages = lambda d, s, p: None
        return bundle, alloc

    with pytest.raises(AssertionError, match="full K/V"):
        for seed in range(3):
            drive(broken, lambda alloc: views(alloc, 4), seed=seed, ps=4, steps=120,
                  swa=pool == "tri")


def evictions(parts: Any, *, kvpool: bool, lazy: bool, seed: int) -> list[Any]:
    """The tri-pool under SGLang's own ``UnifiedRadixCache`` (FULL, SWA and MAMBA components,
    SGLang's ``build_tri_cache``): requests of random lengths with one or two state slots, most
    inserted into the tree with their first slot (their others released), then six
    ``evict_to_free_tokens`` calls around ``available_size()``. Returns every result and view."""
    from array import array

    from sglang.srt.mem_cache.base_prefix_cache import InsertParams
    from sglang.srt.mem_cache.radix_cache import RadixKey

    rng = random.Random(seed)
    # SGLang's CPU allocator context (its Mamba tree component reads the chunk size from it);
    # a serving replay run earlier in the process publishes another one
    parts.fixtures.setup_allocator_context()
    if kvpool:
        with parts.ks.using_kvpool():
            bundle, alloc, cache = parts.fixtures.build_tri_cache(page_size=1, lazy=lazy)
    else:
        bundle, alloc, cache = parts.fixtures.build_tri_cache(page_size=1, lazy=lazy)
    slots, log = bundle.req_to_token_pool.mamba_allocator, []
    for i in range(rng.randrange(20, 70)):
        tokens = alloc.alloc(rng.randrange(1, 4) if rng.random() < 0.5 else rng.randrange(1, 12))
        state = slots.alloc(rng.randrange(1, 3))
        log.append((tokens is None, state is None))
        if tokens is not None and state is not None and rng.random() < 0.7:
            key = RadixKey(array("q", range(i * 1000, i * 1000 + len(tokens))))
            cache.insert(InsertParams(key=key, value=tokens, mamba_value=state[:1]))
            if len(state) > 1:
                slots.free(state[1:])
    for _ in range(6):
        need = max(1, alloc.available_size() + rng.randrange(-3, 40))
        log.append((need, alloc.evict_to_free_tokens(cache, need), views(alloc, 1),
                    cache.full_evictable_size(), cache.mamba_evictable_size()))
    return log


@pytest.mark.parametrize("lazy", [False, True])
def test_the_tri_pools_eviction_inside_sglang_is_sglangs(parts: Any, lazy: bool) -> None:
    """``evict_to_free_tokens`` on SGLang's radix cache: the same refusals (ids, SWA room and
    bytes counted with everything evictable), the same token then state eviction phases, the
    same results and views as SGLang's tri-pool."""
    for seed in range(15):
        ours = evictions(parts, kvpool=True, lazy=lazy, seed=seed)
        assert ours == evictions(parts, kvpool=False, lazy=lazy, seed=seed), f"seed {seed}"


@pytest.mark.parametrize(("family", "target", "examples", "clauses"), [
    ("unified", "kvpool-unified-in-sglang", 20, "18 of 18"),
    ("unified", "kvpool-unified-tri-in-sglang", 20, "20 of 20"),
    ("unified_mamba", "kvpool-unified-mamba-in-sglang", 30, "9 of 9"),
])
def test_the_families_judge_kvpools_pools_built_by_sglang_conformant(
        parts: Any, capsys: pytest.CaptureFixture[str], family: str, target: str,
        examples: int, clauses: str) -> None:
    """kvpool's pools as SGLang's factories build them after ``install()``: the unified
    families find them conformant, eager and lazy at page sizes 1, 4 and 16, with every page
    copy, zeroing and K/V byte they check going through SGLang's pools, every reachable event
    reached and every expected clause exercised."""
    from kvpool.oracle.entry import cli

    assert cli.main(["--family", family, target, "--examples", str(examples),
                     "--require-coverage"]) == 0
    out = capsys.readouterr().out
    assert "coverage gate: every reachable event reached" in out
    assert f"{clauses} expected clauses exercised" in out, out[-2000:]
