"""The Mamba state-slot rules (``MSLOT-1..11``, SPEC.md section 18) on the spec model
(:class:`kvpool.spec.mamba_slots.MambaSlotModel`) and on kvpool's allocator
(:class:`kvpool.impl.mamba_slots.MambaSlotAllocator`, through a list adapter), each case a
concrete call sequence; then the model's PEP 316 contracts evaluated at run time on random
sequences, and the allocator against the model on the same sequences."""

from __future__ import annotations

import copy
import inspect
import re
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from kvpool.impl.mamba_slots import MambaSlotAllocator
from kvpool.spec import ContractViolation
from kvpool.spec import mamba_slots as spec
from kvpool.spec.mamba_slots import MambaSlotModel


class ListPool:
    """kvpool's allocator with the model's list API (results and free list as lists)."""

    def __init__(self, size: int) -> None:
        self.x = MambaSlotAllocator(size)

    @property
    def free_slots(self) -> list[int]:
        return list(self.x.free_slots.tolist())

    def available_size(self) -> int:
        assert self.x.schedulable_available_size() == self.x.available_size()
        return self.x.available_size()

    def alloc(self, n: int) -> list[int] | None:
        out = self.x.alloc(n)
        assert out is None or out.dtype == torch.int64
        return None if out is None else list(out.tolist())

    def free(self, slots: list[int]) -> None:
        self.x.free(torch.tensor(slots, dtype=torch.int64))

    def alloc_group_begin(self, n: int) -> None:
        self.x.alloc_group_begin(n)

    def alloc_group_end(self) -> None:
        self.x.alloc_group_end()

    def clear(self) -> None:
        self.x.clear()

    def check_invariants(self) -> None:
        self.x.check_invariants()


@pytest.fixture(params=["model", "impl"])
def make(request: pytest.FixtureRequest) -> Any:
    return MambaSlotModel if request.param == "model" else ListPool


def _rejects(clause: str, pool: Any, fn: Any) -> None:
    """``fn()`` raises ContractViolation(clause) and leaves the free list as it was (ERR-1)."""
    before = (pool.free_slots, pool.available_size())
    with pytest.raises(ContractViolation) as err:
        fn()
    assert err.value.clause == clause
    assert (pool.free_slots, pool.available_size()) == before
    pool.check_invariants()


def test_MSLOT_1_slot_zero_is_reserved_and_the_rest_free_ascending(make: Any) -> None:
    pool = make(5)
    assert pool.free_slots == [1, 2, 3, 4, 5]
    assert pool.alloc(5) == [1, 2, 3, 4, 5] and pool.alloc(1) is None  # never slot 0
    _rejects("MSLOT-6", pool, lambda: pool.free([0]))
    assert make(0).free_slots == [] and make(0).alloc(1) is None


def test_MSLOT_2_available_size_excludes_the_groups_slots(make: Any) -> None:
    pool = make(6)
    pool.alloc_group_begin(4)
    assert pool.available_size() == 2 and pool.free_slots == [5, 6]
    assert pool.alloc(1) == [1] and pool.available_size() == 2
    pool.alloc_group_end()
    assert pool.available_size() == 5


def test_MSLOT_3_alloc_is_first_in_first_out(make: Any) -> None:
    pool = make(6)
    a, b = pool.alloc(2), pool.alloc(1)
    assert (a, b) == ([1, 2], [3])
    pool.free(b)
    pool.free(a)
    assert pool.alloc(0) == [] and pool.alloc(4) == [4, 5, 6, 3] and pool.alloc(2) == [1, 2]


def test_MSLOT_4_a_shortage_returns_none_and_takes_nothing(make: Any) -> None:
    pool = make(3)
    assert pool.alloc(2) == [1, 2]
    assert pool.alloc(2) is None and pool.free_slots == [3] and pool.available_size() == 1


def test_MSLOT_5_free_appends_in_the_order_given(make: Any) -> None:
    pool = make(5)
    row = pool.alloc(4)
    pool.free([row[2], row[0]])
    assert pool.free_slots == [5, 3, 1]
    pool.free([])
    assert pool.free_slots == [5, 3, 1]


@pytest.mark.parametrize("slots", [[0], [6], [-1], [3], [1, 1], [1, 0]])
def test_MSLOT_6_a_free_of_a_slot_not_held_is_rejected(make: Any, slots: list[int]) -> None:
    pool = make(5)
    pool.alloc(2)  # holds 1, 2; 3 is free, 0 reserved, 6 past the end
    _rejects("MSLOT-6", pool, lambda: pool.free(slots))


def test_MSLOT_6_a_slot_pre_allocated_to_the_group_is_not_held(make: Any) -> None:
    pool = make(4)
    pool.alloc_group_begin(2)
    _rejects("MSLOT-6", pool, lambda: pool.free([2]))
    assert pool.alloc(1) == [1]
    pool.free([1])  # drawn: held now


def test_MSLOT_7_negative_counts_are_rejected(make: Any) -> None:
    pool = make(4)
    _rejects("MSLOT-7", pool, lambda: pool.alloc(-1))
    _rejects("MSLOT-7", pool, lambda: pool.alloc_group_begin(-2))
    pool.alloc_group_begin(0)  # opens an empty group


def test_MSLOT_8_group_begin_pre_allocates_or_holds_none(make: Any) -> None:
    pool = make(4)
    pool.alloc_group_begin(5)  # more than are free: none
    assert pool.free_slots == [1, 2, 3, 4]
    _rejects("MSLOT-8", pool, lambda: pool.alloc_group_begin(1))  # groups do not nest
    pool.alloc_group_end()
    pool.alloc_group_begin(3)
    assert pool.free_slots == [4]


def test_MSLOT_9_alloc_one_drains_the_group_then_the_free_list(make: Any) -> None:
    pool = make(6)
    pool.alloc_group_begin(2)
    assert pool.alloc(2) == [3, 4]  # n != 1: the free list
    assert pool.alloc(1) == [1] and pool.alloc(1) == [2]
    assert pool.alloc(1) == [5] and pool.free_slots == [6]


def test_MSLOT_10_group_end_returns_the_rest_in_order(make: Any) -> None:
    pool = make(5)
    pool.alloc_group_begin(3)
    assert pool.alloc(1) == [1]
    pool.free([1])
    pool.alloc_group_end()
    assert pool.free_slots == [4, 5, 1, 2, 3]
    pool.alloc_group_end()  # no group: nothing
    assert pool.free_slots == [4, 5, 1, 2, 3]


def test_MSLOT_11_clear_frees_everything_and_closes_the_group(make: Any) -> None:
    pool = make(4)
    pool.alloc(1)
    pool.alloc_group_begin(2)
    pool.clear()
    assert pool.free_slots == [1, 2, 3, 4] and pool.available_size() == 4
    assert pool.alloc(1) == [1]
    pool.alloc_group_end()
    assert pool.free_slots == [2, 3, 4]
    pool.alloc_group_begin(1)  # the group was closed: no nesting error


# -- the model's contracts at run time, the allocator against the model ---------------------------
LINE = re.compile(r"^\s*(pre|post|inv|raises):\s*(.+?)\s*$")
NAMESPACE = vars(spec)


def _contract(obj: object) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"pre": [], "post": [], "inv": [], "raises": []}
    for line in (inspect.getdoc(obj) or "").splitlines():
        m = LINE.match(line)
        if m:
            out[m[1]].append(m[2])
    return out


def _holds(expr: str, scope: dict[str, Any]) -> bool:
    return bool(eval(expr, dict(NAMESPACE), scope))


CALL = st.one_of(
    st.tuples(st.just("alloc"), st.integers(-1, 6)),
    st.tuples(st.just("free"), st.lists(st.integers(0, 9), max_size=3)),
    st.tuples(st.just("free_held"), st.integers(0, 3)),
    st.tuples(st.just("alloc_group_begin"), st.integers(-1, 5)),
    st.tuples(st.just("alloc_group_end"), st.none()),
    st.tuples(st.just("clear"), st.none()),
)


@settings(max_examples=150, deadline=None)
@given(size=st.integers(0, 8), calls=st.lists(CALL, max_size=25))
def test_contracts_hold_and_the_allocator_agrees_MSLOT_1_MSLOT_11(
    size: int, calls: list[tuple[str, Any]]
) -> None:
    """Every ``inv:`` after each call, each method's ``post:`` (``__old__`` a copy from before)
    where it returned, and nothing changed where it raised; kvpool's allocator returns,
    raises and lists the same."""
    model, pool = MambaSlotModel(size), ListPool(size)
    invariants = _contract(MambaSlotModel)["inv"]
    for name, arg in calls:
        if name == "free_held":
            held = sorted(model.held)
            name, arg = "free", held[arg:arg + 2] if held else []
        method = getattr(model, name)
        args = () if arg is None else (arg,)
        old = SimpleOld(copy.deepcopy(model))
        outcome: Any
        try:
            result = method(*args)
            outcome = result
        except ContractViolation as err:
            outcome = err.clause
            assert (model.free_slots, model.group, model.held) == (
                old.self.free_slots, old.self.group, old.self.held)
        else:
            for post in _contract(method)["post"]:
                assert _holds(post, {"self": model, "__return__": result, "__old__": old,
                                     **dict(zip(inspect.signature(method).parameters, args))}), post
        try:
            got = getattr(pool, name)(*args)
        except ContractViolation as err:
            got = err.clause
        assert got == outcome, (name, args, got, outcome)
        assert pool.free_slots == model.free_slots and pool.available_size() == len(
            model.free_slots)
        for inv in invariants:
            assert _holds(inv, {"self": model}), inv
        model.check_invariants()
        pool.check_invariants()


class SimpleOld:
    """``__old__`` of a contract: ``__old__.self`` is the model before the call."""

    def __init__(self, before: MambaSlotModel) -> None:
        self.self = before


def test_unchecked_allocator_lists_what_it_is_given_as_sglang_does_MSLOT_6() -> None:
    """``checked=False``: a double free, slot 0 and ids past the end are appended as given (the
    ring grows past ``size``); a negative count hands out nothing; a nested begin first ends
    the open group."""
    pool = MambaSlotAllocator(4, checked=False)
    slot = pool.alloc(1)
    assert slot is not None
    pool.free(slot)
    pool.free(slot)
    pool.free(torch.tensor([0, 9, -2] * 12))
    assert pool.free_slots.tolist() == [2, 3, 4, 1, 1, *[0, 9, -2] * 12]
    assert pool.alloc(-1) is not None and pool.available_size() == 41
    pool.alloc_group_begin(2)
    pool.alloc_group_begin(1)
    assert pool.free_slots.tolist()[-3:] == [-2, 2, 3]


@pytest.mark.crosshair
def test_crosshair_finds_no_counterexample_in_the_model_MSLOT_6_MSLOT_7() -> None:
    """CrossHair (PEP 316, 5 s a condition) on ``kvpool.spec.mamba_slots``: every contract holds
    on every path it explores, ``check_count`` / ``check_free`` and the model's methods alike
    (no ``error:`` line, no unmet precondition)."""
    import shutil
    import subprocess

    exe = shutil.which("crosshair")
    if exe is None:
        pytest.skip("CrossHair is not installed (pip install -e '.[test]')")
    run = subprocess.run([exe, "check", "--report_all", "--analysis_kind=PEP316",
                          "--per_condition_timeout=5", "kvpool.spec.mamba_slots"],
                         capture_output=True, text=True, timeout=600, check=False)
    out = run.stdout + run.stderr
    assert "error:" not in out and "Unable to meet precondition" not in out, out
    assert "Confirmed over all paths" in out, out
