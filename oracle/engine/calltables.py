"""The call table of each allocator family, by the name a trace records (``Trace.family``).

Reports, repros and replay look a step's call up here, so one trace format serves every family.
Each table (and a repro's extra import lines) is the one its registry record names
(:mod:`.registry`), imported on first use: a loaded module's constants join what Hypothesis
draws from, so a run loads no other family's table.
"""

from __future__ import annotations

from collections.abc import Mapping

from .call import Call
from .registry import load, registered

_TABLES: dict[str, Mapping[str, Call]] = {}
_IMPORTS: dict[str, tuple[str, ...]] = {}


def calls_for(family: str) -> Mapping[str, Call]:
    """The call table of ``family`` (its record's ``calls``). Raises ValueError for an unknown
    family."""
    if family not in _TABLES:
        _TABLES[family] = load(registered(family).calls)
    return _TABLES[family]


def repro_imports(family: str) -> tuple[str, ...]:
    """The import lines a repro of ``family`` needs beside the factory (its record's
    ``repro_imports``; none where it names none). Raises ValueError for an unknown family."""
    if family not in _IMPORTS:
        path = registered(family).repro_imports
        _IMPORTS[family] = tuple(load(path)) if path else ()
    return _IMPORTS[family]
