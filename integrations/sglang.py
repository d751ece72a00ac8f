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
where SGLang constructs its allocators (``sglang.srt.mem_cache.kv_cache_configurator``); call it
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

__all__ = [
    "KVPOOL_OWNS",
    "TESTED_SGLANG_VERSIONS",
    "ContractAssertionError",
    "PagedTokenToKVPoolAllocator",
    "SWATokenToKVPoolAllocator",
    "TokenToKVPoolAllocator",
    "UnsupportedSGLangVersion",
    "check_sglang",
    "follow_sglang",
    "incompatibilities",
    "install",
    "installed",
    "uninstall",
    "using_kvpool",
]

_saved: dict[str, Any] = {}


def _replaced() -> dict[str, type]:
    """SGLang's class names at the construction site and kvpool's class for each."""
    return {"TokenToKVPoolAllocator": TokenToKVPoolAllocator,
            "PagedTokenToKVPoolAllocator": PagedTokenToKVPoolAllocator,
            "SWATokenToKVPoolAllocator": SWATokenToKVPoolAllocator}


def install() -> None:
    """Make SGLang construct kvpool's allocators (idempotent).

    Replaces ``TokenToKVPoolAllocator``, ``PagedTokenToKVPoolAllocator`` and (hybrid SWA models)
    ``SWATokenToKVPoolAllocator`` in SGLang's construction module; the other composites
    (pure-SWA, unified, HiSparse, Mamba) keep SGLang's own.
    """
    module = importlib.import_module(CONSTRUCTION_MODULE)
    for name, cls in _replaced().items():
        current = getattr(module, name)
        if current is not cls:
            _saved[name] = current
            setattr(module, name, cls)


def uninstall() -> None:
    """Restore SGLang's own classes (no-op when not installed)."""
    module = importlib.import_module(CONSTRUCTION_MODULE)
    for name, original in list(_saved.items()):
        setattr(module, name, original)
        del _saved[name]


def installed() -> bool:
    """Whether SGLang currently constructs kvpool's allocators."""
    module = importlib.import_module(CONSTRUCTION_MODULE)
    return all(getattr(module, name) is cls for name, cls in _replaced().items())


@contextlib.contextmanager
def using_kvpool() -> Iterator[None]:
    """``install()`` for the duration of a ``with`` block, then ``uninstall()``."""
    install()
    try:
        yield
    finally:
        uninstall()
