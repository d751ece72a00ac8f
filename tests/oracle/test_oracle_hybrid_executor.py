"""The hybrid executor's own paths: a factory that cannot build the allocator is the harness's
error (not a divergence), and the pure variant is judged with its own model, clauses and
result dtypes (SWA-21..25)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from broken_hybrid import BROKEN_HYBRID, GroupKeepsCallerTensor
from kvpool.impl.swa import SWATokenToKVPoolAllocator
from kvpool.oracle.engine.report import OracleError, OracleFailure
from kvpool.oracle.engine.target import Config
from kvpool.oracle.families.hybrid.calls import HYBRID_CALLS, PURE_CALLS
from kvpool.oracle.families.hybrid.executor import HybridExecutor, census
from kvpool.oracle.families.hybrid.runner import hybrid_target
from kvpool.oracle.families.hybrid.targets import FULL, PURE, kvpool_pure_swa
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

    class EndRaises(PureSWATokenToKVPoolAllocator):  # type: ignore[misc]
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


# -- a group end's failure attributed to the caller's overwritten inputs (GROUP-3) -------------
def _full_factory(cls: type, checked: bool = True) -> Any:
    def make(*, size: int, size_swa: int, page_size: int, need_sort: bool,
             device: str = "cpu", pure_swa: bool = False) -> Any:
        return cls(size, size_swa, page_size, torch.float16, device, None, need_sort,
                   checked=checked)

    make.kvpool_hybrid_capabilities = FULL.replace(need_sort=(False,))  # type: ignore[attr-defined]
    return make


def _end_then(census_reads: Any) -> Any:
    """A group that keeps the caller's tensors, whose ``free_group_end`` releases none of them
    (the census then differs), and whose full free census reads ``census_reads(n, pages)``
    after it (``n``: reads since the end, ``pages``: the real census)."""

    class EndThen(GroupKeepsCallerTensor):
        def free_group_end(self) -> None:
            self._kept: list[torch.Tensor] = []  # forgets the group's frees
            super().free_group_end()
            full, read = self.full_attn_allocator, self.full_attn_allocator.get_all_free_pages
            count = [0]

            def reads() -> torch.Tensor:
                count[0] += 1
                return torch.as_tensor(census_reads(count[0], read().tolist()), dtype=torch.int64)

            full.get_all_free_pages = reads

    return _full_factory(EndThen)


def _group_end_failure(factory: Any, clobber: bool = True) -> Any:
    """Slot 1 freed, then slots 3..4 freed inside a group, their tensor overwritten by the
    caller: the failure at the group's end."""
    ex = HybridExecutor(hybrid_target(factory), Config(1, False))
    ex.create(8, 8)
    a = ex.call("alloc", need_size=2)
    b = ex.call("alloc", need_size=2)
    ex.call("free", free_index=a[:1])
    ex.call("free_swa", free_index=b)
    with pytest.raises(OracleFailure) as err:
        ex.call("free_group_begin")
        ex.call("free_full", free_index=b, clobber=clobber)
        ex.call("free_group_end")
    return err.value.failure


def test_a_group_end_that_lists_the_padding_page_free_is_group_3() -> None:
    """The end does not raise, but the caller's zeros reached the free list: GROUP-3."""
    failure = _group_end_failure(_end_then(lambda n, pages: [0, *pages]))
    assert failure.clause == "GROUP-3" and "[INV-1] after free_group_end" in failure.detail


def test_a_group_end_that_only_loses_pages_keeps_its_own_clause() -> None:
    """The end neither raises nor lists page 0 (page 1 is free): the census clause stands."""
    failure = _group_end_failure(_end_then(lambda n, pages: pages))
    assert failure.clause == "INV-1"
    assert failure.detail == ("after free_group_end: full free census is [5, 6, 7, 8, 1], the "
                              "spec says [5, 6, 7, 8, 1, 3, 4]")
    assert failure.trace.final_asserts == [
        "assert a.full_attn_allocator.get_all_free_pages().tolist() == [5, 6, 7, 8, 1, 3, 4]"
        "  # [INV-1]"]


def test_a_census_unreadable_after_a_failed_group_end_keeps_the_clause() -> None:
    """The census differs, then cannot be read again: no zeros seen, the clause stands."""

    def reads(n: int, pages: list[int]) -> list[int]:
        if n > 1:
            raise RuntimeError("census gone")
        return pages

    failure = _group_end_failure(_end_then(reads))
    assert failure.clause == "INV-1"


def test_an_overwritten_input_counts_until_the_group_ends() -> None:
    """A later free in the same group, its input kept, does not clear what an earlier
    overwrite did; an overwrite outside any group is no group's."""
    ex = HybridExecutor(hybrid_target(_group_end_raises(1)), Config(1, False))
    ex.create(6, 6)
    first, second = ex.call("alloc", need_size=1), ex.call("alloc", need_size=1)
    ex.call("free_group_begin")
    ex.call("free", free_index=first, clobber=True)
    ex.call("free", free_index=second)
    with pytest.raises(OracleFailure) as err:
        ex.call("free_group_end")
    assert err.value.failure.clause == "GROUP-3"
    ex = HybridExecutor(hybrid_target(_group_end_raises(1)), Config(1, False))
    ex.create(6, 6)
    ex.call("free", free_index=ex.call("alloc", need_size=1), clobber=True)  # no group open
    with pytest.raises(OracleFailure) as err:
        ex.call("free_group_end")
    assert err.value.failure.clause == "SWA-24"


def test_an_overwrite_inside_a_group_is_counted_as_such() -> None:
    ex = HybridExecutor(hybrid_target("kvpool-swa"), Config(1, False))
    ex.create(8, 8)
    a, b = ex.call("alloc", need_size=2), ex.call("alloc", need_size=2)
    ex.call("free", free_index=a, clobber=True)
    assert ex.events["group.input_reused"] == 0
    ex.call("free_group_begin")
    ex.call("free", free_index=b, clobber=True)
    ex.call("free_group_end")
    assert ex.events["group.input_reused"] == 1


# -- what a failure's repro asserts and pictures ---------------------------------------------------
def _broken(name: str) -> Any:
    return next(b for b in BROKEN_HYBRID if b.cls.__name__ == name).factory()


def test_an_eviction_request_missed_is_asserted_by_the_repro_SWA_17() -> None:
    ex = HybridExecutor(hybrid_target(_broken("EvictOnlyWhenFullShort")), Config(1, False))
    ex.create(16, 4)
    ex.call("alloc", need_size=4)
    with pytest.raises(OracleFailure) as err:
        ex.call("evict_to_free_tokens", num_tokens=6)
    failure = err.value.failure
    assert failure.clause == "SWA-17"
    assert failure.trace.final_asserts == [
        "assert cache.requests == [(0, 6)]  # SWA-17 (full, swa)"]
    # the page maps: the full pool before the call (slots 1..4 the first request's) and after
    assert failure.before.splitlines() == ["  before step 2", "    spec   |AAAA............|"]
    assert failure.after.splitlines() == ["  after step 2, full pool",
                                          "    spec   |AAAA............|",
                                          "    target |####............|"]


def _reports_once(after_calls: int) -> Any:
    """kvpool's SWA allocator whose census reports a problem once ``after_calls`` allocations
    were made."""

    class Reports(SWATokenToKVPoolAllocator):  # type: ignore[misc]
        allocs = 0

        def alloc(self, need_size: int) -> Any:
            self.allocs += 1
            return super().alloc(need_size)

        def verify_byte_accounting(self) -> list[str]:
            return ["planted"] if self.allocs >= after_calls else []

    return _full_factory(Reports)


def test_a_census_problem_the_target_reports_is_SWA_19_and_each_check_counts() -> None:
    ex = HybridExecutor(hybrid_target(_reports_once(3)), Config(1, False))
    ex.create(8, 8)
    ex.call("alloc", need_size=1)
    ex.call("alloc", need_size=1)
    assert ex.events["cap.byte_accounting"] == 2  # every call after create, not create itself
    with pytest.raises(OracleFailure) as err:
        ex.call("alloc", need_size=1)
    failure = err.value.failure
    assert failure.clause == "SWA-19"
    assert failure.detail == "after alloc: the target's census reports ['planted']"
    assert failure.trace.final_asserts == ["assert not a.verify_byte_accounting()  # SWA-19"]


def test_a_target_without_a_census_check_is_not_asked_for_one() -> None:
    class NoCensus(SWATokenToKVPoolAllocator):  # type: ignore[misc]
        verify_byte_accounting = None

    ex = HybridExecutor(hybrid_target(_full_factory(NoCensus)), Config(1, False))
    ex.create(8, 8)
    ex.call("alloc", need_size=1)
    assert ex.events["cap.byte_accounting"] == 0


def test_a_census_field_that_differs_at_create_is_asserted_by_the_repro() -> None:
    def used(**kwargs: Any) -> Any:
        alloc = kvpool_pure_swa(**kwargs)
        alloc.alloc(1)
        return alloc

    used.kvpool_hybrid_capabilities = PURE  # type: ignore[attr-defined]
    ex = HybridExecutor(hybrid_target(used), Config(1, False))
    with pytest.raises(OracleFailure) as err:
        ex.create(6, 6)
    assert err.value.failure.trace.final_asserts == [
        "assert a.full_attn_allocator.get_all_free_pages().tolist() == [1, 2, 3, 4, 5, 6]"
        "  # [INV-1]"]


def test_a_wrong_result_is_reported_under_the_calls_clause_and_its_checks_asserted() -> None:
    class Shifted(SWATokenToKVPoolAllocator):  # type: ignore[misc]
        def alloc(self, need_size: int) -> Any:
            out = super().alloc(need_size)
            return None if out is None else out.flip(0)

    ex = HybridExecutor(hybrid_target(_full_factory(Shifted)), Config(1, False))
    ex.create(8, 8)
    with pytest.raises(OracleFailure) as err:
        ex.call("alloc", need_size=2)
    failure = err.value.failure
    assert failure.clause == "SWA-6"
    assert failure.detail == "alloc returned [2, 1], the spec says [1, 2]"
    assert failure.trace.final_asserts == HYBRID_CALLS["alloc"].checks(
        {"need_size": 2}, [1, 2], "r1")
    assert failure.trace.final_asserts and "[1, 2]" in failure.trace.final_asserts[-1]


def test_each_step_records_the_available_size_after_it() -> None:
    """Valid and rejected calls alike (the total, not the full side's, when they differ)."""
    ex = HybridExecutor(hybrid_target("kvpool-swa"), Config(1, False))
    ex.create(32, 16)
    ex.call("alloc", need_size=4)
    assert ex.trace.steps[-1].available_after == 12
    assert ex.call_bad("free", free_index=[99]) == "FREE-1"
    assert ex.trace.steps[-1].available_after == 12
    assert ex.model is not None and ex.model.full_available_size() == 28


def test_only_allocations_results_are_held_against_later_change() -> None:
    """ALIAS-1: the caller keeps an allocation's result (every other one is probed instead);
    a translation's result is not an allocation's."""
    ex = HybridExecutor(hybrid_target("kvpool-swa"), Config(1, False))
    ex.create(16, 16)
    for _ in range(4):
        ex.call("alloc", need_size=1)
    held = ex.events["alias.held"]
    assert held == 2 and len(ex.held) == 2
    for _ in range(4):
        ex.call("translate_loc_from_full_to_swa", kv_indices=[1, 2])
    assert ex.events["alias.held"] == held and len(ex.held) == 2


def test_each_sides_per_slot_liveness_agrees_with_its_mask(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kvpool.oracle.engine import dataplane

    monkeypatch.setenv(dataplane.ENV, "1")
    ex = HybridExecutor(hybrid_target("kvpool-swa"), Config(1, False))
    ex.create(16, 8)
    a = ex.call("alloc", need_size=4)
    ex.call("alloc", need_size=3)
    ex.call("free_swa", free_index=a[2:])  # slot 1 keeps SWA slot 1
    assert ex.plane is not None
    slots = torch.arange(0, 18)
    for side in ex.plane.sides:
        assert [side.live(int(s)) for s in slots] == side.live_of(slots).tolist()
    full, swa = (side.live_of(slots).tolist() for side in ex.plane.sides)
    assert full[1:8] == [True] * 7 and swa[1:8] == [True, True, False, False, True, True, True]


def test_a_long_census_field_is_shortened_to_160_characters() -> None:
    from kvpool.oracle.families.hybrid.executor import _short

    class Shown:
        def __init__(self, n: int) -> None:
            self.n = n

        def __repr__(self) -> str:
            return "x" * self.n

    assert _short(Shown(160)) == "x" * 160
    assert _short(Shown(161)) == "x" * 157 + "..."


class _OverwritesLastResult(SWATokenToKVPoolAllocator):  # type: ignore[misc]
    """Reuses the tensor it returned from one ``alloc`` at the next one (ALIAS-1)."""

    def alloc(self, need_size: int) -> Any:
        last = getattr(self, "last", None)
        if last is not None:
            last.fill_(-1)
        self.last = super().alloc(need_size)
        return self.last


def test_a_result_the_target_changes_later_is_ALIAS_1_with_its_step_asserted() -> None:
    ex = HybridExecutor(hybrid_target(_full_factory(_OverwritesLastResult)), Config(1, False))
    ex.create(8, 8)
    ex.call("alloc", need_size=2)  # held by the caller (step 1)
    with pytest.raises(OracleFailure) as err:
        ex.call("alloc", need_size=2)
    failure = err.value.failure
    assert failure.clause == "ALIAS-1"
    assert failure.detail == "the result of step 1 changed from [1, 2] to [-1, -1]"
    assert failure.trace.final_asserts == ["assert r1.tolist() == [1, 2]  # ALIAS-1"]


def test_a_wrong_capacity_answer_is_SWA_17_with_the_answer_asserted() -> None:
    """The cache was asked for what the spec asks: the repro asserts the answer, not the
    eviction requests."""

    class Answers(SWATokenToKVPoolAllocator):  # type: ignore[misc]
        def check_decode_capacity(self, *args: Any, **kwargs: Any) -> Any:
            return not super().check_decode_capacity(*args, **kwargs)

    ex = HybridExecutor(hybrid_target(_full_factory(Answers)), Config(1, False))
    ex.create(8, 8)
    with pytest.raises(OracleFailure) as err:
        ex.call("check_decode_capacity", num_tokens=2)
    failure = err.value.failure
    assert failure.clause == "SWA-17"
    assert failure.trace.final_asserts == ["assert r1 == True"]


class _EndChangesHeld(SWATokenToKVPoolAllocator):  # type: ignore[misc]
    """``free_group_end`` overwrites the first result it handed out, and its full free census
    lists page 0 from the second read after it on."""

    def alloc(self, need_size: int) -> Any:
        out = super().alloc(need_size)
        self.first = getattr(self, "first", out)
        return out

    def free_group_end(self) -> None:
        super().free_group_end()
        self.first.fill_(-1)
        full, count = self.full_attn_allocator, [0]
        read = full.get_all_free_pages

        def reads() -> torch.Tensor:
            count[0] += 1
            pages = read()
            zero = torch.zeros(1, dtype=pages.dtype)
            return pages if count[0] == 1 else torch.cat([zero, pages])

        full.get_all_free_pages = reads


def test_a_held_result_changed_at_a_group_end_after_an_overwrite_is_GROUP_3() -> None:
    """The held result's change is the symptom; the caller's overwritten input, kept by the
    group, the cause: the repro asserts no held result."""
    ex = HybridExecutor(hybrid_target(_full_factory(_EndChangesHeld)), Config(1, False))
    ex.create(8, 8)
    ex.call("alloc", need_size=2)  # held (step 1)
    second = ex.call("alloc", need_size=2)
    ex.call("free_group_begin")
    ex.call("free", free_index=second, clobber=True)
    with pytest.raises(OracleFailure) as err:
        ex.call("free_group_end")
    failure = err.value.failure
    assert failure.clause == "GROUP-3" and "[ALIAS-1] the result of step 1" in failure.detail
    assert failure.trace.final_asserts == []
