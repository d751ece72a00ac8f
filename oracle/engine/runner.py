"""Run the state machine over a target's configuration matrix and collect results."""

from __future__ import annotations

import contextlib
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, Verbosity, settings

from .families import family
from .minimize import minimize
from .report import (
    Failure,
    OracleError,
    OracleFailure,
    first_failure_at,
    latest_failure,
    reset_latest,
)
from .steps import run_machine
from .target import DEFAULT_EXAMPLES, DEFAULT_STEPS, Config, Target

__all__ = [
    "DEFAULT_EXAMPLES", "DEFAULT_STEPS", "Config", "Result", "Target", "run_config", "run_for",
]

DEFAULT_SHRINKS = 20  # Hypothesis's successful shrinks per failure (its own cap is 500)
DEFAULT_MAX_REPLAYS = 400  # the trace minimizer's replays per failure


@contextlib.contextmanager
def shrink_budget(shrinks: int) -> Iterator[None]:
    """Bound Hypothesis's shrinking by ``shrinks`` successful shrinks, not by its clock.

    Its own bounds are 500 shrinks or 300 s, whichever comes first; the time bound makes the
    shrunk example depend on the machine's load, so it is lifted for the duration of a run.
    """
    try:
        from hypothesis.internal.conjecture import engine
    except ImportError:  # pragma: no cover - a Hypothesis without that module
        yield
        return
    saved = engine.MAX_SHRINKS, engine.MAX_SHRINKING_SECONDS
    engine.MAX_SHRINKS = shrinks
    engine.MAX_SHRINKING_SECONDS = 10**9
    try:
        yield
    finally:
        engine.MAX_SHRINKS, engine.MAX_SHRINKING_SECONDS = saved


@contextlib.contextmanager
def no_local_constants() -> Iterator[None]:
    """Keep Hypothesis from drawing constants found in the modules this process has imported.

    Hypothesis mixes into its draws constants it collects from every local module in
    ``sys.modules``, re-collected whenever a module is imported: the same seed then draws other
    calls depending on what the process imported before (an earlier run, a lazy import) and on
    the source of the local code. With none, a run's calls are a function of its seed.
    """
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a Hypothesis without that module
        yield
        return
    saved = providers._get_local_constants
    empty = providers.Constants()  # type: ignore[attr-defined]
    providers._get_local_constants = lambda: empty
    try:
        yield
    finally:
        providers._get_local_constants = saved


@dataclass
class Result:
    """What one configuration run found."""

    target: str
    config: Config
    examples: int = 0
    calls: int = 0
    seconds: float = 0.0
    seconds_to_failure: float | None = None  # until the first failing example, before shrinking
    failure: Failure | None = None
    error: str | None = None
    coverage: Counter[str] = field(default_factory=Counter)  # events reached (.coverage)
    step_hash: str = ""  # of every step's call and arguments, in order (machine.record_example)
    reported: str | None = None  # the status a parallel run's worker reported (no failure object)
    seed: int | None = None  # the seed of the (last) round run; None: derandomized

    @property
    def ok(self) -> bool:
        """Conformant: no failure, no error, and at least one call ran."""
        fine = self.reported in (None, "ok")
        return fine and self.failure is None and self.error is None and self.calls > 0

    def constructor_clause(self) -> str | None:
        """The clause the constructor already broke (the failure came before any call: its
        trace fails at ``create``, or a worker's row reports a failure and no call), else None."""
        if self.failure is not None:
            return self.failure.clause if self.failure.at_constructor() else None
        reported = self.reported or ""
        if reported.startswith("FAIL ") and not self.calls:
            return reported.removeprefix("FAIL ")
        return None

    def status(self) -> str:
        if self.reported is not None:
            return self.reported
        if self.error:
            return "ERROR"
        if self.failure is not None:
            return f"FAIL {self.failure.clause}"
        return "ok" if self.calls > 0 else "NO CALLS"


def confirmed_of(minimized: Failure, shrunk: Failure) -> Failure:
    """The minimized failure, unless its repro is not confirmed (:meth:`Failure.repro_check`:
    it passes on the target or fails on kvpool's correct allocator) and the one of the trace
    Hypothesis shrunk is not so: then that one (the repair of a repro the minimizer broke).
    Runs each repro at most once."""
    if minimized is shrunk or minimized.repro_check().status != "unconfirmed":
        return minimized
    return shrunk if shrunk.repro_check().status != "unconfirmed" else minimized


def run_config(
    target: Target,
    config: Config,
    *,
    max_examples: int = DEFAULT_EXAMPLES,
    seed: int | None = None,
    step_count: int = DEFAULT_STEPS,
    shrink_seconds: float | None = None,
    shrinks: int = DEFAULT_SHRINKS,
    max_replays: int = DEFAULT_MAX_REPLAYS,
    verbosity: Verbosity = Verbosity.quiet,
) -> Result:
    """Run the machine on one configuration and shrink the first failure it finds.

    Shrinking is bounded by steps, never by a clock: Hypothesis makes at most ``shrinks``
    successful shrinks, then the trace minimizer (``kvpool.oracle.engine.minimize``) at most
    ``max_replays`` replays. The calls, the reported clause and the shrunk trace are therefore
    a function of the seed (``seed=None``: derandomized, the same examples every time), whatever
    the machine's load. ``shrink_seconds``: an older keyword, kept for callers; ``0`` turns
    shrinking off, any other value is ignored.
    """
    cls = family(target.family).machine_for(target, config)
    if seed is not None:
        cls._hypothesis_internal_use_seed = seed
    shrink = shrink_seconds != 0
    phases = [Phase.explicit, Phase.generate, Phase.target, *([Phase.shrink] if shrink else [])]
    run_settings = settings(
        max_examples=max_examples,
        phases=phases,
        stateful_step_count=step_count,
        deadline=None,  # no clock in the seeded path: deadlines, health checks, a database
        database=None,
        derandomize=seed is None,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        verbosity=verbosity,
        print_blob=False,
    )
    result = Result(target.path, config, seed=seed)
    reset_latest()
    start = time.perf_counter()
    try:
        with shrink_budget(shrinks), no_local_constants():
            run_machine(cls, run_settings)
    except OracleFailure as err:
        result.failure = latest_failure() or err.failure
    except OracleError as err:
        result.error = f"oracle error: {err}"
    except Exception as err:  # the target crashed outside a compared call, or Hypothesis gave up
        where = traceback.extract_tb(err.__traceback__)[-1]
        result.error = f"{type(err).__name__}: {err} (at {where.filename}:{where.lineno})"
    first = first_failure_at()
    if result.failure is not None and shrink:
        result.failure = confirmed_of(
            minimize(result.failure, target, max_replays=max_replays), result.failure
        )
    result.seconds = time.perf_counter() - start
    if result.failure is not None and first is not None:
        result.seconds_to_failure = first - start
    result.examples, result.calls = cls.stats["examples"], cls.stats["calls"]
    result.step_hash = cls.digest.hexdigest()[:16]
    result.coverage = Counter(cls.coverage)
    return result


def run_for(
    target: Target,
    config: Config,
    *,
    seconds: float,
    examples_per_round: int = 100,
    seed: int = 0,
    step_count: int = DEFAULT_STEPS,
) -> Result:
    """Run rounds with successive seeds until ``seconds`` passed or a failure was found.

    How many rounds run depends on the machine's speed; each round's calls do not: the result's
    ``seed`` is the last round's, and ``run_config`` with that seed and ``examples_per_round``
    examples repeats it exactly (the command line prints that command on a failure)."""
    total = Result(target.path, config)
    start = time.perf_counter()
    round_seed = seed
    while time.perf_counter() - start < seconds:
        r = run_config(
            target, config, max_examples=examples_per_round, seed=round_seed, step_count=step_count
        )
        total.examples += r.examples
        total.calls += r.calls
        total.coverage.update(r.coverage)
        total.failure, total.error, total.seed = r.failure, r.error, round_seed
        round_seed += 1
        if not r.ok:
            break
    total.seconds = time.perf_counter() - start
    return total
