"""SGLang 0.5.23's unified SWA composite on the CPU, beside ``kvpool.spec.unified``.

``build(page_size, lazy)`` returns SGLang's ``UnifiedSWATokenToKVPoolAllocator`` from its own
CPU builder (``sglang.test.unified_allocator_fixtures.build_swa_pool``) and a
``UnifiedSWAModel`` of the same geometry. The sub-pools' ``alloc_extend`` / ``alloc_decode``
launch Triton kernels unconditionally; ``route_kernels_to_torch`` points them at SGLang's own
torch fallbacks (``alloc_extend_naive`` / ``alloc_decode_naive``, the ones its paged allocator
uses without Triton). Shared by the peers test and ``benchmarks.unified``.
"""

from __future__ import annotations

import importlib
from typing import Any

from kvpool.spec.unified import UnifiedSWAModel

SUB_POOL = "sglang.srt.mem_cache.allocator.unified_sub_pool"
PAGED = "sglang.srt.mem_cache.allocator.paged"
FIXTURES = "sglang.test.unified_allocator_fixtures"


class _Launcher:
    """Stands in for a Triton kernel object: ``kernel[grid](*args)`` calls ``fn(*args)``."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __getitem__(self, grid: Any) -> Any:
        return self.fn


def route_kernels_to_torch() -> None:
    """Point the unified sub-pool's extend/decode kernels at SGLang's torch fallbacks."""
    sub_pool = importlib.import_module(SUB_POOL)
    paged = importlib.import_module(PAGED)

    def extend(prefix_lens: Any, seq_lens: Any, last_loc: Any, free_pages: Any,
               out_indices: Any, _bs_pow2: int, page_size: int) -> None:
        paged.alloc_extend_naive(prefix_lens, seq_lens, last_loc, free_pages, out_indices,
                                 page_size, out_indices.device)

    def decode(seq_lens: Any, last_loc: Any, free_pages: Any, out_indices: Any,
               _bs_pow2: int, page_size: int) -> None:
        new_pages = int(((seq_lens - 1) % page_size == 0).sum())
        paged.alloc_decode_naive(seq_lens, last_loc, free_pages, out_indices, page_size,
                                 new_pages)

    setattr(sub_pool, "alloc_extend_kernel", _Launcher(extend))  # noqa: B010
    setattr(sub_pool, "alloc_decode_kernel", _Launcher(decode))  # noqa: B010


def load() -> Any:
    """Import SGLang's runtime on the CPU and its unified fixtures; raise ``PeerUnavailable``
    (from the oracle's ``peer_import``) when SGLang cannot be imported."""
    for name in ("kvpool.oracle.peers.peer_import", "kvpool.oracle.peer_import"):
        try:
            peer_import = importlib.import_module(name)
            break
        except ModuleNotFoundError:
            continue
    peer_import.load_sglang_runtime()
    fixtures = importlib.import_module(FIXTURES)
    route_kernels_to_torch()
    return fixtures


def build(page_size: int, lazy: bool, static: bool = False) -> tuple[Any, UnifiedSWAModel]:
    """SGLang's unified SWA composite (100 pages a side, fp16, 1 head of dim 8) and the model
    of its geometry, read from SGLang's own pool."""
    fixtures = load()
    fixtures.setup_allocator_context()
    target = fixtures.build_swa_pool(page_size=page_size, lazy=lazy)
    fa, sa = target.full_attn_allocator, target.swa_attn_allocator
    model = UnifiedSWAModel(fa.unified_buffer.total_bytes, page_size, fa.entry_bytes,
                            sa.entry_bytes, lazy=lazy, full_max_tokens=100 * page_size,
                            swa_max_tokens=100 * page_size)
    return target, model
