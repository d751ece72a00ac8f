"""Trace-level minimization after Hypothesis's shrinking: drop calls while the failure stays.

Hypothesis shrinks the choice sequence, which can stop early on long stateful runs. The trace is
concrete, so removing calls and replaying it (``kvpool.oracle.replay``) is cheap: a candidate is
kept when the replay still diverges with the same clause; candidates that became invalid under
the spec (e.g. a free of slots no longer allocated) are discarded. Chunks of 8, 4, 2 and 1 calls
are tried from the end, within a time budget.
"""

from __future__ import annotations

import time
from dataclasses import replace

from .replay import replay
from .report import Failure, OracleError
from .target import Target


def _attempt(failure: Failure, steps: list, target: Target) -> Failure | None:  # type: ignore[type-arg]
    trace = replace(
        failure.trace,
        steps=steps,
        failing_step=len(steps) - 1,
        clause=None,
        detail=None,
        final_asserts=[],
    )
    try:
        found = replay(trace, target)
    except (OracleError, AssertionError):
        return None
    except Exception:  # the shortened trace crashed the target in another way: not the same bug
        return None
    if found is None or found.clause != failure.clause:
        return None
    return found


def minimize(failure: Failure, target: Target, *, seconds: float = 5.0) -> Failure:
    """The shortest variant of ``failure``'s trace found within ``seconds`` (same clause)."""
    deadline = time.perf_counter() + seconds
    best = failure
    changed = True
    while changed and time.perf_counter() < deadline:
        changed = False
        for size in (8, 4, 2, 1):
            end = best.trace.failing_step
            steps = best.trace.steps[: (len(best.trace.steps) if end is None else end + 1)]
            hi = len(steps) - 2  # never drop the constructor (0) or the failing call (last)
            while hi >= 1 and time.perf_counter() < deadline:
                lo = max(1, hi - size + 1)
                found = _attempt(best, steps[:lo] + steps[hi + 1 :], target)
                if found is not None and found.trace.num_calls() < best.trace.num_calls():
                    best, changed = found, True
                    fs = best.trace.failing_step
                    steps = best.trace.steps[: (len(best.trace.steps) if fs is None else fs + 1)]
                    hi = min(lo - 1, len(steps) - 2)
                else:
                    hi -= 1
    return best
