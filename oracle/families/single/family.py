"""The single-pool family: SGLang's token and paged allocators (``python -m kvpool.oracle``)."""

from __future__ import annotations

from ...engine.capabilities import Capabilities
from ...engine.families import Family
from .calls import CALLS
from .clause_map import SINGLE
from .executor import Executor
from .machine import machine_for

FAMILY = Family(
    "single", CALLS, Executor, machine_for, SINGLE, Capabilities, "kvpool_capabilities", {}
)
