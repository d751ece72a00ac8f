"""The page-interleave rules (``PINTER-1..13``, SPEC.md section 19) on the spec model
(:class:`kvpool.spec.page_interleave_model.PageInterleaveModel`) and on kvpool's allocator
(:class:`kvpool.impl.page_interleave.PageInterleavePoolAllocator`): concrete call sequences per
clause; the pure functions' PEP 316 contracts evaluated at run time on their whole small
domains; and the allocator against the model on random call sequences (results, class lists,
rejections)."""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from kvpool.impl.page_interleave import PageInterleavePoolAllocator
from kvpool.spec import ContractViolation
from kvpool.spec import page_interleave as arith
from kvpool.spec.page_interleave_model import PageInterleaveModel


def t(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def extend(x: PageInterleavePoolAllocator, requests: list[tuple[int, int]],
           bases: list[int | None]) -> tuple[list[int] | None, list[int | None]]:
    """kvpool's ``alloc_extend`` in the model's terms."""
    prefix, seq = t([p for p, _ in requests]), t([s for _, s in requests])
    bases = list(bases)
    out = x.alloc_extend(prefix, prefix, seq, seq, prefix - 1, int((seq - prefix).sum()),
                         rotation_bases=bases)
    return (None if out is None else out.tolist()), bases


def lists(x: PageInterleavePoolAllocator) -> tuple[list[list[int]], list[list[int]]]:
    return ([f.tolist() for f in x.class_free_pages], [r.tolist() for r in x.class_release_pages])


def test_fresh_pool_classes_and_reserved_pages_PINTER_1_PINTER_13() -> None:
    """Class ``r`` lists ``N + r, 2N + r, ..``; pages ``0..N-1`` are never listed; ``clear``
    restores that after use; fewer than two ranks is refused."""
    m, x = PageInterleaveModel(12, 4, 4, False), PageInterleavePoolAllocator(12, 4, 4)
    want = [[4, 8, 12], [5, 9, 13], [6, 10, 14], [7, 11, 15]]
    assert m.free_lists == want and lists(x)[0] == want
    extend(x, [(0, 20)], [None])
    m.alloc_extend([(0, 20)], [None])
    m.clear()
    x.clear()
    assert m.free_lists == want and lists(x) == (want, [[], [], [], []])
    with pytest.raises(ContractViolation) as err:
        PageInterleaveModel(8, 4, 1, False)
    assert err.value.clause == "PINTER-1"
    with pytest.raises(ContractViolation) as err:
        PageInterleavePoolAllocator(8, 4, 1)
    assert err.value.clause == "PINTER-1"


def test_census_floor_and_base_PINTER_2_PINTER_3_PINTER_4() -> None:
    """Counts are free plus release lists; ``available_size`` the min-class floor; a new
    chain's base the class with the most free pages, lowest id on a tie."""
    m, x = PageInterleaveModel(8, 4, 2, True), PageInterleavePoolAllocator(8, 4, 2, need_sort=True)
    assert m.alloc_extend([(0, 12)], [None]) == ([*range(8, 20)], [0])
    assert extend(x, [(0, 12)], [None]) == ([*range(8, 20)], [0])
    m.free([8])
    x.free(t([8]))
    want = ([1, 1], 8, 8, 0, [5, 2])
    assert (m.counts(), m.available_size(), m.aggregate_free_size(), m.least_full_class(),
            m.all_free_pages()) == want
    assert (x.class_free_page_counts(), x.available_size(), x.aggregate_free_size(),
            x.least_full_class(), x.get_all_free_pages().tolist()) == want


def test_cyclic_placement_and_phase_PINTER_5_PINTER_7() -> None:
    """Position-page ``j`` of an extension after ``p`` pages draws class ``(b + p + j) % N``;
    each request's per-class counts differ by at most one."""
    for side in ("model", "impl"):
        m = PageInterleaveModel(32, 1, 4, False)
        x = PageInterleavePoolAllocator(32, 1, 4)
        run = (lambda r, b, m=m: m.alloc_extend(r, b)) if side == "model" else (
            lambda r, b, x=x: extend(x, r, b))
        first, _ = run([(0, 6)], [2])
        assert [p % 4 for p in first or []] == [2, 3, 0, 1, 2, 3]
        more, _ = run([(6, 9)], [2])
        assert [p % 4 for p in more or []] == [0, 1, 2]  # (2 + 6 + j) % 4
        cyc = m.alloc_cyclic(5, 5) if side == "model" else x.alloc_cyclic(5, 5).tolist()
        assert [p % 4 for p in cyc or []] == [1, 2, 3, 0, 1]
    for first_class, pages, n in itertools.product(range(4), range(13), (2, 3, 4)):
        if first_class < n:
            counts = arith.class_counts(first_class, pages, n)
            chain = arith.chain_classes(first_class, pages, n)
            assert counts == [chain.count(c) for c in range(n)]
            assert max(counts) - min(counts) <= 1


def test_shortage_refuses_the_batch_whole_PINTER_6() -> None:
    """A batch one class cannot supply is refused whole; the bases are resolved anyway."""
    m, x = PageInterleaveModel(8, 4, 2, False), PageInterleavePoolAllocator(8, 4, 2)
    assert m.alloc_extend([(0, 12)], [None])[0] is not None and extend(x, [(0, 12)], [None])[0]
    assert m.alloc_extend([(0, 4), (0, 8)], [None, None]) == (None, [1, 0])
    assert extend(x, [(0, 4), (0, 8)], [None, None]) == (None, [1, 0])
    assert m.free_lists == lists(x)[0] == [[], [5]]


def test_free_whole_pages_to_the_front_and_groups_PINTER_8_PINTER_10() -> None:
    """A free releases the pages of its slots whole, ascending, to the front of their class
    lists; inside a group they wait for its end, then go as one free."""
    m, x = PageInterleaveModel(16, 4, 2, False), PageInterleavePoolAllocator(16, 4, 2)
    m.alloc_extend([(0, 32)], [0])
    extend(x, [(0, 32)], [0])
    for side in (m, x):
        side.free([21, 9] if side is m else t([21, 9]))  # pages 5 and 2
        side.free_group_begin()
        side.free([12, 16] if side is m else t([12, 16]))  # pages 3 and 4
    assert m.free_lists == lists(x)[0] == [[2], [5]]
    m.free_group_end()
    x.free_group_end()
    assert m.free_lists == lists(x)[0] == [[4, 2], [3, 5]]


def test_need_sort_merges_every_release_list_PINTER_9() -> None:
    """need_sort: frees wait on the release lists; a short class's need merges them all,
    ascending."""
    m, x = PageInterleaveModel(12, 4, 2, True), PageInterleavePoolAllocator(12, 4, 2,
                                                                          need_sort=True)
    m.alloc_extend([(0, 24)], [None])
    extend(x, [(0, 24)], [None])
    m.free([24, 8, 12])
    x.free(t([24, 8, 12]))
    assert (m.free_lists, m.release_lists) == lists(x) == ([[], []], [[2, 6], [3]])
    assert m.alloc_extend([(0, 4)], [1])[0] == extend(x, [(0, 4)], [1])[0] == [12, 13, 14, 15]
    assert (m.free_lists, m.release_lists) == lists(x) == ([[2, 6], []], [[], []])


@pytest.mark.parametrize("call", ["reserved", "past", "double", "group", "unaligned", "empty",
                                  "nested"])
def test_caller_errors_change_nothing_PINTER_11(call: str) -> None:
    """Each caller error raises ``ContractViolation("PINTER-11")`` on both sides, nothing
    changed."""
    m, x = PageInterleaveModel(8, 4, 2, False), PageInterleavePoolAllocator(8, 4, 2)
    m.alloc_extend([(0, 8)], [0])
    extend(x, [(0, 8)], [0])
    for side in (m, x):
        f = side.free if side is m else (lambda s: x.free(t(s)))
        if call in ("group", "nested"):
            side.free_group_begin()
            f([8])
        before = (side.free_lists, side.release_lists) if side is m else lists(x)
        with pytest.raises(ContractViolation) as err:
            if call in ("reserved", "past", "double", "group"):
                f({"reserved": [4], "past": [40], "double": [16], "group": [9]}[call])
            elif call == "nested":
                side.free_group_begin()
            else:
                requests = [(2, 6)] if call == "unaligned" else [(4, 4)]
                side.alloc_extend(requests, [0]) if side is m else extend(x, requests, [0])
        assert err.value.clause == "PINTER-11"
        assert before == ((side.free_lists, side.release_lists) if side is m else lists(x))


def test_mirrored_pools_stay_identical_PINTER_12() -> None:
    """Two pools fed the same calls hold the same state after every call."""
    a, b = PageInterleavePoolAllocator(16, 4, 2), PageInterleavePoolAllocator(16, 4, 2)
    m = PageInterleaveModel(16, 4, 2, False)
    for requests in ([(0, 5), (0, 9)], [(0, 3)]):
        outs = [extend(p, requests, [None] * len(requests)) for p in (a, b)]
        assert outs[0] == outs[1] == m.alloc_extend(requests, [None] * len(requests))
        assert lists(a) == lists(b) and m.digest_state()[:2] == tuple(
            tuple(map(tuple, part)) for part in lists(a))


LINE = re.compile(r"^\s*(pre|post|inv):\s*(.*)$")
PURE = [arith.page_class, arith.physical_page, arith.logical_page, arith.chain_classes,
        arith.class_counts, arith.start_class, arith.least_full_class, arith.min_class_floor,
        arith.new_pages_of]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_pure_function_contracts_hold_PINTER_1_PINTER_3_PINTER_4_PINTER_7(data: Any) -> None:
    """Each pure function's ``post:`` holds wherever its ``pre:`` does (a ContractViolation
    only where it declares ``raises``)."""
    fn = data.draw(st.sampled_from(PURE))
    params = list(inspect.signature(fn).parameters)
    doc = inspect.getdoc(fn) or ""
    pre = [m[2] for m in map(LINE.match, doc.splitlines()) if m and m[1] == "pre"]
    post = [m[2] for m in map(LINE.match, doc.splitlines()) if m and m[1] == "post"]
    scope: dict[str, Any] = {}
    for name in params:
        scope[name] = (data.draw(st.lists(st.integers(-8, 64), min_size=2, max_size=8))
                       if name == "counts" else data.draw(st.integers(-70, 300)))
    namespace = {**vars(arith), "all": all, "sum": sum, "max": max, "min": min, "len": len,
                 "range": range}
    if not all(eval(p, {**namespace, **scope}) for p in pre):
        return
    try:
        result = fn(*(scope[name] for name in params))
    except ContractViolation:
        assert "raises: ContractViolation" in doc
        return
    for p in post:
        assert eval(p, {**namespace, **scope, "__return__": result}), (fn.__name__, scope, p)


def outcome(call: Callable[[], Any]) -> Any:
    """``call()``'s result, or the clause of the ContractViolation it raised."""
    try:
        return call()
    except ContractViolation as err:
        return err.clause


CALL = st.one_of(
    st.tuples(st.just("extend"), st.lists(st.tuples(st.integers(0, 2), st.integers(0, 20),
                                                    st.sampled_from([None, 0, 1, 3])),
                                          min_size=1, max_size=3)),
    st.tuples(st.just("free_held"), st.integers(0, 5)),
    st.tuples(st.just("free"), st.lists(st.integers(0, 80), max_size=3)),
    st.tuples(st.just("free_group_begin"), st.none()),
    st.tuples(st.just("free_group_end"), st.none()),
    st.tuples(st.just("merge_and_sort_free"), st.none()),
    st.tuples(st.just("clear"), st.none()),
)


@settings(max_examples=120, deadline=None)
@given(n=st.sampled_from([2, 3, 4]), ps=st.sampled_from([1, 2, 4]), pages=st.integers(0, 5),
       need_sort=st.booleans(), calls=st.lists(CALL, max_size=20))
def test_allocator_agrees_with_the_model_PINTER_1_PINTER_13(
        n: int, ps: int, pages: int, need_sort: bool, calls: list[tuple[str, Any]]) -> None:
    """kvpool's allocator returns, rejects and lists what the model does, call by call, and
    both keep their invariants."""
    m = PageInterleaveModel(pages * ps, ps, n, need_sort)
    x = PageInterleavePoolAllocator(pages * ps, ps, n, need_sort=need_sort)
    for name, arg in calls:
        sides: tuple[Callable[[], Any], Callable[[], Any]]
        if name == "extend":
            requests = [(p * ps, p * ps + s) for p, s, _ in arg]
            bases = [b for _, _, b in arg]
            sides = (partial(m.alloc_extend, requests, bases), partial(extend, x, requests, bases))
        elif name in ("free", "free_held"):
            slots = arg if name == "free" else [p * ps for p in sorted(m.held)[arg:arg + 2]]
            sides = (partial(m.free, slots), partial(x.free, t(slots)))
        else:
            sides = (getattr(m, name), getattr(x, name))
        outcomes = [outcome(side) for side in sides]
        assert outcomes[0] == outcomes[1], (name, arg, outcomes)
        assert (m.free_lists, m.release_lists) == lists(x), (name, arg)
        m.check_invariants()
        x.check_invariants()
