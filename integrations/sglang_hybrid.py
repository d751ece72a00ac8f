"""kvpool's hybrid sliding-window allocator as SGLang's ``SWATokenToKVPoolAllocator``.

:class:`SWATokenToKVPoolAllocator` subclasses :class:`kvpool.impl.SWATokenToKVPoolAllocator` and
SGLang's ``BaseTokenToKVPoolAllocator``. kvpool owns every attribute its hybrid class defines
(:data:`HYBRID_KVPOOL_OWNS`: allocation, the releases, the mapping, groups, the census, ``SWA-*``);
the scheduler-facing hooks that SGLang 0.5.23 defines on its own SWA class and kvpool does not
(``create_prefill_budget`` with SGLang's ``SWAPrefillBudget``, ``reclaim_for_prealloc``,
``swa_capacity_and_available``, the conservation views, the CPU-copy delegation) are SGLang's,
then every remaining hook of SGLang's base class. SGLang's private helpers of its SWA class
(:data:`SGLANG_SWA_INTERNAL`) are not taken: they work on SGLang's state.

``install()`` (:mod:`kvpool.integrations.sglang`) makes SGLang's configurator build this class for
hybrid SWA models; the pure-SWA and unified composites keep SGLang's classes. Importing this
module registers the class as a virtual subclass of SGLang's ``SWATokenToKVPoolAllocator``, so
SGLang's ``isinstance`` checks accept it (nothing is inherited from SGLang's class).
"""

from __future__ import annotations

from typing import Any

from kvpool import impl
from kvpool.impl import SWATokenToKVPoolAllocator as _ImplSWA
from kvpool.impl.swa_census import HybridDiagnostics
from kvpool.impl.swa_segments import SwaSegmentFrees
from kvpool.impl.swa_tail import SwaTailAllocation
from sglang.srt.mem_cache.allocator.base import BaseTokenToKVPoolAllocator as _Base
from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator as _SglangSWA

from .sglang_classes import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator, follow_sglang
from .sglang_debug import HybridDebugChecks

__all__ = ["HYBRID_KVPOOL_OWNS", "SGLANG_SWA_INTERNAL", "SWATokenToKVPoolAllocator"]

HYBRID_KVPOOL_OWNS: frozenset[str] = frozenset(
    name for source in (impl.SWATokenToKVPoolAllocator, HybridDiagnostics, SwaTailAllocation,
                        SwaSegmentFrees, HybridDebugChecks)
    for name in vars(source)
    if name == "__init__" or not (name.startswith("__") and name.endswith("__")))

# SGLang's SWA helpers over its own state (its mapping attribute, its sides' internals).
SGLANG_SWA_INTERNAL: frozenset[str] = frozenset({
    "_free_swa_pages", "_free_swa_pages_none_cuda", "_free_swa_pages_cuda",
    "_expand_to_full_pages", "_release_swa", "_swa_req_ring",
})


@follow_sglang(HYBRID_KVPOOL_OWNS, _SglangSWA, _Base, skip=SGLANG_SWA_INTERNAL)
class SWATokenToKVPoolAllocator(HybridDebugChecks, _ImplSWA, _Base):  # type: ignore[misc]
    """SGLang's ``SWATokenToKVPoolAllocator`` on kvpool's two sides (same signature).

    The sides are kvpool's SGLang classes, so each has SGLang's ``debug_mode`` (from
    ``SGLANG_DEBUG_MEMORY_POOL``; the SWA side's also switches the hybrid's ``SWA-3`` check), and
    ``SGLANG_INVARIANT_CHECK`` runs SGLang's peer checks
    (:class:`~kvpool.integrations.sglang_debug.HybridDebugChecks`). ``checked`` (kvpool's own,
    stricter mode) is off unless asked for.
    """

    token_allocator_class = TokenToKVPoolAllocator
    paged_allocator_class = PagedTokenToKVPoolAllocator
    free_pages = None  # SGLang's composite has no free list of its own (each side has one)
    release_pages = None

    def __init__(self, size: int, size_swa: int, page_size: int, dtype: Any, device: Any,
                 kvcache: Any, need_sort: bool, req_to_token_pool: Any = None, *,
                 checked: bool = False) -> None:
        super().__init__(size, size_swa, page_size, dtype, device, kvcache, need_sort,
                         req_to_token_pool, checked=checked)


# SGLang tests for its hybrid allocator by class (the SWA tree component of its
# UnifiedRadixCache asserts it, the per-request-ring and draft-worker checks ask it): kvpool's
# class is registered as a virtual subclass of SGLang's (an ABC), inheriting nothing from it.
_SglangSWA.register(SWATokenToKVPoolAllocator)
