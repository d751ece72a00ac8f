"""The serving replay over SGLang's unified memory pool (full + SWA in one byte buffer).

SGLang 0.5.23 builds the unified pool with ``init_unified_swa_pools``: a ``UnifiedKVPool`` byte
buffer, a ``UnifiedSWAKVPool`` (per-layer K/V views of it) and the composite allocator.
:func:`unified_allocator_factory` calls that factory itself -- with
:func:`kvpool.integrations.sglang.install` in force for kvpool's composite
(:mod:`kvpool.integrations.sglang_unified`), without it for SGLang's -- so both run over
SGLang's own pools, and the tree cache is SGLang's ``UnifiedRadixCache`` with the FULL and SWA
components (:func:`kvpool.integrations.sglang_replay_hybrid.swa_cache`). With ``check_kv`` the
replay writes every new token's K/V through the pool's ``set_kv_buffer`` at the physical rows
the allocator's translations give (as an attention backend does), and after every step reads
back every live request's and every cached token's K/V (compaction moves pages under them).

What the scheduler sees (:class:`UnifiedViews`, recorded after every step by
:func:`record_views`): the capacity views it reads (``available_size``,
``full_available_size``, ``swa_available_size``) and the tree's evictable sizes; the replay's
events hold the ``out_cache_loc`` of every extend and decode, every eviction asked and done,
every retraction (a refused decode) and abort. Two composites serve a trace identically when
:func:`kvpool.integrations.sglang_replay.first_difference` of their results and the view lists
are equal.

Needs :func:`kvpool.oracle.families.unified.peer.load_unified` first (SGLang's runtime on the
CPU, its sub-pool kernels routed to torch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from sglang.srt.mem_cache.unified_memory_pool import init_unified_swa_pools

from .sglang import using_kvpool
from .sglang_replay import AllocatorFactory

__all__ = ["SWA_FRACTION", "UnifiedViews", "record_views", "unified_allocator_factory"]

SWA_FRACTION = 2  # the SWA side's static cap is 1 / SWA_FRACTION of the full side's


class UnifiedViews(NamedTuple):
    """The capacity views the scheduler reads, after one step."""

    available: int
    full_available: int
    swa_available: int


def unified_allocator_factory(*, kvpool: bool, lazy: bool,
                              dtype: torch.dtype = torch.float16) -> AllocatorFactory:
    """``(pool_tokens, page_size) -> allocator``: SGLang's ``init_unified_swa_pools`` (one full
    and one SWA layer, one head of dim 8) with static caps of ``pool_tokens`` full and
    ``pool_tokens // SWA_FRACTION`` SWA tokens (the buffer is their bytes), building kvpool's
    composite (``install()`` in force) or SGLang's."""
    def make(pool_tokens: int, page_size: int) -> Any:
        def build() -> Any:
            return init_unified_swa_pools(
                device="cpu", kv_cache_dtype=dtype, head_num=1, head_dim=8, v_head_dim=8,
                swa_head_num=1, swa_head_dim=8, swa_v_head_dim=8, page_size=page_size,
                start_layer=0, end_layer=2, swa_attention_layer_ids=[1],
                full_attention_layer_ids=[0], full_max_total_num_tokens=pool_tokens,
                swa_max_total_num_tokens=pool_tokens // SWA_FRACTION,
                enable_memory_saver=False, need_sort=False, lazy_compaction=lazy,
            ).token_to_kv_pool_allocator
        if not kvpool:
            return build()
        with using_kvpool():
            return build()
    return make


def record_views(views: list[UnifiedViews]) -> Callable[[Any], None]:
    """A replay ``check``: appends the allocator's :class:`UnifiedViews` to ``views``."""
    def check(allocator: Any) -> None:
        views.append(UnifiedViews(int(allocator.available_size()),
                                  int(allocator.full_available_size()),
                                  int(allocator.swa_available_size())))
    return check
