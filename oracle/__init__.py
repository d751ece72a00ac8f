"""kvpool.oracle: the differential conformance harness for KV-cache allocators.

Hypothesis stateful testing drives any allocator with SGLang's API and the spec
(``kvpool.spec``) side by side, and reports the first divergence as a short, replayable trace
naming the broken clause. Entry points:

- ``python -m kvpool.oracle [TARGET]`` (:mod:`kvpool.oracle.entry.cli`), ``... replay TRACE.json``;
- ``pytest --kvpool-target module:factory`` (:mod:`kvpool.oracle.pytest_plugin`);
- ``test_conformance = kvpool.oracle.conformance_test("module:factory")`` (:mod:`.entry.api`);
- :func:`run_config` / :func:`load_target` / :func:`replay` for programs.

Importing this package is cheap: torch and Hypothesis load only when a run starts.
"""

from __future__ import annotations

import importlib
from typing import Any

from .engine.capabilities import PAGED, TOKEN, Capabilities

_LAZY = {
    "conformance_test": ".entry.api",
    "run_config": ".engine.runner",
    "run_for": ".engine.runner",
    "configs_for": ".families.single.targets",
    "Config": ".engine.target",
    "Result": ".engine.runner",
    "Target": ".engine.target",
    "load_target": ".families.single.targets",
    "expand": ".families.single.targets",
    "replay": ".engine.replay",
    "replay_file": ".engine.replay",
    "Trace": ".engine.trace",
    "TraceStep": ".engine.trace",
    "Failure": ".engine.report",
    "REGISTRY": ".peers.divergences",
    "KnownDivergence": ".peers.divergences",
    "HybridCapabilities": ".families.hybrid.targets",
    "family": ".engine.families",
}

__all__ = ["PAGED", "TOKEN", "Capabilities", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
