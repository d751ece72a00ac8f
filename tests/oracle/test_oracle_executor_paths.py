"""The executor's rarely taken paths, each with the report it must give: an unknown comparison
order, a factory that fails, a result whose overwrite changes the allocator (``ALIAS-3``), a
spec model that breaks its own invariants, a contract-order target whose eviction frees
more cache entries than the spec's (``CAP-1`` allows it there, not in the exact order), and a
declared shortage raise in contract order (on a shortage, and on a call the spec refuses), a
freed tensor the allocator keeps reading (``ALIAS-2``), a census with the right count but a
wrong slot or in another order, a rejected call that names another clause, raises an undeclared
type or changes a held result, and a tree cache broken by the target (``CAP-1``) or the spec."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from broken_shortage import CAPS as SHORTAGE_CAPS
from broken_shortage import shortageraises
from kvpool.oracle.engine.capabilities import PAGED, TOKEN
from kvpool.oracle.engine.report import OracleError, OracleFailure
from kvpool.oracle.engine.repro import to_pytest
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config, Target
from kvpool.oracle.families.single.executor import Executor
from kvpool.spec import AllocatorModel, ContractViolation
from spec_torch import SpecTorchAllocator, spec_paged, spec_token

TOKEN_TARGET = Target(spec_token, TOKEN, "spec_torch:spec_token")


def test_order_must_be_exact_or_contract() -> None:
    with pytest.raises(ValueError, match="order must be 'exact' or 'contract', got 'fifo'"):
        Executor(TOKEN_TARGET, Config(1, False, "cpu", "fifo"))


def test_a_failing_factory_is_the_oracles_error() -> None:
    def factory(**kwargs: Any) -> Any:
        raise RuntimeError("no device memory")

    ex = Executor(Target(factory, TOKEN, "here:factory"), Config(1, False))
    with pytest.raises(OracleError, match="the factory failed: RuntimeError: no device memory"):
        ex.create(16)


def test_a_model_breaking_its_invariants_is_the_oracles_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: AllocatorModel) -> None:
        raise AssertionError("MODEL-3: planted")

    monkeypatch.setattr(AllocatorModel, "check_invariants", broken)
    ex = Executor(TOKEN_TARGET, Config(1, False))
    with pytest.raises(OracleError, match="the spec model broke its own invariants: MODEL-3"):
        ex.create(16)


class CountsHandedOut(SpecTorchAllocator):
    """ALIAS-3: keeps the tensors ``alloc`` returns as its record of owned slots (no copy) and
    counts a slot the caller overwrote with -1 as available again."""

    def alloc(self, need_size: int) -> torch.Tensor | None:
        out = super().alloc(need_size)
        if out is not None:
            self.handed = [*getattr(self, "handed", []), out]
        return out

    def available_size(self) -> int:
        overwritten = sum(int((t < 0).sum()) for t in getattr(self, "handed", []))
        return super().available_size() + overwritten


def counts_handed_out(*, size: int, page_size: int = 1, need_sort: bool,
                      device: str = "cpu") -> CountsHandedOut:
    return CountsHandedOut(size, 1, need_sort, device, paged=False)


def test_a_result_that_is_the_allocators_record_is_caught_ALIAS_3() -> None:
    target = Target(counts_handed_out, TOKEN, "test_oracle_executor_paths:counts_handed_out")
    result = run_config(target, Config(1, False), max_examples=30, shrink_seconds=1)
    assert result.failure is not None and result.failure.clause == "ALIAS-3", result


class EvictsTheDemand(SpecTorchAllocator):
    """When short, asks the cache for all ``num_tokens`` instead of the shortfall: more
    entries go than the spec evicts (a valid choice in contract order)."""

    def evict_to_free_tokens(self, tree_cache: Any, num_tokens: int) -> None:
        if tree_cache is not None and num_tokens > self.available_size():
            tree_cache.evict(num_tokens)


def evicts_the_demand(*, size: int, page_size: int, need_sort: bool,
                      device: str = "cpu") -> EvictsTheDemand:
    return EvictsTheDemand(size, page_size, need_sort, device, paged=True)


@pytest.mark.parametrize("order", ["contract", "exact"])
def test_extra_evictions_pass_in_contract_order_only_CAP_1(order: str) -> None:
    """8 pages of 4, rows A, B, C of 2 pages each, A and B cached: 12 tokens fall 4 short.
    The spec evicts A; the target evicts A and B. Contract order evicts B from the spec's
    cache too and the states agree; the exact order names CAP-1."""
    target = Target(evicts_the_demand, PAGED, "test_oracle_executor_paths:evicts_the_demand")
    ex = Executor(target, Config(4, False, "cpu", order))
    ex.create(32)
    rows = [ex.call("alloc", need_size=8) for _ in range(3)]
    entries = [list(rows[0]), list(rows[1])]
    if order == "exact":
        with pytest.raises(OracleFailure) as err:
            ex.call("evict_to_free_tokens", entries=entries, num_tokens=12)
        assert err.value.failure.clause == "CAP-1"
        return
    assert ex.call("evict_to_free_tokens", entries=entries, num_tokens=12) == 2
    assert ex.model is not None and ex.model.available_size() == 24


def test_a_declared_shortage_raise_conforms_in_contract_order() -> None:
    """Contract order asks the spec on the state before the call whether it is a shortage."""
    declared = Target(shortageraises, SHORTAGE_CAPS, "broken_shortage:shortageraises")
    result = run_config(declared, Config(4, False, "cpu", "contract"), max_examples=40)
    assert result.ok, result.failure.report() if result.failure else result.error
    assert result.coverage["alloc.short_partial"] and result.coverage["extend.short_empty"]


class RaisesTypeError(SpecTorchAllocator):
    """Raises the declared shortage type on every allocation (on a call the spec refuses
    too)."""

    def alloc(self, need_size: int) -> torch.Tensor | None:
        raise TypeError("no slots")


def test_a_raise_on_a_call_the_spec_refuses_is_the_oracles_error() -> None:
    """A shortened trace can hold an invalid call; the target raising there is no divergence
    but the oracle's error, in contract order as in the exact one."""
    def factory(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
        return RaisesTypeError(size, page_size, need_sort, device)

    target = Target(factory, SHORTAGE_CAPS, "here:factory")
    ex = Executor(target, Config(4, False, "cpu", "contract"))
    ex.create(32)
    with pytest.raises(OracleError, match="is invalid under the spec"):
        ex.call("alloc", need_size=6)                     # not whole pages: ALLOC-1


class StartsOneOver(SpecTorchAllocator):
    """Reports one slot more than it has from the start (a wrong fresh state)."""

    def available_size(self) -> int:
        return super().available_size() + 1


def test_a_wrong_fresh_state_fails_at_the_constructor_step() -> None:
    """The divergence is reported at step 0 (the constructor), before any call."""
    def factory(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
        return StartsOneOver(size, page_size, need_sort, device, paged=False)

    ex = Executor(Target(factory, TOKEN, "here:factory"), Config(1, False))
    with pytest.raises(OracleFailure) as err:
        ex.create(16)
    failure = err.value.failure
    assert failure.trace.failing_step == 0 and len(failure.trace.steps) == 1
    assert "after step 0" in failure.after, failure.after


def test_every_call_is_counted_with_its_events() -> None:
    """``num_calls`` (the main job's call count) counts the constructor and every call; the
    constructor's own event (a size that is not whole pages) is counted once; a free is marked
    as input reused (and reaches ``group.input_reused`` inside a group) only when asked."""
    ex = Executor(Target(spec_paged, PAGED, "spec_torch:spec_paged"), Config(4, False))
    ex.create(18)                                         # 4 pages and 2 ragged tokens
    assert ex.events["life.ragged"] == 1 and ex.num_calls == 1
    rows = [ex.call("alloc", need_size=4) for _ in range(3)]
    ex.call("free_group_begin")
    ex.call("free", free_index=list(rows[0]))
    assert not ex.trace.steps[-1].clobber and ex.events["group.input_reused"] == 0
    ex.call("free", free_index=list(rows[1]), clobber=True)
    assert ex.trace.steps[-1].clobber and ex.events["group.input_reused"] == 1
    ex.call("free_group_end")
    assert ex.num_calls == len(ex.trace.steps) == 8


class RecordsCapacityKeywords(SpecTorchAllocator):
    """Records which of SGLang 0.5.23's extra keywords each ``check_decode_capacity`` got."""

    def check_decode_capacity(self, *, num_tokens: int, tree_cache: Any,
                              **context: Any) -> bool:
        self.context_calls = [*getattr(self, "context_calls", []), sorted(context)]
        return super().check_decode_capacity(num_tokens=num_tokens, tree_cache=tree_cache)


def records_capacity_keywords(*, size: int, page_size: int, need_sort: bool,
                              device: str = "cpu") -> RecordsCapacityKeywords:
    return RecordsCapacityKeywords(size, page_size, need_sort, device, paged=True)


@pytest.mark.parametrize("declared", [True, False])
def test_capacity_keywords_go_to_every_other_check_decode_capacity_only(declared: bool) -> None:
    """A target declaring ``capacity_context`` gets ``requests`` / ``spec_algorithm`` on the
    ``check_decode_capacity`` calls made at an even call count (the constructor counts), and
    the trace and its repro name them there only; no other call, and no call of a target that
    does not declare them, carries them."""
    caps = PAGED.replace(capacity_context=declared)
    ex = Executor(Target(records_capacity_keywords, caps, "here:records"), Config(4, False))
    ex.create(32)
    row = ex.call("alloc", need_size=8)                   # call 1
    for _ in range(3):                                    # calls 2, 3, 4
        ex.call("check_decode_capacity", entries=[list(row)], num_tokens=4)
    ex.call("free", free_index=list(row))
    keywords = ["requests", "spec_algorithm"]
    expected = [keywords, [], keywords] if declared else [[], [], []]
    assert ex.target.context_calls == expected
    assert [s.args.get("context") for s in ex.trace.steps[2:5]] == (
        [True, False, True] if declared else [None, None, None])
    assert all("context" not in s.args for s in ex.trace.steps if s.call != "check_decode_capacity")
    repro = to_pytest(ex.trace, "here:records")
    assert repro.count("spec_algorithm=None") == (2 if declared else 0), repro


def test_a_bad_call_counts_its_clause_and_a_valid_one_is_the_oracles_error() -> None:
    """Every rejected bad call counts once under the clause the spec raised (the clause
    report reads these counts); a "bad" call the spec accepts is a generator error, not a
    pass."""
    ex = Executor(Target(spec_paged, PAGED, "spec_torch:spec_paged"), Config(4, False))
    ex.create(32)
    assert ex.call_bad("alloc", need_size=6) == "ALLOC-1"  # not whole pages
    assert ex.call_bad("alloc", need_size=10) == "ALLOC-1"
    assert ex.events["rejected:ALLOC-1"] == 2
    with pytest.raises(OracleError, match=r"generated bad call alloc\(\{'need_size': 8\}\) is "
                                          r"valid under the spec"):
        ex.call_bad("alloc", need_size=8)


class HandsOutTheFirstRowAgain(SpecTorchAllocator):
    """A later ``alloc`` of the first one's size returns the first one's slots (pages still
    owned)."""

    def alloc(self, need_size: int) -> torch.Tensor | None:
        first = getattr(self, "first", None)
        if first is not None and len(first) == need_size:
            return first.clone()
        out = super().alloc(need_size)
        self.first = out if first is None else first
        return out


def test_the_before_map_labels_pages_by_the_steps_before_the_failing_one() -> None:
    """Contract order adopts a target's allocation before checking it: the page map before
    the failing step still shows each page's owner as of then (pages 1-2 by step A, free
    pages as free), not the failing step's claim; the map after it names the spec's view."""
    def factory(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
        return HandsOutTheFirstRowAgain(size, page_size, need_sort, device, paged=True)

    ex = Executor(Target(factory, PAGED, "here:factory"), Config(4, False, "cpu", "contract"))
    ex.create(32)
    ex.call("alloc", need_size=8)                         # step 1 (A): pages 1 and 2
    ex.call("alloc", need_size=4)                         # step 2 (B): page 3
    with pytest.raises(OracleFailure) as err:
        ex.call("alloc", need_size=8)                     # step 3 claims pages 1 and 2 again
    failure = err.value.failure
    assert failure.trace.failing_step == 3
    assert "before step 3\n    spec   |AAB.....|" in failure.before, failure.before


@pytest.mark.parametrize("ownership", [True, False])
def test_a_reused_input_is_an_alias_case_only_outside_a_group_of_an_owning_target(
        ownership: bool) -> None:
    """``alias.inputs`` (ALIAS-2 checked) counts a clobbered call with input tensors, outside
    a free group, of a target that declares ``ownership``; a call without inputs, a free
    inside a group (GROUP-3's case) and a target without ``ownership`` do not count."""
    caps = PAGED.replace(ownership=ownership)
    ex = Executor(Target(spec_paged, caps, "spec_torch:spec_paged"), Config(4, False))
    ex.create(32)
    rows = [ex.call("alloc", need_size=8) for _ in range(2)]
    ex.call("free", free_index=list(rows[0]), clobber=True)
    assert ex.events["alias.inputs"] == int(ownership)
    ex.call("free_group_begin", clobber=True)             # no input tensors to overwrite
    ex.call("free", free_index=list(rows[1]), clobber=True)
    ex.call("free_group_end")
    assert ex.events["alias.inputs"] == int(ownership)
    assert ex.events["group.input_reused"] == 1


def test_every_other_result_is_probed_and_the_rest_are_held() -> None:
    """The caller writes into the result of every other call (the ones at an even trace
    length before them; ALIAS-3) and into the census then; the other results are held and
    re-checked later (ALIAS-1). The coverage events count each case (the constructor's census
    is probed too)."""
    ex = Executor(Target(spec_paged, PAGED, "spec_torch:spec_paged"), Config(4, False))
    ex.create(64)
    for _ in range(4):
        ex.call("alloc", need_size=4)
    assert [s.probe for s in ex.trace.steps[1:]] == [False, True, False, True]
    assert [index for index, _, _ in ex.held] == [1, 3]
    assert ex.events["alias.held"] == 2 and ex.events["alias.results"] == 3


def test_capacity_keywords_in_a_step_are_dropped_for_a_target_without_them() -> None:
    """A step carrying ``context`` (a trace recorded against a target that takes SGLang's
    extra keywords) replayed against one that does not declare them: they are not sent."""
    caps = PAGED.replace(capacity_context=False)
    ex = Executor(Target(records_capacity_keywords, caps, "here:records"), Config(4, False))
    ex.create(32)
    row = ex.call("alloc", need_size=8)
    ex.call("check_decode_capacity", entries=[list(row)], num_tokens=4, context=True)
    assert ex.target.context_calls == [[]]


def test_a_declared_shortage_raise_is_recorded_for_the_repro() -> None:
    """The step records the declared type the target raised on a shortage, and the repro
    expects that raise there instead of a None."""
    ex = Executor(Target(shortageraises, SHORTAGE_CAPS, "broken_shortage:shortageraises"),
                  Config(4, False, "cpu", "contract"))
    ex.create(32)
    ex.call("alloc", need_size=40)
    ex.call("alloc", need_size=8)
    assert [s.short_raised for s in ex.trace.steps[1:]] == ["builtins.TypeError", None]
    repro = to_pytest(ex.trace, "broken_shortage:shortageraises")
    assert repro.count("TypeError") == 1, repro


class FreesLazily(SpecTorchAllocator):
    """ALIAS-2: keeps each freed tensor (no copy) and frees its slots only later; until then
    its census reads the kept tensors, where the padding slot 0 means "nothing"."""

    def free(self, free_index: torch.Tensor) -> None:
        self.pending = [*getattr(self, "pending", []), free_index]

    def _pending(self) -> list[int]:
        return [v for t in getattr(self, "pending", []) for v in t.tolist() if v > 0]

    def available_size(self) -> int:
        return super().available_size() + len(self._pending())

    def get_all_free_pages(self) -> torch.Tensor:
        return torch.tensor(sorted([*super().get_all_free_pages().tolist(), *self._pending()]))


def test_a_reused_free_input_is_overwritten_with_the_padding_slot_ALIAS_2() -> None:
    """The caller overwrites a freed tensor with the padding slot 0: freeing slot 1 and then
    finding the kept tensor holding 0 is a change the harness sees (a 1 would hide it)."""
    def factory(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
        return FreesLazily(size, page_size, need_sort, device, paged=False)

    ex = Executor(Target(factory, TOKEN, "here:factory"), Config(1, False, "cpu", "contract"))
    ex.create(8)
    row = ex.call("alloc", need_size=1)
    assert row == [1]
    with pytest.raises(OracleFailure) as err:
        ex.call("free", free_index=[1], clobber=True)
    assert err.value.failure.clause == "ALIAS-2", err.value.failure.report()
    assert "free [1, 2, 3, 4, 5, 6, 7, 8] -> [2, 3, 4, 5, 6, 7, 8]" in err.value.failure.detail


def test_a_state_call_probes_the_census_at_every_other_step() -> None:
    """A free at an odd step index has its census overwritten by the caller (ALIAS-3), like
    an allocation there; the constructor's census is probed too."""
    ex = Executor(Target(spec_paged, PAGED, "spec_torch:spec_paged"), Config(4, False))
    ex.create(32)
    row = ex.call("alloc", need_size=8)
    ex.call("free", free_index=list(row))
    assert [s.probe for s in ex.trace.steps[1:]] == [False, True]
    assert ex.events["alias.results"] == 2


class MislabelsAFreedSlot(SpecTorchAllocator):
    """After a free, lists slot 0 (the padding slot) in place of the last free slot: the
    count is right, the census is not."""

    def free(self, free_index: torch.Tensor) -> None:
        super().free(free_index)
        self.mislabels = True

    def get_all_free_pages(self) -> torch.Tensor:
        free = super().get_all_free_pages()
        if getattr(self, "mislabels", False):
            free[-1] = 0
        return free


def mislabels_a_freed_slot(*, size: int, page_size: int = 1, need_sort: bool,
                           device: str = "cpu") -> MislabelsAFreedSlot:
    return MislabelsAFreedSlot(size, 1, need_sort, device, paged=False)


def test_a_census_with_the_right_count_but_a_wrong_slot_fails_and_its_repro_too() -> None:
    """Contract order: available_size() agrees, the listed slots do not. The failure names
    the wrong slot, and the repro's census assert fails on the broken target."""
    path = "test_oracle_executor_paths:mislabels_a_freed_slot"
    ex = Executor(Target(mislabels_a_freed_slot, TOKEN, path), Config(1, False, "cpu", "contract"))
    ex.create(8)
    row = ex.call("alloc", need_size=2)
    with pytest.raises(OracleFailure) as err:
        ex.call("free", free_index=row)
    failure = err.value.failure
    assert "0" in failure.detail and failure.trace.failing_step == 2, failure.report()
    repro = to_pytest(failure.trace, path)
    assert "census()" in repro.split("a.free(", 1)[1]  # the contract's census after the free
    namespace: dict[str, Any] = {}
    exec(compile(repro, "<repro>", "exec"), namespace)
    with pytest.raises(AssertionError):
        namespace["test_kvpool_repro"]()


class ListsFreedSlotsLast(SpecTorchAllocator):
    """Allocates in the spec's order but lists freed slots after the others."""

    def get_all_free_pages(self) -> torch.Tensor:
        free = super().get_all_free_pages().tolist()
        freed = [v for v in free if v in getattr(self, "freed", ())]
        return torch.tensor([v for v in free if v not in freed] + freed)

    def free(self, free_index: torch.Tensor) -> None:
        super().free(free_index)
        self.freed = {*getattr(self, "freed", ()), *free_index.tolist()}


def test_a_census_in_another_order_breaks_the_calls_order_clause_in_exact_order() -> None:
    def factory(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
        return ListsFreedSlotsLast(size, 1, need_sort, device, paged=False)

    ex = Executor(Target(factory, TOKEN, "here:factory"), Config(1, True))
    ex.create(8)
    row = ex.call("alloc", need_size=2)
    ex.call("merge_and_sort_free")
    ex.call("free", free_index=row)
    with pytest.raises(OracleFailure) as err:
        ex.call("merge_and_sort_free")
    assert err.value.failure.clause == "SORT-3", err.value.failure.report()


def test_byte_accounting_is_checked_after_every_call_but_the_constructor() -> None:
    ex = Executor(Target(spec_paged, PAGED, "spec_torch:spec_paged"), Config(4, False))
    ex.create(32)
    assert ex.events["cap.byte_accounting"] == 0
    row = ex.call("alloc", need_size=8)
    ex.call("free", free_index=list(row))
    assert ex.events["cap.byte_accounting"] == 2


class RejectsWithAnotherClause(SpecTorchAllocator):
    """Rejects a double free, naming ALLOC-1 instead of the spec's clause."""

    def free(self, free_index: torch.Tensor) -> None:
        try:
            super().free(free_index)
        except ContractViolation as err:
            raise ContractViolation("ALLOC-1", err.detail) from err


class RejectsWithValueError(SpecTorchAllocator):
    """Rejects a double free with a plain ValueError (not a declared error type)."""

    def free(self, free_index: torch.Tensor) -> None:
        try:
            super().free(free_index)
        except ContractViolation as err:
            raise ValueError("slot already free") from err


class ScribblesOnRejection(SpecTorchAllocator):
    """Rejects a double free rightly, but first zeroes the last tensor it handed out."""

    def alloc(self, need_size: int) -> torch.Tensor | None:
        self.last = super().alloc(need_size)
        return self.last

    def free(self, free_index: torch.Tensor) -> None:
        try:
            super().free(free_index)
        except ContractViolation:
            self.last.fill_(0)
            raise


def _double_free(cls: type[SpecTorchAllocator], caps: Any = TOKEN) -> OracleFailure:
    """Alloc 2 slots, free them, free them again (the spec's FREE-3): the failure."""
    def factory(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
        return cls(size, 1, need_sort, device, paged=False)

    ex = Executor(Target(factory, caps, "here:factory"), Config(1, False))
    ex.create(8)
    row = ex.call("alloc", need_size=2)
    ex.call("free", free_index=row)
    assert not ex.failed
    with pytest.raises(OracleFailure) as err:
        ex.call_bad("free", free_index=row)
    assert ex.failed and err.value.failure.trace.failing_step == 3
    return err.value


def test_a_contract_violation_naming_another_clause_breaks_the_spec_clause() -> None:
    failure = _double_free(RejectsWithAnotherClause).failure
    assert failure.clause == "FREE-3" and "raised [ALLOC-1]" in failure.detail, failure.report()


def test_an_undeclared_error_type_is_recorded_in_the_report() -> None:
    failure = _double_free(RejectsWithValueError).failure
    assert failure.clause == "FREE-3", failure.report()
    assert failure.trace.steps[3].raised == "ValueError: slot already free"
    assert "raised ValueError: slot already free" in failure.report()


def test_a_held_result_changed_by_a_rejected_call_is_caught_ALIAS_1() -> None:
    failure = _double_free(ScribblesOnRejection).failure
    assert failure.clause == "ALIAS-1", failure.report()
    assert "the result of step 1 changed from [1, 2] to [0, 0]" in failure.detail


class BreaksTheTreeCache(SpecTorchAllocator):
    """Evicts rightly, then puts a tuple into the tree cache's entries."""

    def evict_to_free_tokens(self, tree_cache: Any, num_tokens: int) -> None:
        super().evict_to_free_tokens(tree_cache, num_tokens)
        tree_cache.entries.append((1, 2))


def test_a_target_breaking_the_tree_cache_fails_CAP_1() -> None:
    def factory(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
        return BreaksTheTreeCache(size, 4, need_sort, device, paged=True)

    ex = Executor(Target(factory, PAGED, "here:factory"), Config(4, False))
    ex.create(16)
    rows = [ex.call("alloc", need_size=8) for _ in range(2)]
    with pytest.raises(OracleFailure) as err:
        ex.call("evict_to_free_tokens", entries=rows, num_tokens=4)
    assert err.value.failure.clause == "CAP-1", err.value.failure.report()
    assert "left the tree cache broken: an entry is not a list of slots" in err.value.failure.detail


def test_a_spec_cache_breaking_its_invariants_is_the_oracles_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def breaks(self: AllocatorModel, tree_cache: Any, num_tokens: int) -> None:
        tree_cache.num_evicted = -1

    monkeypatch.setattr(AllocatorModel, "evict_to_free_tokens", breaks)
    ex = Executor(TOKEN_TARGET, Config(1, False))
    ex.create(16)
    row = ex.call("alloc", need_size=8)
    with pytest.raises(OracleError, match="the spec's tree cache broke its invariants: num_evi"):
        ex.call("evict_to_free_tokens", entries=[row], num_tokens=16)
