"""A peer test skips only when the peer is not installed, and only outside CI: an installed peer
that fails to import, or an exception inside kvpool's own import shims, is a failure."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from kvpool.oracle.engine.target import TargetError
from kvpool.oracle.peers import peer_import
from kvpool.oracle.peers.peer_import import (
    PeerNotInstalled,
    PeerUnavailable,
    classify,
    load_sglang_allocators,
    may_skip,
)


def _load_with(monkeypatch: pytest.MonkeyPatch, module: str) -> PeerUnavailable:
    """``load_sglang_allocators`` importing ``module`` instead of SGLang's allocator module."""
    monkeypatch.setattr(peer_import, "_cached", None)
    monkeypatch.setattr(peer_import, "_install_finder", lambda *a: None)
    monkeypatch.setattr(peer_import, "_register_bare_sglang", lambda: None)
    monkeypatch.setattr(peer_import, "ALLOCATOR_MODULE", module)
    with pytest.raises(PeerUnavailable) as caught:
        load_sglang_allocators()
    return caught.value


def test_a_shim_that_raises_is_a_failure_not_a_skip(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "kvpool_shim_that_raises.py").write_text("raise AttributeError('shim bug')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    err = _load_with(monkeypatch, "kvpool_shim_that_raises")
    sys.modules.pop("kvpool_shim_that_raises", None)
    assert not isinstance(err, PeerNotInstalled) and "shim bug" in str(err)
    assert not may_skip(err, ci=False) and not may_skip(err, ci=True)
    # the way the conformance tests see it: through probe()'s TargetError
    wrapped = TargetError("sglang-paged is unavailable")
    wrapped.__cause__ = err
    assert not may_skip(wrapped, ci=False)


def test_a_missing_kvpool_module_is_a_shim_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _load_with(monkeypatch, "kvpool.oracle.peers.no_such_shim")
    assert not isinstance(err, PeerNotInstalled) and not may_skip(err, ci=False)


def test_a_peer_not_installed_skips_outside_ci_only(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _load_with(monkeypatch, "no_such_peer_package_xyz.allocator")
    assert isinstance(err, PeerNotInstalled)
    assert may_skip(err, ci=False) and not may_skip(err, ci=True)
    monkeypatch.setenv("CI", "true")
    assert not may_skip(err)
    monkeypatch.delenv("CI")
    assert may_skip(err)


def test_classify_names_the_cause() -> None:
    missing = classify("x", ModuleNotFoundError("No module named 'zmq'", name="zmq"))
    broken = classify("y", TypeError("bad"))
    assert isinstance(missing, PeerNotInstalled) and type(broken) is PeerUnavailable
    assert isinstance(broken.__cause__, TypeError)
    assert not may_skip(ValueError("not a peer error"), ci=False)


PEER_TESTS = '''
import pytest
from kvpool.oracle.peers.availability import (
    PeerNotInstalled, PeerUnavailable, raise_if_child_missing)

def test_missing_in_the_test():
    raise PeerNotInstalled("sglang is not installed")

def test_missing_behind_another_error():
    try:
        raise PeerNotInstalled("vllm is not installed")
    except PeerNotInstalled as err:
        raise RuntimeError("the factory failed") from err

@pytest.fixture
def peer():
    raise PeerNotInstalled("kvcached is not installed")

def test_missing_in_a_fixture(peer):
    pass

def test_missing_in_a_child_process():
    raise_if_child_missing(3, "peer not installed: sglang")

def test_installed_but_broken():
    raise PeerUnavailable("sglang failed to import")

def test_not_a_peer_error():
    raise ValueError("a bug")
'''


@pytest.mark.parametrize("ci", [False, True])
def test_the_suites_availability_rule(tmp_path: Path, ci: bool) -> None:
    """tests/conftest.py applies ``may_skip`` to every test: a missing peer (raised in the test,
    behind another error, in a fixture, or reported by a child process) skips outside CI and
    fails under ``CI``; an installed peer that fails, or any other error, fails everywhere."""
    import os
    import subprocess

    conftest = Path(__file__).parent.parent / "conftest.py"
    (tmp_path / "conftest.py").write_text(conftest.read_text())
    (tmp_path / "test_peers.py").write_text(PEER_TESTS)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    if ci:
        env["CI"] = "true"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "no:xdist",
         "-p", "no:randomly", "-p", "no:random_order", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300, check=False)
    outcome = {line.split("::")[1].split()[0]: line.split()[1]
               for line in proc.stdout.splitlines() if line.startswith("test_peers.py::")}
    missing = ("test_missing_in_the_test", "test_missing_behind_another_error",
               "test_missing_in_a_fixture", "test_missing_in_a_child_process")
    for name in missing:
        assert outcome[name] == ("FAILED" if ci else "SKIPPED") or (
            ci and outcome[name] == "ERROR" and "fixture" in name), (name, proc.stdout)
    assert outcome["test_installed_but_broken"] == "FAILED", proc.stdout
    assert outcome["test_not_a_peer_error"] == "FAILED", proc.stdout
