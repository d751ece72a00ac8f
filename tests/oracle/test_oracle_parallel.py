"""Runs past one core: ``python -m kvpool.oracle --jobs N`` (the pytest plugin on pytest-xdist)
gives the serial run's verdicts, calls, step hashes, coverage and clauses in one merged report;
a failure keeps its trace; ``--rounds`` makes a reproducible soak (one seed per round)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kvpool.oracle.entry.cli import main

pytest.importorskip("xdist")
SMALL = ["kvpool.oracle.families.single.targets:kvpool_paged", "--page-sizes", "1,4",
         "--need-sort", "false", "--examples", "12"]


def _report(path: Path) -> dict:  # type: ignore[type-arg]
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def _by_config(report: dict) -> dict:  # type: ignore[type-arg]
    keep = ("status", "examples", "calls", "step_hash", "coverage", "clauses")
    return {
        (r["target"], r["page_size"], r["need_sort"]): {k: r[k] for k in keep}
        for r in report["configurations"]
    }


def test_parallel_run_equals_the_serial_run(tmp_path: Path) -> None:
    serial, parallel = tmp_path / "serial.json", tmp_path / "parallel.json"
    assert main([*SMALL, "--json", str(serial)]) == 0
    assert main([*SMALL, "--jobs", "2", "--json", str(parallel)]) == 0
    one, two = _report(serial), _report(parallel)
    assert _by_config(one) == _by_config(two)
    for key in ("coverage_missing", "clauses", "clauses_missing"):
        assert one[key] == two[key], key


def test_parallel_failure_keeps_its_trace(tmp_path: Path) -> None:
    """A broken allocator of the test suite, as a user runs it (its folder on PYTHONPATH)."""
    argv = ["broken_hybrid:slide_frees_full", "--family", "hybrid", "--page-sizes", "4",
            "--examples", "40", "--jobs", "2", "--trace-dir", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    run = subprocess.run([sys.executable, "-m", "kvpool.oracle", *argv], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout + run.stderr
    out = run.stdout
    (trace,) = tmp_path.glob("*.json")
    clause = json.loads(trace.read_text())["clause"]
    assert f"FAIL {clause}" in out and "def test_kvpool_repro" in out
    replayed = subprocess.run([sys.executable, "-m", "kvpool.oracle", "replay", str(trace)],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert replayed.returncode == 1 and f"[{clause}]" in replayed.stdout


def test_rounds_are_a_reproducible_soak(tmp_path: Path) -> None:
    """Two rounds per configuration: seeds 5 and 6, each its own examples; the same command
    gives the same step hashes again."""
    first, again = tmp_path / "a.json", tmp_path / "b.json"
    argv = [*SMALL[:2], "4", *SMALL[3:5], "--examples", "5", "--rounds", "2", "--seed", "5"]
    assert main([*argv, "--json", str(first)]) == 0
    assert main([*argv, "--jobs", "2", "--json", str(again)]) == 0
    rows = _report(first)["configurations"]
    assert len(rows) == 2 and rows[0]["step_hash"] != rows[1]["step_hash"]
    assert [r["step_hash"] for r in rows] == [
        r["step_hash"] for r in _report(again)["configurations"]
    ]


def test_a_failing_soak_round_prints_the_seed_that_replays_it(tmp_path: Path) -> None:
    """A soak (``--rounds``) of a broken allocator: the failing round's report names its seed,
    and one run with that seed fails alike (the same clause)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    common = ["broken_hybrid:slide_frees_full", "--family", "hybrid", "--page-sizes", "4",
              "--need-sort", "false", "--examples", "40"]

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kvpool.oracle", *common, *extra],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)

    soak = run("--rounds", "2", "--seed", "11")
    assert soak.returncode == 1, soak.stdout + soak.stderr
    seeds = {int(s) for s in re.findall(r"this round again: --seed (\d+)", soak.stdout)}
    assert seeds and seeds <= {11, 12}, soak.stdout
    clause = re.search(r"FAIL (\S+)", soak.stdout)
    assert clause is not None, soak.stdout
    again = run("--seed", str(min(seeds)))
    assert again.returncode == 1 and f"FAIL {clause.group(1)}" in again.stdout, again.stdout
