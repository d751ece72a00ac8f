"""The serving replay's hybrid sliding-window configuration.

SGLang 0.5.23 serves hybrid SWA models with its ``UnifiedRadixCache`` holding a FULL and an SWA
component (its replacement of the former ``SWARadixCache``): the scheduler's own
``alloc_for_extend`` / ``alloc_for_decode`` slide each running request's window
(``ScheduleBatch.maybe_evict_swa``: ``free_swa_segment`` of the rows that left it, inside a free
group), evictions ask for both shortfalls (``evict_for_alloc`` with ``swa_num_tokens``), and a
finished or retracted request frees its row through the cache. The allocator is a
``SWATokenToKVPoolAllocator`` (SGLang's or kvpool's) over SGLang's own ``SWAKVPool``, whose SWA
side is smaller than the full side, so the SWA side runs short first.

Needs :func:`kvpool.oracle.peers.peer_import.load_sglang_runtime` (or a full SGLang install) first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.swa_memory_pool import SWAKVPool
from sglang.srt.mem_cache.unified_cache.components import ComponentType
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

from .sglang_replay import AllocatorFactory, CacheFactory

__all__ = ["SLIDING_WINDOW_TOKENS", "SWA_FRACTION", "hybrid_allocator_factory", "swa_cache"]

SLIDING_WINDOW_TOKENS = 24  # the model's sliding window (tokens)
SWA_FRACTION = 2  # the SWA side holds 1 / SWA_FRACTION of the full side's tokens


def swa_cache(sliding_window_size: int = SLIDING_WINDOW_TOKENS) -> CacheFactory:
    """A factory of SGLang's ``UnifiedRadixCache`` with the FULL and SWA components."""
    def make(pool: Any, allocator: Any, page_size: int) -> Any:
        return UnifiedRadixCache(CacheInitParams(
            disable=False, req_to_token_pool=pool, token_to_kv_pool_allocator=allocator,
            page_size=page_size, sliding_window_size=sliding_window_size,
            tree_components=(ComponentType.FULL, ComponentType.SWA)))
    return make


def hybrid_allocator_factory(cls: Callable[..., Any], need_sort: bool = False,
                             **kwargs: Any) -> AllocatorFactory:
    """``(pool_tokens, page_size) -> cls(...)``: a hybrid allocator class (SGLang's signature)
    over SGLang's ``SWAKVPool`` (one full and one SWA layer, tiny heads), the SWA side
    ``pool_tokens // SWA_FRACTION`` tokens; ``kwargs`` go to ``cls`` (kvpool's ``checked``)."""
    def make(pool_tokens: int, page_size: int) -> Any:
        swa_tokens = pool_tokens // SWA_FRACTION
        kvcache = SWAKVPool(size=pool_tokens, size_swa=swa_tokens, page_size=page_size,
                            dtype=torch.bfloat16, head_num=1, head_dim=8,
                            swa_attention_layer_ids=[1], full_attention_layer_ids=[0],
                            device="cpu", enable_memory_saver=False)
        return cls(pool_tokens, swa_tokens, page_size, torch.bfloat16, "cpu", kvcache,
                   need_sort, **kwargs)
    return make
