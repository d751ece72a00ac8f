"""A run writes nothing into the current directory unless asked: traces and Hypothesis's files
go under ``$KVPOOL_HOME`` (``--trace-dir`` / ``--hypothesis-dir`` choose other places)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kvpool.oracle.entry.paths import (
    HYPOTHESIS_ENV,
    default_trace_dir,
    hypothesis_dir,
    kvpool_home,
)

HERE = Path(__file__).parent
ARGS = ["-m", "kvpool.oracle", "broken_allocators:slottwice", "--examples", "30",
        "--page-sizes", "4", "--need-sort", "false"]


def _run(args: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KVPOOL_HOME=str(home),
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    env.pop("HYPOTHESIS_STORAGE_DIRECTORY", None)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240, check=False)


def test_a_failing_run_writes_under_kvpool_home_only(tmp_path: Path) -> None:
    cwd, home = tmp_path / "work", tmp_path / "home"
    cwd.mkdir()
    r = _run(ARGS, cwd, home)
    assert r.returncode == 1, r.stdout + r.stderr
    assert list(cwd.iterdir()) == []  # no kvpool-traces/, no .hypothesis/
    traces = list((home / "traces").glob("*.json"))
    assert len(traces) == 1 and str(traces[0]) in r.stdout


def test_the_cwd_only_if_asked(tmp_path: Path) -> None:
    cwd, home = tmp_path / "work", tmp_path / "home"
    cwd.mkdir()
    r = _run([*ARGS, "--trace-dir", ".", "--hypothesis-dir", "hyp"], cwd, home)
    assert r.returncode == 1, r.stdout + r.stderr
    assert [p.suffix for p in cwd.iterdir() if p.name != "hyp"] == [".json"]
    assert not home.exists()


def test_where_hypothesis_keeps_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVPOOL_HOME", str(tmp_path))
    monkeypatch.delenv(HYPOTHESIS_ENV, raising=False)
    assert kvpool_home() == tmp_path and default_trace_dir() == tmp_path / "traces"
    assert hypothesis_dir(None) == tmp_path / "hypothesis"
    assert hypothesis_dir("elsewhere") == Path("elsewhere")
    monkeypatch.setenv(HYPOTHESIS_ENV, str(tmp_path / "theirs"))
    assert hypothesis_dir(None) == tmp_path / "theirs"
    monkeypatch.delenv("KVPOOL_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert kvpool_home() == tmp_path / "cache" / "kvpool"
