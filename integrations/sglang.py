"""kvpool's allocators as SGLang allocators, built on the installed SGLang's own base class.

:class:`TokenToKVPoolAllocator` and :class:`PagedTokenToKVPoolAllocator` subclass both the
matching :mod:`kvpool.impl` class and SGLang's ``BaseTokenToKVPoolAllocator``. kvpool supplies
what touches the free lists (:data:`KVPOOL_OWNS`: allocation, every kind of free, free groups,
staging, capacity, the census, the layouts and checked mode); every other attribute of the
installed SGLang's base class -- the scheduler-facing hooks such as ``create_prefill_budget``,
``evict_to_free_tokens``, ``check_decode_capacity``, ``prealloc_fits`` -- is SGLang's own, so a
hook that a new SGLang release adds is inherited, not copied.

Debug mode: SGLang's switches mean SGLang's checks (:mod:`kvpool.integrations.sglang_debug`):
``SGLANG_DEBUG_MEMORY_POOL`` (SGLang's own reading of the variable) sets each allocator's
assignable ``debug_mode``, which runs SGLang 0.5.23's debug asserts at the same calls, and
``SGLANG_INVARIANT_CHECK`` runs the hybrid allocator's invariant checks. kvpool's own
``checked=True`` (off unless asked for) is the stricter mode. Every caller error is a
:class:`ContractAssertionError`: a ``ContractViolation`` naming its clause that is also an
``AssertionError``, so SGLang code written for its debug asserts catches it.

Switching SGLang to kvpool (:func:`install`) replaces the token, paged and hybrid (SWA) classes
where SGLang constructs its allocators (``sglang.srt.mem_cache.kv_cache_configurator``) and the
unified memory pools -- the full + SWA composite (:mod:`kvpool.integrations.sglang_unified`),
the tri-pool (:mod:`kvpool.integrations.sglang_unified_tri`) and the full + Mamba pool
(:mod:`kvpool.integrations.sglang_unified_mamba`) -- where SGLang's unified-memory-pool
factories import them. Call it
at the top level of the launch script, before the engine starts, so that SGLang's spawned
scheduler processes, which re-import the main module, run it too. Importing this module imports
SGLang.

Tested with SGLang :data:`TESTED_SGLANG_VERSIONS`; on another version the base class is checked
(:func:`incompatibilities`) and an incompatible one raises :class:`UnsupportedSGLangVersion`.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

from .sglang_classes import (
    CONSTRUCTION_MODULE,
    KVPOOL_OWNS,
    TESTED_SGLANG_VERSIONS,
    PagedTokenToKVPoolAllocator,
    TokenToKVPoolAllocator,
    UnsupportedSGLangVersion,
    check_sglang,
    follow_sglang,
    incompatibilities,
)
from .sglang_debug import ContractAssertionError
from .sglang_hybrid import SWATokenToKVPoolAllocator
from .sglang_unified import UnifiedSWATokenToKVPoolAllocator
from .sglang_unified_mamba import UnifiedMambaTokenToKVPoolAllocator
from .sglang_unified_tri import UnifiedMambaSWATokenToKVPoolAllocator

__all__ = [
    "KVPOOL_OWNS",
    "TESTED_SGLANG_VERSIONS",
    "ContractAssertionError",
    "PagedTokenToKVPoolAllocator",
    "SWATokenToKVPoolAllocator",
    "TokenToKVPoolAllocator",
    "UnifiedMambaSWATokenToKVPoolAllocator",
    "UnifiedMambaTokenToKVPoolAllocator",
    "UnifiedSWATokenToKVPoolAllocator",
    "UnsupportedSGLangVersion",
    "check_sglang",
    "follow_sglang",
    "incompatibilities",
    "install",
    "installed",
    "uninstall",
    "using_kvpool",
]

# Where SGLang's unified-memory-pool factories (``init_unified_swa_pools``,
# ``init_unified_mamba_swa_pools``; ``init_unified_mamba_pools``) find their composites: they
# import the classes from these modules when they build the pools.
UNIFIED_CONSTRUCTION_MODULE = "sglang.srt.mem_cache.allocator.unified_hybrid_swa"
UNIFIED_MAMBA_CONSTRUCTION_MODULE = "sglang.srt.mem_cache.allocator.unified_mamba"

_saved: dict[tuple[str, str], Any] = {}


def _replaced() -> dict[tuple[str, str], type]:
    """``(module, class name)`` of each SGLang construction site and kvpool's class for it."""
    return {(CONSTRUCTION_MODULE, "TokenToKVPoolAllocator"): TokenToKVPoolAllocator,
            (CONSTRUCTION_MODULE, "PagedTokenToKVPoolAllocator"): PagedTokenToKVPoolAllocator,
            (CONSTRUCTION_MODULE, "SWATokenToKVPoolAllocator"): SWATokenToKVPoolAllocator,
            (UNIFIED_CONSTRUCTION_MODULE, "UnifiedSWATokenToKVPoolAllocator"):
                UnifiedSWATokenToKVPoolAllocator,
            (UNIFIED_CONSTRUCTION_MODULE, "UnifiedMambaSWATokenToKVPoolAllocator"):
                UnifiedMambaSWATokenToKVPoolAllocator,
            (UNIFIED_MAMBA_CONSTRUCTION_MODULE, "UnifiedMambaTokenToKVPoolAllocator"):
                UnifiedMambaTokenToKVPoolAllocator}


def install() -> None:
    """Make SGLang construct kvpool's allocators (idempotent).

    Replaces ``TokenToKVPoolAllocator``, ``PagedTokenToKVPoolAllocator`` and (hybrid SWA models)
    ``SWATokenToKVPoolAllocator`` in SGLang's construction module, and the unified memory
    pools ``UnifiedSWATokenToKVPoolAllocator`` (full + SWA),
    ``UnifiedMambaSWATokenToKVPoolAllocator`` (the tri-pool: full + SWA + Mamba state) and
    ``UnifiedMambaTokenToKVPoolAllocator`` (full + Mamba state) where
    ``init_unified_swa_pools`` / ``init_unified_mamba_swa_pools`` /
    ``init_unified_mamba_pools`` import them; the other composites keep SGLang's own:
    pure-SWA, HiSparse and the Mamba slot allocator.
    """
    for (module_name, name), cls in _replaced().items():
        module = importlib.import_module(module_name)
        current = getattr(module, name)
        if current is not cls:
            _saved[module_name, name] = current
            setattr(module, name, cls)


def uninstall() -> None:
    """Restore SGLang's own classes (no-op when not installed)."""
    for (module_name, name), original in list(_saved.items()):
        setattr(importlib.import_module(module_name), name, original)
        del _saved[module_name, name]


def installed() -> bool:
    """Whether SGLang currently constructs kvpool's allocators (every site above)."""
    return all(getattr(importlib.import_module(module_name), name) is cls
               for (module_name, name), cls in _replaced().items())


@contextlib.contextmanager
def using_kvpool() -> Iterator[None]:
    """``install()`` for the duration of a ``with`` block, then ``uninstall()``."""
    install()
    try:
        yield
    finally:
        uninstall()
