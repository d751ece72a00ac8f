"""A data-plane failure's pytest repro: the K/V signatures are written and read by the harness,
not by the calls a repro prints, so its last lines replay the recorded trace with the data plane
on (:func:`replay_with_plane`) and require that no clause breaks.

Kept apart from :mod:`kvpool.oracle.engine.dataplane` (which the engine imports): this module
imports the replay, which imports the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .families import family
from .replay import replay
from .trace import Trace

__all__ = ["replay_with_plane"]


def replay_with_plane(trace_json: str, factory: Callable[..., Any]) -> str | None:
    """Replay the JSON trace on ``factory`` (its declared capabilities) with the data plane on;
    ``"[CLAUSE] detail"`` of the first divergence, or None when every step conforms."""
    trace = Trace.from_json(trace_json)
    trace.data_plane = True
    failure = replay(trace, family(trace.family).target(factory))
    return None if failure is None else f"[{failure.clause}] {failure.detail}"

