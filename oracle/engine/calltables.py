"""The call table of each allocator family, by the name a trace records (``Trace.family``).

Reports, repros and replay look a step's call up here, so one trace format serves every family.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..families.hybrid import calls as hybrid_calls
from ..families.single.calls import CALLS
from ..families.unified import calls as unified_calls
from .call import Call

TABLES: dict[str, Mapping[str, Call]] = {"single": CALLS, "hybrid": hybrid_calls.HYBRID_CALLS,
                                         "unified": unified_calls.UNIFIED_CALLS}
REPRO_IMPORTS: dict[str, tuple[str, ...]] = {"single": (), "hybrid": hybrid_calls.REPRO_IMPORTS,
                                             "unified": unified_calls.REPRO_IMPORTS}


def calls_for(family: str) -> Mapping[str, Call]:
    """The call table of ``family``. Raises ValueError for an unknown family."""
    try:
        return TABLES[family]
    except KeyError:
        raise ValueError(f"unknown allocator family {family!r}; known: {sorted(TABLES)}") from None
