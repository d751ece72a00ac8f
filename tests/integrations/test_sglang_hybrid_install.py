"""kvpool.integrations.sglang_hybrid: SGLang's configurator builds kvpool's hybrid (SWA) allocator
for hybrid SWA models once ``install()`` ran, on SGLang's own base class, with SGLang's
scheduler-facing hooks; every attribute SGLang reads through a hybrid allocator is served."""

from __future__ import annotations

import types
from typing import Any
from unittest import mock

import pytest
import torch

pytestmark = pytest.mark.peers

N = types.SimpleNamespace


@pytest.fixture(scope="module")
def kh(sglang_runtime: dict[str, types.ModuleType]) -> Any:
    import kvpool.integrations.sglang as ks
    import kvpool.integrations.sglang_hybrid as hybrid

    return N(ks=ks, hybrid=hybrid)


def _configure(swa_kvcache: Any, page_size: int, full_tokens: int = 64) -> Any:
    """SGLang 0.5.23's own construction site, with its server-config getters stubbed."""
    import sglang.srt.mem_cache.kv_cache_configurator as site

    runner = N(is_hybrid_swa=True, kv_cache_dtype=torch.bfloat16, device="cpu",
               hybrid_gdn_config=None, kv_shard_size=1, is_draft_worker=False)
    sizes = N(full_max_total_num_tokens=full_tokens, swa_max_total_num_tokens=32,
              max_total_num_tokens=full_tokens)
    config = {"get_disagg": lambda: N(disaggregation_mode="null"),
              "get_schedule": lambda: N(page_size=page_size),
              "get_memory": lambda: N(enable_hisparse=False),
              "get_parallel": lambda: N(dcp_enabled=False, attn_dcp_size=1),
              "get_exec": lambda: N(kernel=N(attention_backend="triton"))}
    with mock.patch.multiple(site, **config):
        return site.KVCacheConfigurator._build_token_to_kv_pool_allocator(
            runner, sizes=sizes, token_to_kv_pool=swa_kvcache(max(full_tokens, 32), 32, page_size),
            is_dsv4_model=False, req_to_token_pool=None, token_to_kv_pool_allocator=None)


@pytest.mark.parametrize("page_size", [1, 4])
def test_install_builds_kvpools_hybrid_allocator(kh: Any, swa_kvcache: Any,
                                                 page_size: int) -> None:
    from sglang.srt.mem_cache.allocator.base import BaseTokenToKVPoolAllocator as Base
    from sglang.srt.mem_cache.allocator.swa import PureSWATokenToKVPoolAllocator
    from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator as SglangSWA

    assert type(_configure(swa_kvcache, page_size)) is SglangSWA
    with kh.ks.using_kvpool():
        assert kh.ks.installed()
        alloc = _configure(swa_kvcache, page_size)
        assert type(alloc) is kh.hybrid.SWATokenToKVPoolAllocator and isinstance(alloc, Base)
        assert (alloc.size_full, alloc.size_swa, alloc.page_size) == (64, 32, page_size)
        if page_size == 1:  # all-SWA models (no full pool) keep SGLang's own composite
            assert type(_configure(swa_kvcache, 1, full_tokens=0)) is PureSWATokenToKVPoolAllocator
    assert not kh.ks.installed()
    assert type(_configure(swa_kvcache, page_size)) is SglangSWA


def test_hooks_are_sglangs_and_the_pools_are_kvpools(kh: Any, swa_kvcache: Any) -> None:
    from sglang.srt.mem_cache.allocator.base import BaseTokenToKVPoolAllocator as Base
    from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator as SglangSWA

    cls = kh.hybrid.SWATokenToKVPoolAllocator
    assert kh.ks.SWATokenToKVPoolAllocator is cls  # also reachable from the main module
    for name in ("create_prefill_budget", "reclaim_for_prealloc", "swa_capacity_and_available",
                 "get_kvcache", "_conserve_swa_available_size"):
        assert getattr(cls, name) is vars(SglangSWA)[name], name
    for name in ("request_slot_reserve", "prealloc_fits", "set_hicache_transfer_done_event"):
        assert getattr(cls, name) is vars(Base)[name], name
    for name in ("free_swa", "free_swa_segment", "alloc_extend", "translate_loc_from_full_to_swa",
                 "evict_to_free_tokens", "alloc_extend_swa_tail"):  # kvpool's, errors wrapped
        assert getattr(cls, name).__wrapped__.__module__.startswith("kvpool."), name
    kv = swa_kvcache(64, 32, 4)
    alloc = cls(64, 32, 4, torch.bfloat16, "cpu", kv, False, checked=True)
    # SGLang's isinstance checks (its SWA tree component asserts one) accept kvpool's class
    assert isinstance(alloc, SglangSWA) and not issubclass(SglangSWA, cls)
    assert not any(vars(SglangSWA)[name] is getattr(cls, name) for name in ("alloc", "free_swa"))
    assert kv.full_to_swa_index_mapping is alloc.full_to_swa_index_mapping
    budget = alloc.create_prefill_budget(None)
    assert type(budget).__name__ == "SWAPrefillBudget"
    assert alloc.swa_capacity_and_available(full_capacity=64, swa_capacity=32) == ((64, 64),
                                                                                   (32, 32))
    row = alloc.alloc_extend(torch.tensor([0]), torch.tensor([0]), torch.tensor([6]),
                             torch.tensor([6]), torch.tensor([-1]), 6)
    assert row is not None and row.tolist() == [4, 5, 6, 7, 8, 9]
    assert kv.translate_loc_from_full_to_swa(row[-1:]).tolist() == [9]
    alloc.free_swa(row[:4])
    with pytest.raises(AssertionError) as err:  # a second SWA release of the slid-out page
        alloc.free_swa(row[:4])
    assert isinstance(err.value, kh.ks.ContractAssertionError) and err.value.clause == "SWA-11"
    alloc.free_full(row[:4])
    alloc.free(row[4:])
    assert (alloc.full_available_size(), alloc.swa_available_size()) == (64, 32)
    alloc.check_invariants()


def test_every_attribute_sglang_reads_on_a_hybrid_allocator_is_served(
        kh: Any, swa_kvcache: Any) -> None:
    """Parses the installed SGLang under every name that holds a hybrid allocator; each read
    name SGLang's hybrid allocator has, and each of its public attributes, must be served by
    kvpool's (same kind). The check bites on a hook hidden from kvpool's class."""
    import sglang.srt
    from kvpool.integrations.sglang_surface import (
        HYBRID_ALIASES,
        attributes_read,
        unserved_hybrid_attributes,
    )
    from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator as SglangSWA

    reads = attributes_read(str(next(iter(sglang.srt.__path__))), HYBRID_ALIASES)
    assert {"swa_available_size", "full_to_swa_index_mapping", "alloc_extend_swa_tail",
            "free_swa_segment", "set_full_to_swa_mapping", "swa_attn_allocator"} <= set(reads)
    cls = kh.hybrid.SWATokenToKVPoolAllocator
    for page_size in (1, 4):
        theirs = SglangSWA(64, 32, page_size, torch.bfloat16, "cpu", swa_kvcache(64, 32, page_size),
                           False)
        ours = cls(64, 32, page_size, torch.bfloat16, "cpu", swa_kvcache(64, 32, page_size), False)
        assert unserved_hybrid_attributes(reads, theirs, ours) == []
    for name in ("reclaim_for_prealloc", "alloc_extend_swa_tail", "swa_available_size"):
        hole = type("Hole", (cls,), {name: _Missing()})(64, 32, 4, torch.bfloat16, "cpu",
                                                        swa_kvcache(64, 32, 4), False)
        assert any(p.startswith(name) for p in unserved_hybrid_attributes(reads, theirs, hole))


class _Missing:
    """A descriptor that hides an attribute (AttributeError on access)."""

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        raise AttributeError("hidden")


@pytest.mark.parametrize("need_sort", [False, True])
def test_alloc_extend_swa_tail_matches_sglang_SWA_20(kh: Any, swa_kvcache: Any,
                                                     need_sort: bool) -> None:
    """SGLang 0.5.23's PD-decode pre-allocation and kvpool's, on the same calls (tails that
    start on a page boundary, as SGLang's caller asserts): the same slots, the same mapping,
    the same free lists, the same refusals."""
    from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator as SglangSWA

    ps = 4
    sides = [cls(64, 32, ps, torch.bfloat16, "cpu", swa_kvcache(64, 32, ps), need_sort)
             for cls in (SglangSWA, kh.hybrid.SWATokenToKVPoolAllocator)]

    def tensor(values: list[int]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.int64)

    rows: list[torch.Tensor] = []
    for prefix, seq, swa_tail_len in ((0, 10, 6), (0, 8, 0), (0, 12, 12), (0, 40, 8),
                                      (0, 9, 5), (0, 13, 1)):
        got = [alloc.alloc_extend_swa_tail(tensor([prefix]), tensor([prefix]), tensor([seq]),
                                           tensor([seq]), tensor([-1]), seq - prefix,
                                           swa_tail_len) for alloc in sides]
        assert [None if g is None else g.tolist() for g in got] == \
            [None if got[0] is None else got[0].tolist()] * 2
        assert torch.equal(sides[0].full_to_swa_index_mapping, sides[1].full_to_swa_index_mapping)
        if got[0] is not None:
            rows.append(got[0])
        if len(rows) == 3:  # free one row whole: the SWA side of its tail, the full side of all
            row = rows.pop(0)
            for alloc in sides:
                alloc.free(row)
        for name in ("full_attn_allocator", "swa_attn_allocator"):
            theirs, ours = (getattr(alloc, name) for alloc in sides)
            assert sorted(theirs.get_all_free_pages().tolist()) == \
                sorted(ours.get_all_free_pages().tolist())
        assert sides[0].available_size() == sides[1].available_size()
    sides[1].check_invariants()
