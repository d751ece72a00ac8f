"""SGLang 0.5.23's own scheduler-side code (Req, ScheduleBatch.check_decode_mem, ReqToTokenPool,
RadixCache, alloc_for_extend / alloc_for_decode, checkpoint_kv_cache, release_kv_cache,
release_req) drives SGLang's allocator and kvpool's through the same serving trace: shared
prefixes, chunked prefill, eviction under pressure, retraction and aborts. Every out_cache_loc,
every eviction and the final census must be identical; a broken kvpool must be caught."""

from __future__ import annotations

import types
from collections import Counter
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.peers


@pytest.fixture(scope="module")
def parts(sglang_runtime: dict[str, types.ModuleType]) -> Any:
    import kvpool.integrations.sglang as ks
    import kvpool.integrations.sglang_replay as replay
    from sglang.srt.mem_cache import allocator as sg

    return types.SimpleNamespace(ks=ks, replay=replay, sg=sg)


def sglang_factory(parts: Any, need_sort: bool = False) -> Any:
    def make(pool_tokens: int, page_size: int) -> Any:
        if page_size == 1:
            return parts.sg.TokenToKVPoolAllocator(pool_tokens, torch.int64, "cpu", None,
                                                   need_sort)
        return parts.sg.PagedTokenToKVPoolAllocator(pool_tokens, page_size, torch.int64, "cpu",
                                                    None, need_sort)
    return make


def kvpool_factory(token_cls: Any, paged_cls: Any, need_sort: bool = False) -> Any:
    def make(pool_tokens: int, page_size: int) -> Any:
        if page_size == 1:
            return token_cls(pool_tokens, torch.int64, "cpu", None, need_sort, checked=True)
        return paged_cls(pool_tokens, page_size, torch.int64, "cpu", None, need_sort,
                         checked=True)
    return make


@pytest.mark.parametrize("page_size", [1, 4, 16])
@pytest.mark.parametrize(("seed", "need_sort"), [(0, False), (1, False), (2, True)])
def test_kvpool_matches_sglang_under_sglangs_scheduler_code(parts: Any, page_size: int,
                                                           seed: int, need_sort: bool) -> None:
    """need_sort (SGLang's disaggregated modes) stages frees until an allocation runs short."""
    trace = parts.replay.synthetic_trace(seed, page_size=page_size)
    theirs = parts.replay.replay(trace, sglang_factory(parts, need_sort))
    ours = parts.replay.replay(trace, kvpool_factory(parts.ks.TokenToKVPoolAllocator,
                                                     parts.ks.PagedTokenToKVPoolAllocator,
                                                     need_sort),
                               check=lambda alloc: alloc.check_invariants())
    kinds = Counter(kind for kind, _ in theirs.events)
    assert kinds["extend"] > 10 and kinds["decode"] > 50 and kinds["finish"] > 10
    assert kinds["evict"] > 0 and any(got > 0 for kind, (_, got) in
                                      ((k, d) for k, d in theirs.events if k == "evict"))
    assert parts.replay.first_difference(theirs, ours) is None
    assert ours.available_end + ours.evictable_end == trace.pool_tokens  # nothing leaked


def test_the_trace_exercises_retraction_aborts_and_chunks(parts: Any) -> None:
    """Across the seeds and page sizes of the test above, every scheduler path runs."""
    kinds: Counter[str] = Counter()
    chunked = 0
    for seed in (0, 1):
        for page_size in (1, 4, 16):
            trace = parts.replay.synthetic_trace(seed, page_size=page_size)
            kinds.update(kind for kind, _ in parts.replay.replay(trace, sglang_factory(parts))
                         .events)
            chunked += sum(len(r.prompt) > trace.chunk_tokens for r in trace.requests)
    assert kinds["retract"] > 0 and kinds["abort"] > 0 and chunked > 0


def test_a_broken_kvpool_is_caught(parts: Any) -> None:
    """A kvpool whose segment frees (how SGLang's tree cache and release path free) put a
    segment's pages back in reverse row order: the slot streams must then differ."""

    class BrokenPaged(parts.ks.PagedTokenToKVPoolAllocator):  # type: ignore[misc, name-defined]
        def _segment_pages(self, free_index: torch.Tensor, trim: int, start_pos: int) -> Any:
            pages = super()._segment_pages(free_index, trim, start_pos)
            return None if pages is None else torch.as_tensor(pages).flip(0)

    trace = parts.replay.synthetic_trace(0, page_size=4)
    theirs = parts.replay.replay(trace, sglang_factory(parts))
    broken = parts.replay.replay(trace, kvpool_factory(parts.ks.TokenToKVPoolAllocator,
                                                       BrokenPaged))
    assert parts.replay.first_difference(theirs, broken) is not None
