"""SGLang 0.5.23's unified SWA composite on the CPU, beside ``kvpool.spec.unified``.

``build(page_size, lazy)`` returns SGLang's ``UnifiedSWATokenToKVPoolAllocator`` from its own
CPU builder (``sglang.test.unified_allocator_fixtures.build_swa_pool``) and a
``UnifiedSWAModel`` of the same geometry. Loading (SGLang's runtime on the CPU, the sub-pools'
extend/decode kernels routed to SGLang's torch fallbacks) is the oracle's
(``kvpool.oracle.families.unified.peer.load_unified``).
"""

from __future__ import annotations

from typing import Any

from kvpool.oracle.families.unified.peer import load_unified as load
from kvpool.spec.unified import UnifiedSWAModel

__all__ = ["build", "load"]


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
