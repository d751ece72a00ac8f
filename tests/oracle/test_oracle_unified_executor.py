"""The unified executor's harness errors, on kvpool's own unified pool (no SGLang): a factory
that cannot build the allocator, a buffer the spec rejects, and a model whose invariants break
are the harness's errors, not a target's divergence."""

from __future__ import annotations

from typing import Any

import pytest
from kvpool.oracle.engine.families import family
from kvpool.oracle.engine.report import OracleError
from kvpool.oracle.engine.target import Config
from kvpool.oracle.families.unified.executor import UnifiedExecutor
from kvpool.oracle.families.unified.kvpool_target import kvpool_unified

CAPS = getattr(kvpool_unified, "kvpool_unified_capabilities")  # noqa: B009
UNIFIED = family("unified")


def _executor(factory: Any) -> UnifiedExecutor:
    return UnifiedExecutor(UNIFIED.target(factory, CAPS), Config(4, False))


def _failing(**kwargs: Any) -> Any:
    raise RuntimeError("no buffer here")


def test_a_factory_that_fails_is_an_oracle_error() -> None:
    with pytest.raises(OracleError, match="the factory failed: RuntimeError: no buffer here"):
        _executor(_failing).create(1 << 16, False)


def test_a_buffer_the_spec_rejects_is_an_oracle_error() -> None:
    with pytest.raises(OracleError, match=r"create\(-1\) is invalid under the spec"):
        _executor(lambda **kw: kvpool_unified(**{**kw, "total_bytes": 1 << 16})).create(-1, False)


def test_a_model_whose_invariants_break_is_an_oracle_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ex = _executor(kvpool_unified)
    ex.create(1 << 16, False)

    def broken() -> None:
        raise AssertionError("UNI-1: planted")

    assert ex.model is not None
    monkeypatch.setattr(ex.model, "check_invariants", broken)
    with pytest.raises(OracleError, match="the spec's invariants broke: UNI-1: planted"):
        ex.call("alloc", need_size=4)


def test_a_call_the_spec_rejects_is_an_oracle_error() -> None:
    ex = _executor(kvpool_unified)
    ex.create(1 << 16, False)
    with pytest.raises(OracleError, match="is invalid under the spec"):
        ex.call("free", free_index=[5])  # never handed out: the scheduler model's mistake
