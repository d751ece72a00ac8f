"""kvpool.impl: the production KV-cache allocators on torch tensors (CPU and CUDA).

Drop-in for SGLang 0.5.23's ``TokenToKVPoolAllocator``, ``PagedTokenToKVPoolAllocator`` and
``SWATokenToKVPoolAllocator`` (the hybrid sliding-window pair, :class:`kvpool.spec.HybridModel`),
call for call equal to :class:`kvpool.spec.AllocatorModel` (the reference order). Free lists live
in preallocated tensors with host-side counters, so ``alloc`` and every kind of free cost
O(pages moved); ``checked=True`` validates every call with the spec's rules. On CUDA the hot
paths are sync-free torch ops (one Triton kernel per call with the ``triton`` extra); on CPU the
same arithmetic runs on the same buffers as compiled loops (:mod:`kvpool.impl.native_ops`, an
optional extension) or in numpy (:mod:`kvpool.impl.backend`), avoiding torch's per-op
dispatch cost.

Beside them: :class:`UnifiedSWAAllocator`, SGLang 0.5.23's unified full + SWA memory pool (one
byte buffer, virtual ids, holes and compaction; ``kvpool.spec.unified``'s ``UnifiedSWAModel``),
and :class:`MambaSlotAllocator`, its request-slot allocator for Mamba state
(``kvpool.spec.mamba_slots``).
"""

from .hisparse import HiSparseTokenToKVPoolAllocator as HiSparseTokenToKVPoolAllocator
from .mamba_slots import MambaSlotAllocator
from .page_interleave import PageInterleavePoolAllocator as PageInterleavePoolAllocator
from .paged import PagedTokenToKVPoolAllocator
from .swa import SWATokenToKVPoolAllocator
from .token import TokenToKVPoolAllocator
from .unified_mamba import UnifiedMambaAllocator
from .unified_swa import UnifiedSWAAllocator
from .unified_tri import UnifiedMambaSWAAllocator

__all__ = ["MambaSlotAllocator", "PagedTokenToKVPoolAllocator", "SWATokenToKVPoolAllocator",
           "TokenToKVPoolAllocator", "UnifiedMambaAllocator", "UnifiedMambaSWAAllocator",
           "UnifiedSWAAllocator"]
