"""``--seed N`` reproduces a run's calls exactly, whatever the machine's load.

A run is slowed here by a clock that jumps 50 s at every reading (what a loaded machine looks
like to any time budget: Hypothesis's shrinking deadline, the minimizer's, a phase bounded in
seconds); the calls (step hash), the reported clause and the shrunk trace stay the same.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path

import pytest
from broken_allocators import BROKEN
from kvpool.oracle.engine.capabilities import capabilities_of
from kvpool.oracle.engine.runner import Result, run_config
from kvpool.oracle.engine.target import Config, Target
from spec_torch import spec_paged

LEAK = next(b for b in BROKEN if b.cls.__name__ == "LeakOnFree")


def slow_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on every reading of the clocks is 50 s later than the one before."""
    real = time.perf_counter
    jumps = [0.0]

    def jumping() -> float:
        jumps[0] += 50.0
        return real() + jumps[0]

    monkeypatch.setattr(time, "perf_counter", jumping)
    monkeypatch.setattr(time, "monotonic", jumping)


def _run(target: Target, config: Config, seed: int) -> Result:
    return run_config(target, config, max_examples=60, seed=seed)


def _leak() -> tuple[Target, Config]:
    return Target(LEAK.factory, capabilities_of(LEAK.factory), LEAK.path), Config(4, False)


def test_a_failure_is_the_same_on_a_slow_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same seed: same calls, clause and shrunk trace (shrinking counts steps, not seconds)."""
    target, config = _leak()
    reference = _run(target, config, 7)
    slow_clock(monkeypatch)
    slowed = _run(target, config, 7)
    monkeypatch.undo()
    assert reference.failure is not None and slowed.failure is not None
    assert slowed.step_hash == reference.step_hash
    assert slowed.failure.clause == reference.failure.clause
    assert slowed.failure.trace.to_json() == reference.failure.trace.to_json()


def test_a_passing_run_is_the_same_on_a_slow_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    target = Target(spec_paged, capabilities_of(spec_paged), "spec_torch:spec_paged")
    config = Config(4, True)
    reference = _run(target, config, 3)
    slow_clock(monkeypatch)
    slowed = _run(target, config, 3)
    monkeypatch.undo()
    assert reference.ok and slowed.ok
    assert (slowed.step_hash, slowed.calls) == (reference.step_hash, reference.calls)
    assert slowed.coverage == reference.coverage


def test_a_run_does_not_depend_on_what_the_process_imported(
    tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hypothesis's draws of constants from local modules stay out of a run: importing a new
    module full of constants between two runs changes nothing."""
    target = Target(spec_paged, capabilities_of(spec_paged), "spec_torch:spec_paged")
    reference = _run(target, Config(4, False), 5)
    folder = Path(str(tmp_path))
    values = ", ".join(str(v) for v in range(1, 1200, 3))  # sizes a run draws
    (folder / "kvpool_seeded_constants.py").write_text(f"VALUES = ({values})\n")
    monkeypatch.syspath_prepend(str(folder))
    importlib.import_module("kvpool_seeded_constants")
    again = _run(target, Config(4, False), 5)
    assert (again.step_hash, again.calls) == (reference.step_hash, reference.calls)


def test_another_seed_other_calls() -> None:
    """The seed is what decides (the comparison above is not vacuous)."""
    target = Target(spec_paged, capabilities_of(spec_paged), "spec_torch:spec_paged")
    hashes = {_run(target, Config(4, False), seed).step_hash for seed in (1, 2)}
    assert len(hashes) == 2
