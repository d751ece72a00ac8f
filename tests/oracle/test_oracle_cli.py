"""The command line, the pytest plugin and the one-line API, each in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def _run(args: list[str], cwd: Path, timeout: int = 240) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    )
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_oracle_cli_conformant_run_exits_0(tmp_path: Path) -> None:
    r = _run(
        [
            "-m",
            "kvpool.oracle",
            "kvpool.oracle.families.single.targets:kvpool_paged",
            "--page-sizes",
            "4",
            "--need-sort",
            "false",
            "--examples",
            "8",
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "summary" in r.stdout and "conformant" in r.stdout


def test_oracle_cli_undeclared_factory_takes_the_options(tmp_path: Path) -> None:
    """The README's form: an undeclared factory runs the page sizes given on the command line."""
    r = _run(
        [
            "-m",
            "kvpool.oracle",
            "spec_torch:make_allocator",
            "--order",
            "contract",
            "--page-sizes",
            "1",
            "16",
            "--need-sort",
            "false",
            "--examples",
            "5",
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ps=1 " in r.stdout and "ps=16 " in r.stdout and "contract" in r.stdout


def test_oracle_cli_usage_errors_exit_2_without_traceback(tmp_path: Path) -> None:
    for target in ("no_such_module:factory", "missing-colon",
                   "kvpool.oracle.families.single.targets:nothing"):
        r = _run(["-m", "kvpool.oracle", target, "--examples", "1"], tmp_path)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "Traceback" not in r.stderr and "kvpool.oracle: error:" in r.stderr
    r = _run(["-m", "kvpool.oracle", "--order", "sideways"], tmp_path)
    assert r.returncode == 2


def test_oracle_cli_divergence_exits_1_and_replays(tmp_path: Path) -> None:
    """A broken target fails with exit 1, writes a JSON trace; replay reproduces it and a
    correct target replays it cleanly."""
    r = _run(
        [
            "-m",
            "kvpool.oracle",
            "broken_allocators:leakonfree",
            "--page-sizes",
            "4",
            "--need-sort",
            "false",
            "--examples",
            "200",
            "--trace-dir",
            "traces",
        ],
        tmp_path,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "[FREE-4]" in r.stdout and "def test_kvpool_repro" in r.stdout
    traces = list((tmp_path / "traces").glob("*.json"))
    assert len(traces) == 1
    data = json.loads(traces[0].read_text())
    assert data["kvpool_trace"] == 1 and data["clause"] == "FREE-4"
    again = _run(["-m", "kvpool.oracle", "replay", str(traces[0])], tmp_path)
    assert again.returncode == 1 and data["clause"] in again.stdout
    clean = _run(
        ["-m", "kvpool.oracle", "replay", str(traces[0]), "--target", "spec_torch:spec_paged"],
        tmp_path,
    )
    assert clean.returncode == 0, clean.stdout + clean.stderr


def test_oracle_pytest_plugin_and_one_line_api(tmp_path: Path) -> None:
    """``--kvpool-target`` adds conformance items; ``conformance_test`` makes a test module."""
    (tmp_path / "test_user.py").write_text(
        "import kvpool.oracle\n\n"
        "test_conformance = kvpool.oracle.conformance_test('spec_torch:spec_paged', examples=5,\n"
        "                                                  page_sizes=[4])\n"
        "test_broken = kvpool.oracle.conformance_test('broken_allocators:slottwice',\n"
        "    examples=200, page_sizes=[4], need_sort=[False])\n"
    )
    r = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"], tmp_path)
    assert "1 failed, 2 passed" in r.stdout, r.stdout + r.stderr
    assert "[INV-" in r.stdout
    r = _run(
        [
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--kvpool-target",
            "spec_torch:spec_token",
            "--kvpool-examples",
            "5",
            "-k",
            "kvpool_conformance",
        ],
        tmp_path,
    )
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout + r.stderr
    assert "2 passed, 3 deselected" in r.stdout, r.stdout  # the user module's 3 counted too


def test_oracle_bare_pytest_imports_from_the_rootdir_with_every_option(tmp_path: Path) -> None:
    """The ``pytest`` script (not ``python -m pytest``) finds a module in the rootdir; the
    plugin takes the command line's options; items are counted and named after the target."""
    source = (HERE / "minimal_allocator.py").read_text()
    (tmp_path / "my_alloc.py").write_text(source)
    pytest_script = Path(sys.executable).with_name("pytest")
    args = ["-v", "-p", "no:cacheprovider", "--kvpool-target", "my_alloc:make_checked"]
    args += ["--kvpool-declare", "checked=ValueError", "--kvpool-page-sizes", "1,4"]
    args += ["--kvpool-need-sort", "false", "--kvpool-order", "contract"]
    args += ["--kvpool-examples", "5", "--kvpool-steps", "10", "-k", "ps4"]
    r = subprocess.run(
        [str(pytest_script), *args], cwd=tmp_path, capture_output=True, text=True, timeout=240
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "collected 2 items / 1 deselected / 1 selected" in r.stdout, r.stdout
    assert "kvpool_conformance[my_alloc:make_checked]::ps4-unsorted-contract PASSED" in r.stdout
    assert "capabilities in force for my_alloc:make_checked" in r.stdout
    assert "checked=ValueError (option)" in r.stdout
    bad = subprocess.run(
        [
            str(pytest_script),
            "--kvpool-target",
            "my_alloc:make",
            "--kvpool-page-sizes",
            "16",
            "--kvpool-declare",
            "page_sizes=4",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert bad.returncode == 4 and "page size 16 is not declared" in bad.stderr, bad.stderr
