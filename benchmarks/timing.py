"""Timing helpers: warm-up, calibrated windows, medians of window means.

Every measurement is a *step* function run many times. ``measure`` warms up, calibrates how many
steps fill a window of ``Settings.window_s`` seconds, then times ``Settings.windows`` windows and
returns the median (and mean, min, max) of the per-step window means in microseconds. A step
that must not be timed as a whole (e.g. the untimed free that restores the state after an
``alloc_extend``) times itself and returns its own elapsed seconds; ``measure`` then sums those.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# A step either returns None (the whole call is timed) or the seconds it timed itself.
Step = Callable[[], float | None]


@dataclass(frozen=True)
class Settings:
    """How long and how often to measure."""

    warmup_steps: int = 20
    window_s: float = 0.05
    windows: int = 9
    max_steps_per_window: int = 20_000


@dataclass(frozen=True)
class Sample:
    """Per-step cost in microseconds: median of window means, plus spread."""

    median_us: float
    mean_us: float
    min_us: float
    max_us: float
    steps_per_window: int
    windows: int

    def as_dict(self) -> dict[str, float | int]:
        """JSON-ready fields."""
        return {
            "median_us": self.median_us,
            "mean_us": self.mean_us,
            "min_us": self.min_us,
            "max_us": self.max_us,
            "steps_per_window": self.steps_per_window,
            "windows": self.windows,
        }


def _run_window(step: Step, num_steps: int) -> float:
    """Seconds spent in ``num_steps`` steps (self-timed steps report their own share)."""
    self_timed = 0.0
    any_self_timed = False
    t0 = time.perf_counter()
    for _ in range(num_steps):
        r = step()
        if r is not None:
            self_timed += r
            any_self_timed = True
    elapsed = time.perf_counter() - t0
    return self_timed if any_self_timed else elapsed


def _calibrate(step: Step, settings: Settings, cap: int) -> int:
    """Warm up, then the step count that fills one window of ``settings.window_s``."""
    _run_window(step, min(settings.warmup_steps, cap))
    n = 1
    while True:
        wall0 = time.perf_counter()
        _run_window(step, n)
        wall = time.perf_counter() - wall0
        if wall >= settings.window_s / 4 or n >= cap:
            break
        n = min(cap, n * 4)
    if wall > 0:
        n = max(1, min(cap, int(n * settings.window_s / wall)))
    return n


def _sample(means: list[float], n: int) -> Sample:
    return Sample(median_us=statistics.median(means), mean_us=statistics.fmean(means),
                  min_us=min(means), max_us=max(means), steps_per_window=n, windows=len(means))


def measure(step: Step, settings: Settings, max_steps: int | None = None) -> Sample:
    """Warm up, calibrate and time ``step`` alone; returns µs per step.

    ``max_steps`` caps the steps per window. Exceptions from ``step`` propagate.
    """
    cap = settings.max_steps_per_window if max_steps is None else max(1, max_steps)
    n = _calibrate(step, settings, cap)
    return _sample([_run_window(step, n) / n * 1e6 for _ in range(settings.windows)], n)


def measure_interleaved(steps: dict[str, Step], settings: Settings,
                        on_error: Callable[[str, BaseException], None]) -> dict[str, Sample]:
    """Time several steps with their windows interleaved (A B C A B C ...).

    On a shared machine the load drifts; interleaving puts every implementation of one row under
    the same drift, so the ratios of the medians stay fair. A step that raises is reported to
    ``on_error`` and dropped; the others go on.
    """
    counts: dict[str, int] = {}
    for name, step in steps.items():
        try:
            counts[name] = _calibrate(step, settings, settings.max_steps_per_window)
        except Exception as exc:
            on_error(name, exc)
    means: dict[str, list[float]] = {name: [] for name in counts}
    for w in range(settings.windows):
        names = list(means)
        k = w % len(names) if names else 0
        for name in names[k:] + names[:k]:  # rotate who goes first
            try:
                means[name].append(_run_window(steps[name], counts[name]) / counts[name] * 1e6)
            except Exception as exc:
                on_error(name, exc)
                del means[name]
    return {name: _sample(m, counts[name]) for name, m in means.items()}


def probe_args(module: str, doc: str, quick_help: str,
               argv: list[str] | None) -> argparse.Namespace:
    """The command line of a one-script probe, ``python -m benchmarks.<module> [--out DIR]
    [--quick]`` (``--out`` defaults to ``benchmarks/results``), parsed from ``argv``."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{module}",
                                     description=doc.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--quick", action="store_true", help=quick_help)
    return parser.parse_args(argv)
