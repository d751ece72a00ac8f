"""The hybrid sliding-window family: SGLang 0.5.23's ``SWATokenToKVPoolAllocator`` and
kvpool's (``python -m kvpool.oracle --family hybrid``). Its call table is
:mod:`kvpool.oracle.hybrid_calls`."""

from __future__ import annotations

from .families import Family
from .hybrid_calls import HYBRID_CALLS
from .hybrid_coverage import HYBRID
from .hybrid_executor import HybridExecutor
from .hybrid_machine import hybrid_machine_for
from .hybrid_targets import HYBRID_TARGETS, HybridCapabilities

FAMILY = Family(
    "hybrid",
    HYBRID_CALLS,
    HybridExecutor,
    hybrid_machine_for,
    HYBRID,
    HybridCapabilities,
    "kvpool_hybrid_capabilities",
    HYBRID_TARGETS,
    default_examples=60,
    default_steps=30,
)
