"""The hybrid executor's own paths: a factory that cannot build the allocator is the harness's
error (not a divergence), and the pure variant is judged with its own model, clauses and
result dtypes (SWA-21..25)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from broken_hybrid import BROKEN_HYBRID
from kvpool.oracle.engine.report import OracleError, OracleFailure
from kvpool.oracle.engine.target import Config
from kvpool.oracle.families.hybrid.calls import HYBRID_CALLS, PURE_CALLS
from kvpool.oracle.families.hybrid.executor import HybridExecutor, census
from kvpool.oracle.families.hybrid.runner import hybrid_target
from kvpool.oracle.families.hybrid.targets import PURE, kvpool_pure_swa
from kvpool.spec.hybrid_pure import PureSWAModel


def _failing(**kwargs: Any) -> Any:
    raise RuntimeError("no KV pool here")


def test_a_factory_that_fails_is_an_oracle_error() -> None:
    ex = HybridExecutor(hybrid_target(_failing), Config(1, False))
    with pytest.raises(OracleError, match="the factory failed: RuntimeError: no KV pool here"):
        ex.create(8, 8)


def _pure_executor() -> HybridExecutor:
    ex = HybridExecutor(hybrid_target(kvpool_pure_swa), Config(1, False))
    ex.create(6, 6)
    return ex


def test_the_pure_variant_is_judged_by_its_own_model_and_clauses_SWA_21() -> None:
    ex = _pure_executor()
    assert ex.pure and ex.calls is PURE_CALLS and isinstance(ex.model, PureSWAModel)
    assert ex.trace.steps[0].args["pure_swa"] is True  # the repro builds the pure variant
    assert ex.calls["free_full"].raise_clause == "SWA-24"
    assert HYBRID_CALLS["free_full"].raise_clause == "SWA-12"
    plain = HybridExecutor(hybrid_target("kvpool-swa"), Config(1, False))
    assert not plain.pure and plain.calls is HYBRID_CALLS


def test_the_pure_census_reads_the_mapping_up_to_the_pool_size_SWA_22() -> None:
    ex = _pure_executor()
    target = ex.target
    got = census(target, pure=True)
    assert got[2] == {s: s for s in range(1, 7)} and got[3] == -1
    assert got[4:] == (6, 6, 6)
    # a longer mapping (SGLang's after a shrinking resize) reads as the pool's identity
    target._identity = torch.cat([torch.arange(10), torch.tensor([-1])])
    assert census(target, pure=True)[2] == {s: s for s in range(1, 7)}
    assert census(target)[2] == {s: s for s in range(1, 10)}


def test_a_pure_translation_keeps_its_input_dtype_SWA_22() -> None:
    """kvpool's translation (its input itself) passes in every slot form; one that hands back
    an int64 copy fails under SWA-22 once a call passes int32 slots."""
    ex = _pure_executor()
    row = ex.call("alloc", need_size=2)
    for _ in range(4):  # the forms cycle: int64, int32, strided, both
        assert ex.call("translate_loc_from_full_to_swa", kv_indices=[*row, -1]) == [1, 2, -1]
    broken = next(b for b in BROKEN_HYBRID if b.cls.__name__ == "PureTranslateCopies")
    ex = HybridExecutor(hybrid_target(broken.factory()), Config(1, False))
    ex.create(6, 6)
    row = ex.call("alloc", need_size=2)
    with pytest.raises(OracleFailure) as err:
        for _ in range(4):
            ex.call("translate_loc_from_full_to_swa", kv_indices=row)
    assert err.value.failure.clause == "SWA-22"
    assert PURE.pure_swa and ex.caps.pure_swa


def test_a_model_whose_invariants_break_is_an_oracle_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The spec's own invariants are checked after every call; their breach is the harness's
    error, not the target's divergence."""
    ex = _pure_executor()

    def broken() -> None:
        raise AssertionError("MODEL-3: planted")

    assert ex.model is not None
    monkeypatch.setattr(ex.model, "check_invariants", broken)
    with pytest.raises(OracleError, match="the spec's invariants broke: MODEL-3: planted"):
        ex.call("alloc", need_size=1)


def test_a_constructor_state_that_differs_fails_at_create() -> None:
    """The census is compared right after construction: an allocator that comes up with a slot
    already handed out diverges at step 0."""

    def used(**kwargs: Any) -> Any:
        alloc = kvpool_pure_swa(**kwargs)
        alloc.alloc(1)
        return alloc

    used.kvpool_hybrid_capabilities = PURE  # type: ignore[attr-defined]
    ex = HybridExecutor(hybrid_target(used), Config(1, False))
    with pytest.raises(OracleFailure) as err:
        ex.create(6, 6)
    assert err.value.failure.clause == "INV-1" and err.value.failure.trace.failing_step == 0


def test_each_noted_event_counts_once() -> None:
    ex = _pure_executor()
    ex.note("pure.slide")
    ex.note("pure.slide")
    assert ex.events["pure.slide"] == 2


def test_a_call_the_spec_rejects_is_the_harness_error_and_results_are_recorded() -> None:
    ex = _pure_executor()
    assert ex.call("alloc", need_size=2) == [1, 2]
    assert ex.trace.steps[-1].expect == [1, 2]  # the repro asserts it
    with pytest.raises(OracleError, match="is invalid under the spec"):
        ex.call("free", free_index=[5])  # never handed out: the scheduler model's mistake


def _group_end_raises(on_call: int) -> Any:
    """kvpool's pure allocator whose ``on_call``-th ``free_group_end`` raises."""
    from kvpool.impl.swa_pure import PureSWATokenToKVPoolAllocator

    class EndRaises(PureSWATokenToKVPoolAllocator):
        ends = 0

        def free_group_end(self) -> None:
            self.ends += 1
            if self.ends == on_call:
                raise RuntimeError("group end failed")
            super().free_group_end()

    def factory(*, size: int, size_swa: int, page_size: int, need_sort: bool,
                device: str = "cpu", pure_swa: bool = True) -> Any:
        return EndRaises(size_swa, page_size, torch.float16, device, None, need_sort,
                         checked=True)

    factory.kvpool_hybrid_capabilities = PURE  # type: ignore[attr-defined]
    return factory


def _clause_of_failing_group_end(on_call: int, clobbered: list[bool]) -> str:
    """Groups of one free each (its input overwritten by the caller or not), until the
    ``on_call``-th group end raises: the clause that failure is reported under."""
    ex = HybridExecutor(hybrid_target(_group_end_raises(on_call)), Config(1, False))
    ex.create(6, 6)
    with pytest.raises(OracleFailure) as err:
        for clobber in clobbered:
            row = ex.call("alloc", need_size=1)
            ex.call("free_group_begin")
            ex.call("free", free_index=row, clobber=clobber)
            ex.call("free_group_end")
    return str(err.value.failure.clause)


def test_a_failing_group_end_after_an_overwritten_input_is_group_3() -> None:
    """A group end that fails after the caller overwrote a deferred free's input is reported
    as GROUP-3 (the group kept the caller's tensor); a later group without such an overwrite,
    and a group end without a group, under the call's own clause."""
    assert _clause_of_failing_group_end(1, [True]) == "GROUP-3"
    assert _clause_of_failing_group_end(1, [False]) == "SWA-24"
    assert _clause_of_failing_group_end(2, [True, False]) == "SWA-24"
    ex = HybridExecutor(hybrid_target(_group_end_raises(1)), Config(1, False))
    ex.create(6, 6)
    with pytest.raises(OracleFailure) as err:
        ex.call("free_group_end")
    assert err.value.failure.clause == "SWA-24"
