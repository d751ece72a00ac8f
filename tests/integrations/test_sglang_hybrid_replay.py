"""The serving replay's hybrid SWA configuration: SGLang 0.5.23's own scheduler-side code with
its UnifiedRadixCache (FULL and SWA components) drives SGLang's SWATokenToKVPoolAllocator and
kvpool's through the same trace -- window slides as ScheduleBatch.maybe_evict_swa issues them,
evictions for both shortfalls, retraction, aborts. Every slot, every eviction and the final free
lists of both sides must be identical; a broken kvpool must be caught."""

from __future__ import annotations

import types
from collections import Counter
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.peers


@pytest.fixture(scope="module")
def parts(sglang_runtime: dict[str, types.ModuleType]) -> Any:
    import kvpool.integrations.sglang_hybrid as hybrid
    import kvpool.integrations.sglang_replay as replay
    import kvpool.integrations.sglang_replay_hybrid as hybrid_replay
    from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator as SglangSWA

    return types.SimpleNamespace(replay=replay, hy=hybrid_replay,
                                 ours=hybrid.SWATokenToKVPoolAllocator, theirs=SglangSWA)


def _counting(cls: type, calls: Counter[str]) -> type:
    """``cls`` counting its window releases (``free_swa_segment``)."""
    def free_swa_segment(self: Any, free_index: torch.Tensor, *, start_pos: int) -> None:
        calls["free_swa_segment"] += 1
        cls.free_swa_segment(self, free_index, start_pos=start_pos)  # type: ignore[attr-defined]
    return type(f"Counting{cls.__name__}", (cls,), {"free_swa_segment": free_swa_segment})


@pytest.mark.parametrize("page_size", [1, 4, 16])
@pytest.mark.parametrize(("seed", "need_sort"), [(0, False), (1, False), (2, True)])
def test_kvpool_matches_sglang_under_sglangs_swa_cache(parts: Any, page_size: int, seed: int,
                                                       need_sort: bool) -> None:
    trace = parts.replay.synthetic_trace(seed, page_size=page_size)
    calls: Counter[str] = Counter()
    theirs = parts.replay.replay(
        trace, parts.hy.hybrid_allocator_factory(_counting(parts.theirs, calls), need_sort),
        make_cache=parts.hy.swa_cache())
    ours = parts.replay.replay(
        trace, parts.hy.hybrid_allocator_factory(parts.ours, need_sort, checked=True),
        make_cache=parts.hy.swa_cache(), check=lambda alloc: alloc.check_invariants())
    kinds = Counter(kind for kind, _ in theirs.events)
    assert kinds["extend"] > 10 and kinds["decode"] > 50 and kinds["finish"] > 10
    assert calls["free_swa_segment"] > 10  # the windows slid
    assert any(kind == "evict" and detail[3] > 0 for kind, detail in theirs.events)  # SWA side
    assert parts.replay.first_difference(theirs, ours) is None


def test_the_hybrid_trace_retracts(parts: Any) -> None:
    kinds: Counter[str] = Counter()
    for page_size in (1, 4):
        trace = parts.replay.synthetic_trace(0, page_size=page_size)
        kinds.update(kind for kind, _ in parts.replay.replay(
            trace, parts.hy.hybrid_allocator_factory(parts.theirs),
            make_cache=parts.hy.swa_cache()).events)
    assert kinds["retract"] > 0 and kinds["abort"] > 0


def test_a_broken_kvpool_is_caught(parts: Any) -> None:
    """A kvpool whose window slide keeps the last page of each slid segment (an SWA page leak on
    every slide) runs the SWA side short: the replay differs, or runs out of memory where
    SGLang's does not."""
    class Leaky(parts.ours):  # type: ignore[misc, name-defined]
        def free_swa_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
            keep = (free_index.numel() - 1) // self.page_size * self.page_size
            super().free_swa_segment(free_index[:keep], start_pos=start_pos)

    trace = parts.replay.synthetic_trace(0, page_size=4)
    theirs = parts.replay.replay(trace, parts.hy.hybrid_allocator_factory(parts.theirs),
                                 make_cache=parts.hy.swa_cache())
    try:
        broken = parts.replay.replay(trace, parts.hy.hybrid_allocator_factory(Leaky),
                                     make_cache=parts.hy.swa_cache())
    except RuntimeError as err:
        assert "out of memory" in str(err)
        return
    assert parts.replay.first_difference(theirs, broken) is not None


@pytest.mark.parametrize("page_size", [4])
def test_sglangs_debug_switches_on_raise_nothing_on_a_clean_trace(
        parts: Any, page_size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """SGLANG_DEBUG_MEMORY_POOL=1 and SGLANG_INVARIANT_CHECK=STRICT: SGLang's own scheduler code
    trips no check on either allocator, and the replays stay identical."""
    monkeypatch.setenv("SGLANG_DEBUG_MEMORY_POOL", "1")
    monkeypatch.setenv("SGLANG_INVARIANT_CHECK", "2")
    trace = parts.replay.synthetic_trace(0, page_size=page_size)
    made: list[Any] = []

    def ours(pool_tokens: int, ps: int) -> Any:
        made.append(parts.hy.hybrid_allocator_factory(parts.ours)(pool_tokens, ps))
        return made[-1]

    theirs = parts.replay.replay(trace, parts.hy.hybrid_allocator_factory(parts.theirs),
                                 make_cache=parts.hy.swa_cache())
    mine = parts.replay.replay(trace, ours, make_cache=parts.hy.swa_cache())
    assert made[0].swa_attn_allocator.debug_mode and made[0].full_attn_allocator.debug_mode
    assert parts.replay.first_difference(theirs, mine) is None
