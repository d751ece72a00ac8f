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
