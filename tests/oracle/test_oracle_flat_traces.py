"""Traces recorded before the oracle's subpackages still replay.

The traces in ``data/flat_*.json`` were written by the oracle while its modules were one flat
package, so they name their targets by the flat paths (``kvpool.oracle.<flat>:factory``), which
no longer import. Reading a trace maps each such path to the module that now holds it
(``kvpool.oracle.engine.trace_paths``); the replay, through the API and through
``python -m kvpool.oracle replay FILE``, then gives the outcome the trace recorded: no
divergence for the two conformant runs (kvpool's paged allocator, the sliding-window one), and
``ALLOC-1`` at step 3 for the unchecked paged allocator, which accepts an unaligned ``alloc``
that the checked run had rejected. A path under ``kvpool.oracle`` that names no module, now or
before, fails the read with a ValueError naming it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kvpool.oracle.engine.replay import replay, replay_file
from kvpool.oracle.engine.trace import Trace
from kvpool.oracle.engine.trace_paths import FLAT_PATHS, PACKAGE, current_path
from kvpool.oracle.entry.cli import main
from kvpool.oracle.entry.plan import plan

DATA = Path(__file__).parent / "data"
TRACES = sorted(DATA.glob("flat_*.json"))


def _recorded(path: Path) -> dict:  # type: ignore[type-arg]
    data: dict = json.loads(path.read_text())  # type: ignore[type-arg]
    return data


def test_the_fixtures_name_flat_paths_that_no_longer_import() -> None:
    """Each fixture's target is a flat path of the table (so the tests below test the mapping),
    and the families and outcomes they cover are the ones the module docstring lists."""
    assert len(TRACES) == 3
    covered = set()
    for path in TRACES:
        data = _recorded(path)
        module, _, factory = data["target"].partition(":")
        flat = module.removeprefix(PACKAGE + ".")
        assert flat in FLAT_PATHS, data["target"]
        with pytest.raises(ModuleNotFoundError):
            __import__(module)
        covered.add((data["family"], factory, data["clause"]))
    assert covered == {("single", "kvpool_paged", None), ("hybrid", "kvpool_swa", None),
                       ("single", "kvpool_paged_unchecked", "ALLOC-1")}


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_a_flat_path_trace_reads_with_the_current_path(path: Path) -> None:
    data = _recorded(path)
    trace = Trace.from_json(path.read_text())
    module, _, factory = data["target"].partition(":")
    flat = module.removeprefix(PACKAGE + ".")
    assert trace.target == f"{PACKAGE}.{FLAT_PATHS[flat]}:{factory}"
    assert trace.error_types == data["error_types"]  # kvpool.spec's type: not the oracle's
    assert [s.call for s in trace.steps] == [s["call"] for s in data["steps"]]


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_a_flat_path_trace_replays_its_recorded_outcome(path: Path) -> None:
    """Through the API: the target the trace names (as plan resolves it, family included)
    replays the trace with the recorded clause at the recorded step, or without divergence."""
    data = _recorded(path)
    trace = Trace.from_json(path.read_text())
    (planned,) = plan(trace.target, device=trace.device, family=trace.family)
    assert planned.target.family == data["family"]
    failure = replay(trace, planned.target)
    again = replay_file(path, planned.target)
    if data["clause"] is None:
        assert failure is None and again is None
        return
    assert failure is not None and again is not None
    assert failure.clause == again.clause == data["clause"]
    assert failure.trace.failing_step == data["failing_step"]
    assert failure.detail == data["detail"]
    assert failure.trace.target == trace.target  # a trace written now names the new path


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_the_command_line_replays_a_flat_path_trace(path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    data = _recorded(path)
    rc = main(["replay", str(path)])
    out = capsys.readouterr().out
    target = Trace.from_json(path.read_text()).target
    if data["clause"] is None:
        assert rc == 0, out
        assert f"{target}: the trace replays without divergence" in out
    else:
        assert rc == 1, out
        assert f"[{data['clause']}]" in out and f"target {target} " in out


def test_python_m_kvpool_oracle_replays_a_recorded_failure(tmp_path: Path) -> None:
    """The command itself, in a subprocess (a fresh interpreter: nothing imported before)."""
    (path,) = (p for p in TRACES if _recorded(p)["clause"] is not None)
    r = subprocess.run([sys.executable, "-m", "kvpool.oracle", "replay", str(path)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False,
                       env=dict(os.environ))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"[{_recorded(path)['clause']}]" in r.stdout


def _with_target(path: Path, target: str, tmp_path: Path) -> Path:
    data = _recorded(path)
    data["target"] = target
    out = tmp_path / "trace.json"
    out.write_text(json.dumps(data))
    return out


def test_an_unknown_flat_looking_path_fails_the_read_naming_it(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """``kvpool.oracle.nosuch`` is neither a flat path of the table nor a module now: reading
    the trace raises ValueError naming it; the command line says so and exits 2."""
    unknown = f"{PACKAGE}.nosuch:kvpool_paged"
    written = _with_target(TRACES[0], unknown, tmp_path)
    with pytest.raises(ValueError, match=r"kvpool\.oracle\.nosuch, which is no module of"):
        Trace.from_json(written.read_text())
    assert main(["replay", str(written)]) == 2
    err = capsys.readouterr().err
    assert "cannot read trace" in err and f"{PACKAGE}.nosuch" in err and "Traceback" not in err
    data = _recorded(TRACES[0])
    data["error_types"] = [f"{PACKAGE}.nosuch.Error"]
    with pytest.raises(ValueError, match=r"kvpool\.oracle\.nosuch"):
        Trace.from_json(json.dumps(data))


def test_current_path_leaves_current_and_outside_paths_alone() -> None:
    """Paths that import now pass unchanged; a flat module's dotted name keeps its tail."""
    for path in (f"{PACKAGE}.families.single.targets:kvpool_paged", "minimal_allocator:make",
                 "kvpool.spec.errors.ContractViolation", f"{PACKAGE}:load_target",
                 f"{PACKAGE}.pytest_plugin"):
        assert current_path(path) == path
    assert current_path(f"{PACKAGE}.report.Failure") == f"{PACKAGE}.engine.report.Failure"
    assert current_path(f"{PACKAGE}.hybrid_targets:kvpool_swa") == (
        f"{PACKAGE}.families.hybrid.targets:kvpool_swa")
