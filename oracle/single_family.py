"""The single-pool family: SGLang's token and paged allocators (``python -m kvpool.oracle``)."""

from __future__ import annotations

from .calls import CALLS
from .capabilities import Capabilities
from .clauses import SINGLE
from .executor import Executor
from .families import Family
from .machine import machine_for

FAMILY = Family(
    "single", CALLS, Executor, machine_for, SINGLE, Capabilities, "kvpool_capabilities", {}
)
