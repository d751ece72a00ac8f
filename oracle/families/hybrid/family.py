"""The hybrid sliding-window family: SGLang 0.5.23's ``SWATokenToKVPoolAllocator`` and
kvpool's (``python -m kvpool.oracle --family hybrid``). Its call table is
:mod:`kvpool.oracle.families.hybrid.calls`."""

from __future__ import annotations

from ...engine.families import Family
from .calls import HYBRID_CALLS
from .coverage import HYBRID
from .executor import HybridExecutor
from .machine import hybrid_machine_for
from .targets import HYBRID_TARGETS, HybridCapabilities

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
