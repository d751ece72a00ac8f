"""kvpool.oracle: the differential conformance harness for KV-cache allocators.

Hypothesis stateful testing drives any allocator with SGLang's API and the spec
(``kvpool.spec``) side by side, and reports the first divergence as a short, replayable trace
naming the broken clause. Entry points:

- ``python -m kvpool.oracle [TARGET]`` (:mod:`kvpool.oracle.cli`), ``... replay TRACE.json``;
- ``pytest --kvpool-target module:factory`` (:mod:`kvpool.oracle.pytest_plugin`);
- ``test_conformance = kvpool.oracle.conformance_test("module:factory")`` (:mod:`.api`);
- :func:`run_config` / :func:`load_target` / :func:`replay` for programs.

Importing this package is cheap: torch and Hypothesis load only when a run starts.
"""

from __future__ import annotations

import importlib
from typing import Any

from .capabilities import PAGED, TOKEN, Capabilities

_LAZY = {
    "conformance_test": ".api",
    "run_config": ".runner",
    "run_for": ".runner",
    "configs_for": ".targets",
    "Config": ".targets",
    "Result": ".runner",
    "Target": ".targets",
    "load_target": ".targets",
    "expand": ".targets",
    "replay": ".replay",
    "replay_file": ".replay",
    "Trace": ".trace",
    "TraceStep": ".trace",
    "Failure": ".report",
    "REGISTRY": ".divergences",
    "KnownDivergence": ".divergences",
}

__all__ = ["PAGED", "TOKEN", "Capabilities", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
