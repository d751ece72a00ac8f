"""Trace-level minimization after Hypothesis's shrinking: fewer calls, a smaller pool.

Hypothesis shrinks the choice sequence, which can stop early on long stateful runs. The trace is
concrete, so changing it and replaying it (``kvpool.oracle.replay``) is cheap: a candidate is
kept when the replay still diverges with the same clause; candidates that became invalid under
the spec (e.g. a free of slots no longer allocated) are discarded. Passes, repeated while one
of them helps:

- drop calls: chunks of 8, 4, 2 and 1 calls, tried from the end;
- shrink the pool: the constructor's sizes (``size``, ``size_swa``), smallest candidate first;
- shrink an allocation's size (``need_size``), smallest candidate first.

The budget is a number of replays (``max_replays``), never a clock, so the result is a function
of the input trace alone, whatever the machine's load.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from .replay import replay
from .report import Failure, OracleError
from .target import Target

DEFAULT_MAX_REPLAYS = 400
POOL_ARGS = ("size", "size_swa")  # a constructor's sizes, in tokens
SIZE_ARGS = ("need_size",)  # an allocation's size, in tokens


class _Budget:
    """Replays left; ``take()`` is False once they are spent."""

    def __init__(self, replays: int) -> None:
        self.left = replays

    def take(self) -> bool:
        self.left -= 1
        return self.left >= 0


def _steps(failure: Failure) -> list[Any]:
    end = failure.trace.failing_step
    return failure.trace.steps[: (len(failure.trace.steps) if end is None else end + 1)]


def _attempt(failure: Failure, steps: list[Any], target: Target) -> Failure | None:
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
    except Exception:  # the changed trace crashed the target in another way: not the same bug
        return None
    if found is None or found.clause != failure.clause:
        return None
    return found


def _smaller(value: int, unit: int) -> list[int]:
    """Candidate sizes below ``value``, ascending: a few units, then fractions of ``value``."""
    few = [unit * k for k in (1, 2, 3, 4, 6, 8, 12, 16)]
    cuts = [value // 8, value // 4, value // 2, value * 3 // 4, value - unit, value - 1]
    return sorted({v for v in (*few, *cuts) if 0 < v < value})


def _drop_calls(best: Failure, target: Target, budget: _Budget) -> Failure:
    for size in (8, 4, 2, 1):
        steps = _steps(best)
        hi = len(steps) - 2  # never drop the constructor (0) or the failing call (last)
        while hi >= 1 and budget.take():
            lo = max(1, hi - size + 1)
            found = _attempt(best, steps[:lo] + steps[hi + 1 :], target)
            if found is not None and found.trace.num_calls() < best.trace.num_calls():
                best = found
                steps = _steps(best)
                hi = min(lo - 1, len(steps) - 2)
            else:
                hi -= 1
    return best


def _shrink_args(best: Failure, target: Target, budget: _Budget) -> Failure:
    """Smaller constructor sizes and allocation sizes, first success per argument."""
    unit = max(1, best.trace.page_size)
    for index, name in list(_int_args(best)):
        steps = _steps(best)
        if index >= len(steps):
            continue
        value = steps[index].args.get(name)
        if not isinstance(value, int):
            continue
        for candidate in _smaller(value, unit):
            if not budget.take():
                return best
            changed = replace(steps[index], args={**steps[index].args, name: candidate})
            found = _attempt(best, [*steps[:index], changed, *steps[index + 1 :]], target)
            if found is not None and found.trace.num_calls() <= best.trace.num_calls():
                best = found
                break
    return best


def _int_args(failure: Failure) -> Iterator[tuple[int, str]]:
    """(step index, argument name) of every size the minimizer may shrink, pool sizes first."""
    steps = _steps(failure)
    for i, step in enumerate(steps):
        for name in POOL_ARGS if step.call == "create" else ():
            if name in step.args:
                yield i, name
    for i, step in enumerate(steps):
        for name in SIZE_ARGS if step.call != "create" else ():
            if name in step.args:
                yield i, name


def _weight(failure: Failure) -> tuple[int, int]:
    """What the minimizer lowers: calls first, then the sizes it shrinks."""
    steps = _steps(failure)
    sizes = sum(s.args[n] for i, n in _int_args(failure) for s in (steps[i],))
    return failure.trace.num_calls(), sizes


def minimize(
    failure: Failure, target: Target, *, max_replays: int = DEFAULT_MAX_REPLAYS
) -> Failure:
    """The smallest variant of ``failure``'s trace found within ``max_replays`` replays (same
    clause): fewest calls, then the smallest pool and allocation sizes. Deterministic."""
    budget = _Budget(max_replays)
    best = failure
    while budget.left > 0:
        before = _weight(best)
        best = _shrink_args(_drop_calls(best, target, budget), target, budget)
        if _weight(best) >= before:
            break
    return best
