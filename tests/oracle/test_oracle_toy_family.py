"""A family registered from the tests alone (``toyfamily``: request slots, clauses SLOT-1..4)
runs through the whole oracle: the programmatic run, the pytest plugin, JSON traces and
replay, printed repros, the coverage gate, the command line and ``--jobs``.

The one registration is the fixture ``toy``: the record ``toyfamily.record.TOY`` put into
``registry.FAMILIES`` for this process, and named in ``KVPOOL_ORACLE_FAMILIES`` for the
processes it starts (``--jobs``' workers, the command line in a subprocess), whose registry
reads the variable when it loads. Tiny budgets: 20 examples of 10 steps at most."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kvpool.oracle.engine import registry
from kvpool.oracle.engine.families import family
from kvpool.oracle.engine.replay import replay, replay_file
from kvpool.oracle.engine.repro import to_pytest
from kvpool.oracle.engine.reprocheck import run_source
from kvpool.oracle.engine.runner import Result, run_config
from kvpool.oracle.engine.target import Config
from kvpool.oracle.engine.trace import Trace
from kvpool.oracle.entry import cli
from toyfamily.record import TOY

HERE = Path(__file__).parent
RECORD = "toy=toyfamily.record:TOY"
BUDGET = ["--examples", "20", "--steps", "10"]
CORRECT, LIFO, UNCHECKED = (
    "toyfamily.targets:toy", "toyfamily.targets:toy_lifo", "toyfamily.targets:toy_unchecked_free")


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The toy family registered here and in every process started meanwhile."""
    monkeypatch.setitem(registry.FAMILIES, "toy", TOY)
    monkeypatch.setenv(registry.ENV, RECORD)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    yield


def _run(alias: str, examples: int = 20) -> Result:
    fam = family("toy")
    return run_config(fam.target(fam.factory(alias)), Config(1, False), max_examples=examples,
                      step_count=10)


def _oracle(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvpool.oracle", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.usefixtures("toy")
def test_a_run_passes_the_correct_target_and_catches_each_broken_one() -> None:
    """The correct allocator is conformant; LIFO reuse fails SLOT-3, an unchecked double free
    SLOT-4, each with a short trace of the toy family's calls."""
    ok = _run("toy")
    assert ok.ok and ok.calls > 0 and ok.coverage["finish"] > 0, ok.status()
    for alias, clause in (("toy-lifo", "SLOT-3"), ("toy-unchecked-free", "SLOT-4")):
        r = _run(alias)
        assert r.failure is not None and r.failure.clause == clause, r.status()
        trace = r.failure.trace
        assert trace.family == "toy" and trace.steps[0].call == "create"
        assert trace.num_calls() <= 3, r.failure.report()
        assert {s.call for s in trace.steps} <= {"create", "alloc", "free", "clear"}


@pytest.mark.usefixtures("toy")
def test_a_failure_is_written_as_json_and_replays(tmp_path: Path) -> None:
    """The trace goes to JSON and back; it fails alike on the broken target and replays clean
    on the correct one."""
    r = _run("toy-lifo")
    assert r.failure is not None
    path = tmp_path / "toy.json"
    r.failure.write_json(path)
    trace = Trace.from_json(path.read_text())
    assert trace.family == "toy" and trace.clause == "SLOT-3"
    fam = family("toy")
    again = replay_file(path, fam.target(fam.factory("toy-lifo")))
    assert again is not None and again.clause == "SLOT-3"
    assert replay(trace, fam.target(fam.factory("toy"))) is None


@pytest.mark.usefixtures("toy")
@pytest.mark.parametrize(("alias", "path"), [("toy-lifo", LIFO), ("toy-unchecked-free", UNCHECKED)])
def test_the_printed_repro_fails_on_the_broken_target_and_passes_on_the_correct(
    alias: str, path: str
) -> None:
    """The report's pytest function fails on the target it was found on (an assert, or a
    ``pytest.raises`` of the declared SlotFreeError that did not raise) and passes with the
    correct factory imported instead; the report's own check says so (the record names the
    correct allocator)."""
    r = _run(alias)
    assert r.failure is not None
    report = r.failure.report()
    printed = report.split("reproduce with pytest:\n", 1)[1].split("\n# repro", 1)[0]
    assert printed == to_pytest(r.failure.trace, path) and f"import {path.split(':')[1]}" in printed
    assert f"# repro checked: fails on {path}, passes on the toy SlotAllocator" in report
    assert isinstance(run_source(printed), AssertionError | pytest.fail.Exception)
    assert run_source(to_pytest(r.failure.trace, CORRECT)) is None


@pytest.mark.usefixtures("toy")
def test_the_pytest_plugin_runs_the_family(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pytest --kvpool-family toy``: an item per target, the broken one failing SLOT-3 with
    its trace written, one merged report; the coverage gate holds for the correct one."""
    folder, out = tmp_path / "empty", tmp_path / "run.json"
    folder.mkdir()
    code = pytest.main([str(folder), "-q", "-p", "no:cacheprovider", "--rootdir", str(folder),
                        "--kvpool-family", "toy", "--kvpool-target", "toy,toy-lifo",
                        "--kvpool-examples", "20", "--kvpool-steps", "10",
                        "--kvpool-trace-dir", str(tmp_path), "--kvpool-json", str(out),
                        "--kvpool-require-coverage"])
    text = capsys.readouterr().out
    assert code == 1, text
    rows = {row["target"]: row for row in json.loads(out.read_text())["configurations"]}
    assert rows[CORRECT]["status"] == "ok" and rows[LIFO]["status"] == "FAIL SLOT-3"
    assert json.loads(out.read_text())["coverage_missing"][CORRECT] == []
    (trace,) = tmp_path.glob("toyfamily.targets_toy_lifo-*.json")
    assert json.loads(trace.read_text())["family"] == "toy"
    assert "kvpool.oracle merged report" in text and "def test_kvpool_repro" in text


@pytest.mark.usefixtures("toy")
def test_the_coverage_gate_passes_a_full_run_and_fails_a_short_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--require-coverage``: 20 examples reach every event of the toy family's table; one
    example of two steps does not, and the gate names what it missed."""
    assert cli.main(["--family", "toy", *BUDGET, "--require-coverage"]) == 0
    assert "coverage gate: every reachable event reached" in capsys.readouterr().out
    assert cli.main(["--family", "toy", "--examples", "1", "--steps", "2",
                     "--require-coverage"]) == 1
    assert "coverage gate: toyfamily.targets:toy: never reached" in capsys.readouterr().out


@pytest.mark.usefixtures("toy")
def test_help_lists_the_registered_family() -> None:
    """``--help`` shows the record's budget, help line and targets."""
    help_rows = " ".join(cli._run_parser().format_help().split())  # padded to the longest name
    assert "toy 20 examples, 10 steps: request slots" in help_rows
    assert "targets: toy (default), toy-lifo, toy-unchecked-free" in registry.family_help()


@pytest.mark.usefixtures("toy")
def test_the_command_line_in_a_subprocess_runs_and_replays(tmp_path: Path) -> None:
    """``python -m kvpool.oracle --family toy`` in a process of its own (the family from
    ``KVPOOL_ORACLE_FAMILIES``): the broken target fails with its trace written, and its printed
    repro, saved as a test file, fails under pytest (and passes with the correct factory); the
    trace replays (failing) on it and clean on the correct one; the older form ``toy TARGET``
    runs."""
    r = _oracle(["--family", "toy", "toy-lifo", *BUDGET, "--trace-dir", str(tmp_path)], tmp_path)
    assert r.returncode == 1 and "FAIL SLOT-3" in r.stdout, r.stdout + r.stderr
    printed = r.stdout.split("reproduce with pytest:\n", 1)[1].split("\n# repro", 1)[0]
    (tmp_path / "test_broken.py").write_text(printed)
    (tmp_path / "test_fixed.py").write_text(printed.replace("toy_lifo", "toy"))
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
                          "no:kvpool", "--rootdir", str(tmp_path), "-rA", "test_broken.py",
                          "test_fixed.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert "FAILED test_broken.py::test_kvpool_repro" in run.stdout, run.stdout + run.stderr
    assert "PASSED test_fixed.py::test_kvpool_repro" in run.stdout, run.stdout + run.stderr
    (trace,) = tmp_path.glob("*.json")
    again = _oracle(["replay", str(trace)], tmp_path)
    assert again.returncode == 1 and "[SLOT-3]" in again.stdout, again.stdout + again.stderr
    clean = _oracle(["replay", str(trace), "--target", "toy"], tmp_path)
    assert clean.returncode == 0 and "replays without divergence" in clean.stdout, clean.stderr
    old = _oracle(["toy", "toy", *BUDGET], tmp_path)
    assert old.returncode == 0 and "conformant" in old.stdout, old.stdout + old.stderr


@pytest.mark.usefixtures("toy")
def test_jobs_runs_the_family_in_workers(tmp_path: Path) -> None:
    """``--jobs 2``: the workers register the family from the environment; the merged report
    has the correct target ok and the broken one failing. In a process of its own: xdist's
    local workers start with the ``sys.path`` of the process that loaded xdist, which here
    lacks this folder (pytest added it later)."""
    pytest.importorskip("xdist")
    out = tmp_path / "par.json"
    r = _oracle(["--family", "toy", "toy,toy-unchecked-free", *BUDGET, "--jobs", "2",
                 "--json", str(out), "--trace-dir", str(tmp_path)], tmp_path)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    rows = {row["target"]: row for row in json.loads(out.read_text())["configurations"]}
    assert rows[CORRECT]["status"] == "ok" and rows[UNCHECKED]["status"] == "FAIL SLOT-4"


def test_the_environment_variable_adds_families_and_refuses_mistakes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``register_from_env``: each ``name=module:RECORD`` is added; an entry without ``=``, a
    built-in family's name, a path that does not import or names no record are refused."""
    monkeypatch.setattr(registry, "FAMILIES", dict(registry.FAMILIES))
    assert registry.register_from_env(None) == []
    assert registry.register_from_env(f" {RECORD}, ") == ["toy"]
    assert registry.FAMILIES["toy"] is TOY
    with pytest.raises(ValueError, match="not name=module:RECORD"):
        registry.register_from_env("toyfamily.record:TOY")
    with pytest.raises(ValueError, match="built-in family"):
        registry.register_from_env("single=toyfamily.record:TOY")
    with pytest.raises(AttributeError, match=registry.ENV):
        registry.register_from_env("x=toyfamily.record:NOPE")
    with pytest.raises(ValueError, match="not a Registered record"):
        registry.register_from_env("x=toyfamily.calls:TOY_CALLS")
