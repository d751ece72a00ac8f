"""The call table of each allocator family, by the name a trace records (``Trace.family``).

Reports, repros and replay look a step's call up here, so one trace format serves every family.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from ..families.hybrid import calls as hybrid_calls
from ..families.single.calls import CALLS
from .call import Call

TABLES: dict[str, Mapping[str, Call]] = {"single": CALLS, "hybrid": hybrid_calls.HYBRID_CALLS}
# imported on first use: a loaded module's constants join what Hypothesis draws from, so the
# other families' runs stay as they were
LATER: dict[str, tuple[str, str]] = {
    "unified": ("kvpool.oracle.families.unified.calls", "UNIFIED_CALLS")}
REPRO_IMPORTS: dict[str, tuple[str, ...]] = {"single": (), "hybrid": hybrid_calls.REPRO_IMPORTS}


def calls_for(family: str) -> Mapping[str, Call]:
    """The call table of ``family``. Raises ValueError for an unknown family."""
    if family not in TABLES and family in LATER:
        module, name = LATER[family]
        TABLES[family] = getattr(importlib.import_module(module), name)
    try:
        return TABLES[family]
    except KeyError:
        known = sorted({*TABLES, *LATER})
        raise ValueError(f"unknown allocator family {family!r}; known: {known}") from None


def repro_imports(family: str) -> tuple[str, ...]:
    """The import lines a repro of ``family`` needs beside the factory (its calls module's
    ``REPRO_IMPORTS``, that module imported on first use). Raises ValueError for an unknown
    family."""
    if family not in REPRO_IMPORTS:
        calls_for(family)  # raises for an unknown family
        module, _ = LATER[family]
        REPRO_IMPORTS[family] = tuple(importlib.import_module(module).REPRO_IMPORTS)
    return REPRO_IMPORTS[family]
