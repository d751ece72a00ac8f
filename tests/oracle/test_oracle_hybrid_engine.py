"""The hybrid family on the one engine: a failure writes a JSON trace that replays (on the
broken allocator: the same clause; on a correct one: no divergence), is minimized, prints a
pytest repro that fails on the broken allocator, and a conformant run reports coverage and
SWA clause counts with ``--require-coverage`` and ``--json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from broken_hybrid import BROKEN_HYBRID
from kvpool.oracle.engine.replay import replay
from kvpool.oracle.engine.trace import Trace
from kvpool.oracle.entry.cli import main
from kvpool.oracle.families.hybrid.runner import hybrid_target, run_hybrid


def test_hybrid_failure_trace_replays_and_is_minimized(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["hybrid", "broken_hybrid:slide_frees_full", "--examples", "40"]
    assert main([*args, "--trace-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    (path,) = tmp_path.glob("*.json")
    trace = Trace.from_json(path.read_text())
    assert trace.family == "hybrid" and trace.clause is not None
    assert trace.num_calls() <= 4, out  # minimized: a slide, then the census shows it
    assert f"[{trace.clause}]" in out and str(path) in out
    assert main(["replay", str(path)]) == 1
    assert f"[{trace.clause}]" in capsys.readouterr().out
    fixed = "kvpool.oracle.families.hybrid.targets:kvpool_swa"
    assert main(["replay", str(path), "--target", fixed]) == 0


def test_hybrid_repro_fails_on_the_broken_allocator_and_passes_on_kvpool() -> None:
    """The printed pytest function is runnable: it fails where the run failed, and the same
    calls on kvpool's allocator pass (a trace replays there without divergence)."""
    broken = BROKEN_HYBRID[0]
    result = run_hybrid(broken.factory(), max_examples=40, shrink_seconds=4)
    failure = result.failure
    assert failure is not None
    module, _, name = failure.trace.target.partition(":")
    source = failure.pytest_source()
    assert f"from {module} import {name} as factory" in source
    broken_ns: dict[str, object] = {}
    exec(source.replace(f"from {module} import {name} as factory", ""),
         broken_ns | {"factory": broken.factory()}, broken_ns)
    with pytest.raises(AssertionError):
        broken_ns["test_kvpool_repro"]()  # type: ignore[operator]
    assert replay(failure.trace, hybrid_target("kvpool-swa")) is None


def test_hybrid_json_report_counts_swa_clauses_and_passes_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "run.json"
    argv = ["--family", "hybrid", "kvpool-swa", "--examples", "30", "--require-coverage",
            "--json", str(report)]
    assert main(argv) == 0, capsys.readouterr().out
    data = json.loads(report.read_text())
    (target,) = data["clauses"]
    assert data["coverage_missing"][target] == [] and data["clauses_missing"][target] == []
    swa = {c for c, n in data["clauses"][target].items() if c.startswith("SWA-") and n}
    assert {f"SWA-{n}" for n in range(1, 20)} <= swa
    assert len(data["configurations"]) == 6  # page sizes 1, 4 and 16, need_sort both
    assert all(row["status"] == "ok" for row in data["configurations"])


def test_group_that_keeps_the_callers_tensor_is_group_3() -> None:
    """Inside a free group, a deferred free_full that keeps the caller's tensor releases what
    the caller wrote into it afterwards: reported as GROUP-3, in a few calls."""
    (broken,) = [b for b in BROKEN_HYBRID if b.cls.__name__ == "GroupKeepsCallerTensor"]
    failure = run_hybrid(broken.factory(), max_examples=60, shrink_seconds=4).failure
    assert failure is not None and failure.clause == "GROUP-3", failure and failure.report()
    assert any(s.clobber for s in failure.trace.steps)
    assert failure.trace.num_calls() <= 6
