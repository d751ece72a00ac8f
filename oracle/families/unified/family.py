"""The unified memory-pool family: SGLang 0.5.23's ``UnifiedSWATokenToKVPoolAllocator``, eager
and lazy compaction (``python -m kvpool.oracle --family unified``). Its call table is
:mod:`kvpool.oracle.families.unified.calls`."""

from __future__ import annotations

from ...engine.families import Family
from .calls import UNIFIED_CALLS
from .coverage import UNIFIED
from .executor import UnifiedExecutor
from .machine import unified_machine_for
from .targets import UNIFIED_TARGETS, UnifiedCapabilities

FAMILY = Family(
    "unified",
    UNIFIED_CALLS,
    UnifiedExecutor,
    unified_machine_for,
    UNIFIED,
    UnifiedCapabilities,
    "kvpool_unified_capabilities",
    UNIFIED_TARGETS,
    default_examples=30,
    default_steps=30,
)
