"""Trace-level minimization after Hypothesis's shrinking: fewer calls, a smaller pool.

Hypothesis shrinks the choice sequence, which can stop early on long stateful runs. The trace is
concrete, so changing it and replaying it (``kvpool.oracle.engine.replay``) is cheap: a candidate is
kept when the replay still diverges with the same clause; candidates that became invalid under
the spec (e.g. a free of slots no longer allocated) are discarded. Passes, repeated while one
of them helps:

- drop calls: chunks of 8, 4, 2 and 1 calls, tried from the end;
- shrink the pool: the constructor's sizes (``size``, ``size_swa``), smallest candidate first;
- shrink an allocation's size (``need_size``), drop requests of an extend or decode batch,
  and shrink each request's new tokens of an extend (``seq_lens[i] - prefix_lens[i]``, with
  ``extend_num_tokens`` their sum), smallest first.

A changed trace is replayed with its recorded results mapped to the replayed ones (in exact
order too), so a later free names the slots the smaller pool or batch handed out; slots a
smaller allocation no longer hands out leave the later plain frees (``free``, ``free_full``).

Candidate sizes are a few pages (of the trace's page size), then fractions of the value, so a
page-size-16 pool of 3,119 tokens is tried at 16, 32, ... tokens as well as at 389, 779, ...;
the passes repeat while the calls or the sizes go down, so a pool too small for a long extend
is tried again once the extend shrank.

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
        failing_setup=[],
    )
    try:
        found = replay(trace, target, remap=True)
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
    """Smaller constructor sizes, allocation sizes, batches and extend lengths, first success
    per argument."""
    unit = max(1, best.trace.page_size)
    for index, name in list(_int_args(best)):
        steps = _steps(best)
        if index >= len(steps):
            continue
        failed = 0  # the largest size tried that no longer failed alike
        for args, expect in _variants(steps[index].args, steps[index].expect, name, unit):
            if not budget.take():
                return best
            found = _try(best, index, args, expect, target)
            if found is not None:
                best = _bisect(found, index, name, failed, unit, target, budget)
                break
            failed = args.get(name, 0) if name in POOL_ARGS + SIZE_ARGS else 0
    return best


def _try(best: Failure, index: int, args: dict[str, Any], expect: Any,
         target: Target) -> Failure | None:
    """``best`` with step ``index`` given ``args`` and ``expect``, when it fails alike in no
    more calls."""
    steps = _steps(best)
    changed = replace(steps[index], args=args, expect=expect)
    was = steps[index].expect
    gone = set(was) - set(expect or ()) if isinstance(was, list) else set()
    later = [_without(step, gone) for step in steps[index + 1 :]]
    found = _attempt(best, [*steps[:index], changed, *later], target)
    return found if found is not None and found.trace.num_calls() <= best.trace.num_calls() \
        else None


FREE_CALLS = ("free", "free_full")  # calls whose ``free_index`` may name any owned slots


def _without(step: Any, gone: set[int]) -> Any:
    """``step`` with the slots ``gone`` (no longer allocated in a changed trace) left out of a
    plain free's ``free_index``; any other step as it is."""
    if not gone or step.call not in FREE_CALLS or not isinstance(step.args.get("free_index"),
                                                                 list):
        return step
    kept = [s for s in step.args["free_index"] if s not in gone]
    return replace(step, args={**step.args, "free_index": kept})


def _bisect(best: Failure, index: int, name: str, low: int, unit: int, target: Target,
            budget: _Budget) -> Failure:
    """The int argument ``name`` of step ``index`` lowered further, by halving the gap (in
    whole ``unit``s) between ``low``, a size that did not fail alike, and the one that did."""
    if name not in POOL_ARGS + SIZE_ARGS:
        return best
    while budget.left > 0:
        steps = _steps(best)
        high = steps[index].args[name]
        mid = (low + high) // 2 // unit * unit
        if mid <= low or mid >= high or not budget.take():
            return best
        expect = steps[index].expect
        if name in SIZE_ARGS and isinstance(expect, list):
            expect = expect[:mid]
        found = _try(best, index, {**steps[index].args, name: mid}, expect, target)
        best, low = (found, low) if found is not None else (best, mid)
    return best


BATCH_ARGS = ("prefix_lens", "seq_lens", "last_loc")  # per-request lists of a batch


def _variants(
    args: dict[str, Any], expect: Any, name: str, unit: int
) -> Iterator[tuple[dict[str, Any], Any]]:
    """``(args, expect)`` with the size ``name`` smaller, smallest first: an int argument;
    ``drop:i``, request i left out of a batch; ``extend:i``, fewer new tokens of request i
    (``extend_num_tokens`` follows). The recorded result loses the slots left out, so the
    replay maps the rest by position; nothing when ``i`` is past the batch."""
    kind, _, k = name.partition(":")
    if not k:
        value = args.get(name)
        cut = name in SIZE_ARGS and isinstance(expect, list)  # the slots handed out go too
        for candidate in _smaller(value, unit) if isinstance(value, int) else ():
            yield {**args, name: candidate}, (expect[:candidate] if cut else expect)
        return
    i, seqs = int(k), args["seq_lens"]
    if i >= len(seqs) or (kind == "drop" and len(seqs) < 2):
        return
    prefix = args.get("prefix_lens", [s - 1 for s in seqs])  # a decode adds one token each
    new = [s - p for s, p in zip(seqs, prefix)]
    start = sum(new[:i])
    if kind == "drop":
        out = {**args, **{a: [*args[a][:i], *args[a][i + 1 :]] for a in BATCH_ARGS if a in args}}
        if "extend_num_tokens" in args:
            out["extend_num_tokens"] = args["extend_num_tokens"] - new[i]
        yield out, (expect[:start] + expect[start + new[i] :]) if expect else expect
        return
    for candidate in _smaller(new[i], unit):
        lens = [*seqs[:i], prefix[i] + candidate, *seqs[i + 1 :]]
        total = args["extend_num_tokens"] - (new[i] - candidate)
        cut = (expect[: start + candidate] + expect[start + new[i] :]) if expect else expect
        yield {**args, "seq_lens": lens, "extend_num_tokens": total}, cut


def _int_args(failure: Failure) -> Iterator[tuple[int, str]]:
    """(step index, argument name) of every size the minimizer may shrink, pool sizes first;
    a batch's request i is ``drop:i``, an extend's new tokens of request i ``extend:i``."""
    steps = _steps(failure)
    for i, step in enumerate(steps):
        for name in POOL_ARGS if step.call == "create" else ():
            if name in step.args:
                yield i, name
    for i, step in enumerate(steps):
        for name in SIZE_ARGS if step.call != "create" else ():
            if name in step.args:
                yield i, name
        if _batch(step.args):
            yield from ((i, f"drop:{k}") for k in range(len(step.args["seq_lens"])))
        if _batch(step.args) and "extend_num_tokens" in step.args:
            yield from ((i, f"extend:{k}") for k in range(len(step.args["seq_lens"])))


def _batch(args: dict[str, Any]) -> bool:
    """Whether ``args`` are an extend's or a decode's: per-request lists of one length."""
    lists = [args.get(a) for a in BATCH_ARGS if a in args]
    return "seq_lens" in args and "last_loc" in args and all(
        isinstance(v, list) and len(v) == len(args["seq_lens"]) for v in lists)


def _size(args: dict[str, Any], name: str) -> int:
    kind, _, k = name.partition(":")
    if kind == "drop":
        return 1
    if kind == "extend":
        return int(args["seq_lens"][int(k)] - args["prefix_lens"][int(k)])
    return int(args[name])


def _weight(failure: Failure) -> tuple[int, int]:
    """What the minimizer lowers: calls first, then the sizes it shrinks (a batch's requests
    count one each)."""
    steps = _steps(failure)
    return failure.trace.num_calls(), sum(_size(steps[i].args, n) for i, n in _int_args(failure))


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
