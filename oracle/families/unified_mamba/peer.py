"""SGLang 0.5.23's unified full + Mamba composite on a CPU, built by SGLang's own pool builder.

``init_unified_mamba_pools`` (``sglang.srt.mem_cache.unified_memory_pool``) lays one byte buffer
out as ``[ mamba state (grow-up end) | full (grow-down end) ]`` and returns a bundle whose
``token_to_kv_pool_allocator`` is ``UnifiedMambaTokenToKVPoolAllocator``. The geometry here: one
full-attention layer of :data:`ENTRY_BYTES` a token (K and V, one head of dim 8, fp16) and one
Mamba layer of :data:`STATE_BYTES` a slot (conv ``(3, 8)`` bf16, temporal ``(1, 4, 8)`` fp32),
as SGLang's own tri-pool fixture. The sub-pool kernels run on SGLang's torch fallbacks
(:func:`kvpool.oracle.families.unified.peer.load_unified`).
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

from ..unified.peer import load_unified

POOLS = "sglang.srt.mem_cache.unified_memory_pool"
ENTRY_BYTES = 32  # one full-attention token of one layer
STATE_BYTES = 176  # one Mamba state slot of one layer
MAX_STATE_SLOTS = 8  # the builder's max_mamba_cache_size


def build_unified_mamba(*, total_bytes: int, page_size: int, lazy: bool) -> Any:
    """SGLang's ``UnifiedMambaTokenToKVPoolAllocator`` over a buffer of ``total_bytes`` plus
    the ``MAX_STATE_SLOTS * STATE_BYTES`` SGLang's builder adds for the state end (the
    allocator's ``unified_buffer.total_bytes`` is the whole buffer).

    Raises:
        PeerUnavailable: SGLang or its CPU runtime cannot be imported.
    """
    import torch

    load_unified()
    pools = importlib.import_module(POOLS)
    config = SimpleNamespace(
        shape=SimpleNamespace(conv=[(3, 8)], temporal=(1, 4, 8)),
        dtype=SimpleNamespace(conv=torch.bfloat16, temporal=torch.float32), layers=[1])
    bundle = pools.init_unified_mamba_pools(
        device="cpu", kv_cache_dtype=torch.float16, head_num=1, head_dim=8, v_head_dim=8,
        page_size=page_size, start_layer=0, end_layer=2, is_draft_worker=False,
        use_mla_backend=False, mamba_layer_ids=[1], full_attention_layer_ids=[0],
        mamba2_cache_params=config, model_context_len=64 * page_size, extra_max_context_len=1,
        max_total_num_tokens=100 * page_size, max_mamba_cache_size=MAX_STATE_SLOTS,
        max_num_reqs=4, enable_memory_saver=False, enable_mamba_extra_buffer=False,
        enable_mamba_extra_buffer_lazy=False, speculative_num_draft_tokens=None,
        disable_overlap_schedule=True, need_sort=False, lazy_compaction=lazy,
        unified_total_bytes=total_bytes)
    return bundle.token_to_kv_pool_allocator
