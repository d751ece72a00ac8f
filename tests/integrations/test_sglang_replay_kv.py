"""The serving replay with real KV bytes (``kvpool.integrations.sglang_replay_kv``): SGLang
0.5.23's own ``MHATokenToKVPool`` (and ``SWAKVPool`` for the hybrid allocators) on the CPU, every
new token's K/V written at its ``out_cache_loc`` through the pool's ``set_kv_buffer``, every live
request's K/V read back through its ``req_to_token`` row after every step (DATA-1 on the real
client). SGLang's allocators and kvpool's pass, with the same events as without the check; a
broken allocator fails it, including one that passes the replay without it."""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.peers


@pytest.fixture(scope="module")
def parts(sglang_runtime: dict[str, types.ModuleType]) -> Any:
    import kvpool.integrations.sglang as ks
    import kvpool.integrations.sglang_hybrid as kh
    import kvpool.integrations.sglang_replay as replay
    import kvpool.integrations.sglang_replay_hybrid as hy
    import kvpool.integrations.sglang_replay_kv as kv
    from sglang.srt.mem_cache import allocator as sg
    from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator as SglangSWA

    return types.SimpleNamespace(ks=ks, kh=kh, replay=replay, hy=hy, kv=kv, sg=sg,
                                 sglang_swa=SglangSWA)


def over_mha_pool(parts: Any, token_cls: Any, paged_cls: Any, dtype: torch.dtype,
                  **kwargs: Any) -> Any:
    """``(pool_tokens, page_size) -> allocator`` over SGLang's MHATokenToKVPool."""
    def make(pool_tokens: int, page_size: int) -> Any:
        pool = parts.kv.mha_pool(pool_tokens, page_size, dtype)
        if page_size == 1:
            return token_cls(pool_tokens, dtype, "cpu", pool, False, **kwargs)
        return paged_cls(pool_tokens, page_size, dtype, "cpu", pool, False, **kwargs)
    return make


@pytest.mark.parametrize("page_size", [1, 4])
@pytest.mark.parametrize("who", ["sglang", "kvpool"])
def test_every_live_requests_kv_survives_the_replay(parts: Any, who: str,
                                                     page_size: int) -> None:
    """float32 for SGLang's allocators, bfloat16 for kvpool's (signatures are exact in both)."""
    if who == "sglang":
        make = over_mha_pool(parts, parts.sg.TokenToKVPoolAllocator,
                             parts.sg.PagedTokenToKVPoolAllocator, torch.float32)
    else:
        make = over_mha_pool(parts, parts.ks.TokenToKVPoolAllocator,
                             parts.ks.PagedTokenToKVPoolAllocator, torch.bfloat16, checked=True)
    trace = parts.replay.synthetic_trace(0, page_size=page_size)
    plain = parts.replay.replay(trace, make)
    checked = parts.replay.replay(trace, make, check_kv=True)
    assert parts.replay.first_difference(plain, checked) is None  # the writes change nothing
    assert checked.kv_reads > 50 * checked.steps and plain.kv_reads == 0
    kinds = {kind for kind, _ in checked.events}
    assert {"evict", "retract", "abort"} <= kinds  # the bytes outlive eviction and retraction


@pytest.mark.parametrize("who", ["sglang", "kvpool"])
def test_both_sides_of_a_hybrid_pool_survive_the_replay(parts: Any, who: str) -> None:
    cls, kwargs = ((parts.sglang_swa, {}) if who == "sglang"
                   else (parts.kh.SWATokenToKVPoolAllocator, {"checked": True}))
    trace = parts.replay.synthetic_trace(1, page_size=4)
    result = parts.replay.replay(trace, parts.hy.hybrid_allocator_factory(cls, **kwargs),
                                 make_cache=parts.hy.swa_cache(), check_kv=True)
    assert result.kv_reads > 50 * result.steps


def test_a_slot_handed_out_while_live_fails_the_kv_check(parts: Any) -> None:
    """An allocator that puts the previous allocation's last slot (still live) in place of the
    first slot it hands out, and frees the displaced one (its count stays right): the new
    request's K/V overwrites the old request's."""
    class Reuses(parts.ks.TokenToKVPoolAllocator):  # type: ignore[misc]
        last: int | None = None

        def alloc(self, need_size: int) -> Any:
            out = super().alloc(need_size)
            if out is not None and len(out) > 1 and self.last is not None:
                displaced, out = int(out[0]), out.clone()
                out[0] = self.last
                self.free(torch.tensor([displaced]))
            if out is not None and len(out):
                self.last = int(out[-1])
            return out

    make = over_mha_pool(parts, Reuses, None, torch.float32)
    with pytest.raises(parts.kv.KVMismatch, match=r"request r\d+ position \d+ \(slot \d+"):
        parts.replay.replay(parts.replay.synthetic_trace(0, page_size=1), make, check_kv=True)


def test_a_translation_folding_two_live_slots_fails_only_the_kv_check(parts: Any) -> None:
    """A hybrid allocator whose ``translate_loc_from_full_to_swa`` folds SWA slots pairwise:
    the replay's events are SGLang's exactly, but two live tokens share one SWA slot."""
    class Folded(parts.kh.SWATokenToKVPoolAllocator):  # type: ignore[misc]
        def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
            out = super().translate_loc_from_full_to_swa(kv_indices)
            return torch.where(out > 0, out | 1, out)

    trace, cache = parts.replay.synthetic_trace(0, page_size=4), parts.hy.swa_cache()
    theirs = parts.replay.replay(trace, parts.hy.hybrid_allocator_factory(parts.sglang_swa),
                                 make_cache=cache)
    folded = parts.hy.hybrid_allocator_factory(Folded)
    assert parts.replay.first_difference(
        theirs, parts.replay.replay(trace, folded, make_cache=cache)) is None
    with pytest.raises(parts.kv.KVMismatch, match=r"layer 1\)"):  # the SWA layer
        parts.replay.replay(trace, folded, make_cache=cache, check_kv=True)


def test_signatures_are_exact_bytes_and_follow_the_prefix(parts: Any) -> None:
    sig = parts.kv.signatures
    a, b = sig([5, 6, 7], 0, 3, 0), sig([5, 6, 8], 0, 3, 0)
    assert torch.equal(a[:2], b[:2]) and not torch.equal(a[2], b[2])  # shared prefix, then not
    assert torch.equal(sig([5, 6, 7], 1, 3, 0), a[1:])
    assert not torch.equal(sig([5, 6, 7], 0, 3, 1), a)  # each layer its own
    assert torch.equal(a, a.to(torch.bfloat16).float()) and int(a.max()) <= 255
    with pytest.raises(ValueError, match="2 tokens, positions up to 3"):
        sig([5, 6], 0, 3, 0)
    with pytest.raises(ValueError, match="no KV cache"):
        parts.kv.KVForward(types.SimpleNamespace(get_kvcache=lambda: None))


def test_the_radix_caches_tokens_are_checked_too(parts: Any) -> None:
    """``check_tree``: a cached node's slots hold the signatures of the tokens on its path."""
    pool = parts.kv.mha_pool(32, 1)
    forward = parts.kv.KVForward(types.SimpleNamespace(get_kvcache=lambda: pool))

    def node(tokens: list[int], slots: list[int], children: dict[int, Any]) -> Any:
        key = types.SimpleNamespace(raw_token_ids=lambda: tokens, is_bigram=False)
        return types.SimpleNamespace(key=key, value=torch.tensor(slots), children=children)

    leaf = node([7, 8], [5, 6], {})
    root = types.SimpleNamespace(children={1: node([3, 4, 5], [9, 2, 4], {7: leaf})})
    for layer in forward.layers:  # as the forward pass of the request [3, 4, 5, 7, 8] wrote it
        k = parts.kv.signatures([3, 4, 5, 7, 8], 0, 5, layer)
        pool.set_kv_buffer(types.SimpleNamespace(layer_id=layer), torch.tensor([9, 2, 4, 5, 6]),
                           k, 255 - k)
    cache = types.SimpleNamespace(root_node=root)
    assert forward.check_tree(cache) == 5 * len(forward.layers)
    pool.k_buffer[1][6] = 0  # the bytes of a cached token change while no request holds it
    with pytest.raises(parts.kv.KVMismatch, match=r"position 4 \(slot 6, layer 1\)"):
        forward.check_tree(cache)
