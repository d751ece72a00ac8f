"""The free-list buffers' rarely reached branches, pinned by explicit examples.

A token free list that wraps past the end of its ring on a push (``FREE-5``: frees append at the
tail, in order), counter corruption reported by ``check_invariants`` (``CAP-3``), and
``need_sort`` switched on after ``clear()`` (``SORT-1``: releases are staged, merged sorted when
an allocation runs short). Both CPU backends (numpy, and torch forced by ``torch_ops``).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from impl_adapter import make_impl, to_plain
from kvpool.impl.backend import TorchOps
from kvpool.impl.freelist import PageRing, PageStack
from kvpool.impl.numpy_ops import NumpyOps
from kvpool.impl.staging import Staging
from kvpool.spec import AllocatorModel

BACKENDS = [pytest.param(False, id="numpy"), pytest.param(True, id="torch")]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Run the test once per CPU backend (True: the torch one forced on CPU)."""
    if request.param:
        request.getfixturevalue("torch_ops")
    return bool(request.param)


def _ring(capacity: int, torch_backend: bool) -> PageRing:
    ops = TorchOps(1, "cpu") if torch_backend else NumpyOps(1, "cpu")
    ring = PageRing(capacity, "cpu", ops)
    ring.fill()
    return ring


@pytest.mark.parametrize("need_sort", [False, True])
def test_token_free_wraps_past_the_ring_end_FREE_5(backend: bool, need_sort: bool) -> None:
    """8 slots: alloc 4, free them, alloc 6, free those 6: the 6 land at the tail across the end
    of the ring ([4, 8) then [0, 2)), in release order; the spec model agrees."""
    alloc = make_impl(paged=False, size=8, page_size=1, need_sort=need_sort)
    model = AllocatorModel(size=8, page_size=1, need_sort=need_sort, paged=False)
    for step in (4, 6):
        got = alloc.alloc(step)
        assert got is not None
        slots = to_plain(got)
        assert slots == model.alloc(step)
        alloc.free(torch.tensor(slots))
        model.free(slots)
        alloc.check_invariants()
    assert to_plain(alloc.get_all_free_pages()) == model.get_all_free_pages()
    if not need_sort:
        assert to_plain(alloc.free_pages) == [3, 4, 5, 6, 7, 8, 1, 2]
    assert alloc.available_size() == 8
    assert to_plain(alloc.alloc(8)) == model.alloc(8)
    alloc.check_invariants()


def test_ring_push_split_keeps_order(backend: bool) -> None:
    """A push that wraps writes its first part at the end and the rest at the start."""
    ring = _ring(5, backend)
    ring.take(4)  # head 4, count 1: the live list is [5]
    ring.push(torch.tensor([11, 12, 13]))  # tail at 0: no wrap
    ring.take(2)  # head 1, count 2: [12, 13]
    ring.push(torch.tensor([21, 22, 23]))  # tail at 3: [3, 5) then [0, 1)
    assert ring.contents().tolist() == [12, 13, 21, 22, 23]
    assert ring.check_invariants() == []
    assert to_plain(torch.as_tensor(ring.take(5))) == [12, 13, 21, 22, 23]
    assert len(ring) == 0


@pytest.mark.parametrize(("head", "count", "healthy"), [
    (0, 0, True), (7, 8, True), (0, 8, True), (8, 0, False), (-1, 0, False), (0, 9, False),
    (0, -1, False),
])
def test_ring_check_invariants_reports_counters_CAP_3(head: int, count: int,
                                                      healthy: bool) -> None:
    """``0 <= head < capacity`` and ``0 <= count <= capacity``; otherwise a report naming them."""
    ring = _ring(8, False)
    ring.head, ring.count = head, count
    problems = ring.check_invariants()
    assert problems == [] if healthy else problems and "ring counters broken" in problems[0]


def test_ring_of_one_slot_check_invariants_CAP_3() -> None:
    """Capacity 1: the head must be 0."""
    ring = _ring(1, False)
    assert ring.check_invariants() == []
    ring.head = 1
    assert ring.check_invariants()


def test_new_staging_is_empty_and_healthy() -> None:
    """Nothing is staged in a new Staging, for either free list."""
    ops = NumpyOps(1, "cpu")
    for free_list in (PageStack(4, "cpu", ops), _ring(4, False)):
        staging = Staging(free_list, ops)
        assert len(staging) == 0 and staging.contents().tolist() == []
        assert staging.check_invariants() == []


def test_ring_check_invariants_reports_a_wrong_capacity() -> None:
    ring = _ring(8, False)
    ring.capacity = 9
    assert ring.check_invariants()


@pytest.mark.parametrize("torch_backend", [False, True])
def test_new_lists_are_empty_until_filled(torch_backend: bool) -> None:
    """A new stack or ring holds no page; ``fill`` makes every page free, ascending."""
    ops = TorchOps(1, "cpu") if torch_backend else NumpyOps(1, "cpu")
    for capacity in (0, 1, 5):
        for free_list in (PageStack(capacity, "cpu", ops), PageRing(capacity, "cpu", ops)):
            assert len(free_list) == 0 and free_list.contents().tolist() == []
            assert free_list.check_invariants() == []
            free_list.fill()
            assert free_list.contents().tolist() == list(range(1, capacity + 1))
            assert len(free_list) == capacity and free_list.check_invariants() == []


@pytest.mark.parametrize(("top", "healthy"), [(0, True), (8, True), (-1, False), (9, False)])
def test_stack_check_invariants_reports_counters_CAP_3(top: int, healthy: bool) -> None:
    """``0 <= top <= capacity == buffer size``."""
    stack = PageStack(8, "cpu", NumpyOps(4, "cpu"))
    stack.top = top
    problems = stack.check_invariants()
    assert problems == [] if healthy else problems and "stack counters broken" in problems[0]
    stack.top, stack.capacity = 0, 7
    assert stack.check_invariants()


@pytest.mark.parametrize("paged", [False, True])
def test_staging_check_invariants_reports_counters_CAP_3(paged: bool) -> None:
    """Staged pages fit beside the free list: ``0 <= count <= capacity - len(free)``; on the
    stack they lie below its front (``0 <= base``, ``base + count <= top``), on the ring right
    after its tail."""
    ps = 4 if paged else 1
    alloc = make_impl(paged=paged, size=8 * ps, page_size=ps, need_sort=True)
    got = alloc.alloc(5 * ps)
    assert got is not None
    alloc.free(got[: 2 * ps])
    staged: Any = alloc._staged
    assert len(staged) == 2 and staged.check_invariants() == []
    if paged:  # the first release after a merge lies just below the front: [top - 2, top)
        assert (staged.base, alloc._free.top) == (3, 5)
    cases = [(0, 0, True), (5, 0, True), (6, 0, False), (-1, 0, False)]
    if paged:
        cases += [(2, 3, True), (3, 3, False), (2, -1, False)]
    else:
        cases += [(2, staged.base + 1, False)]
    for count, base, healthy in cases:
        staged.count, staged.base = count, base
        problems = staged.check_invariants()
        assert problems == [] if healthy else problems and "staging" in problems[0]


@pytest.mark.parametrize("paged", [False, True])
def test_allocator_check_invariants_fails_on_broken_counters(paged: bool) -> None:
    """The allocator's own check includes the buffers' counter checks."""
    alloc = make_impl(paged=paged, size=32, page_size=4 if paged else 1, need_sort=False)
    alloc.check_invariants()
    buffers: Any = alloc._free
    if isinstance(buffers, PageStack):
        buffers.top = -1
    else:
        buffers.head = buffers.capacity
    with pytest.raises(AssertionError, match="counters broken"):
        alloc.check_invariants()


def _taken_pair(paged: bool, num_pages: int, need_sort: bool,
                taken_pages: int) -> tuple[Any, AllocatorModel, list[int]]:
    """An allocator and the spec model of ``num_pages`` pages that both handed out their first
    ``taken_pages`` pages (the same slots, checked), and those slots."""
    ps = 4 if paged else 1
    alloc = make_impl(paged=paged, size=num_pages * ps, page_size=ps, need_sort=need_sort)
    model = AllocatorModel(size=num_pages * ps, page_size=ps, need_sort=need_sort, paged=paged)
    got = alloc.alloc(taken_pages * ps)
    assert got is not None
    slots = to_plain(got)
    assert slots == model.alloc(taken_pages * ps)
    return alloc, model, slots


@pytest.mark.parametrize("paged", [False, True])
def test_need_sort_switched_on_after_clear_stages_SORT_1(backend: bool, paged: bool) -> None:
    """``need_sort`` set after construction: frees are staged (counted, listed after the free
    list), and an allocation that runs short merges them sorted, as the spec model does."""
    ps = 4 if paged else 1
    alloc, model, _ = _taken_pair(paged, 8, False, 0)
    alloc.need_sort = model.need_sort = True
    got = alloc.alloc(6 * ps)
    assert got is not None
    slots = to_plain(got)
    assert slots == model.alloc(6 * ps)
    released = slots[3 * ps :] + slots[: 3 * ps]  # out of order: the merge must sort
    alloc.free(torch.tensor(released))
    model.free(released)
    alloc.check_invariants()
    assert alloc.available_size() == 8 * ps == model.available_size()
    assert to_plain(alloc.get_all_free_pages()) == model.get_all_free_pages()
    assert to_plain(alloc.free_pages) == [7, 8]  # the free list itself is untouched
    assert to_plain(alloc.alloc(5 * ps)) == model.alloc(5 * ps)
    alloc.check_invariants()
    assert to_plain(alloc.get_all_free_pages()) == model.get_all_free_pages()


@pytest.mark.parametrize("paged", [False, True])
def test_need_sort_switched_on_after_unsorted_frees_merges_everything_SORT_3(
        backend: bool, paged: bool) -> None:
    """Frees without ``need_sort`` leave the free list out of order; after ``need_sort`` is
    switched on, the merge of the staged pages still gives ``sort(free ∪ staged)`` (the list
    is no longer known sorted, so every page may move), as the spec model does."""
    ps = 4 if paged else 1
    alloc, model, slots = _taken_pair(paged, 10, False, 8)
    for part in (slots[: 2 * ps], slots[4 * ps : 6 * ps]):  # pushed: the list is out of order
        alloc.free(torch.tensor(part))
        model.free(part)
    alloc.need_sort = model.need_sort = True
    for part in (slots[6 * ps :], slots[2 * ps : 3 * ps]):  # staged (segment frees)
        alloc.free_segment(torch.tensor(part), start_pos=0)
        model.free_segment(part, start_pos=0)
    assert to_plain(alloc.get_all_free_pages()) == model.get_all_free_pages()
    assert to_plain(alloc.alloc(7 * ps)) == model.alloc(7 * ps)  # short: merges first
    alloc.check_invariants()
    assert to_plain(alloc.get_all_free_pages()) == model.get_all_free_pages()


@pytest.mark.parametrize("paged", [False, True])
def test_need_sort_switched_off_while_pages_are_staged_SORT_1(backend: bool, paged: bool) -> None:
    """Frees after ``need_sort`` goes off reach the free list; the pages staged before stay
    staged (listed after the free list) until a short allocation merges them."""
    ps = 4 if paged else 1
    alloc, model, slots = _taken_pair(paged, 8, True, 7)
    alloc.free(torch.tensor(slots[4 * ps :]))
    model.free(slots[4 * ps :])
    alloc.need_sort = model.need_sort = False
    for part in (slots[:ps], slots[ps : 2 * ps]):  # one page, then another
        alloc.free(torch.tensor(part))
        model.free(part)
        assert to_plain(alloc.get_all_free_pages()) == model.get_all_free_pages()
    alloc.check_invariants()
    assert to_plain(alloc.get_all_free_pages()) == model.get_all_free_pages()
    assert alloc.available_size() == model.available_size() == 6 * ps
    assert to_plain(alloc.alloc(6 * ps)) == model.alloc(6 * ps)
    alloc.check_invariants()
    assert to_plain(alloc.get_all_free_pages()) == model.get_all_free_pages()


def _same_as_model(alloc: Any, model: AllocatorModel, calls: list[tuple[str, Any]]) -> None:
    """Perform ``calls`` (``("alloc", n)``, ``("free", slots)``, ``("need_sort", flag)``) on
    both, comparing results, the free + staged pages and the invariants after each."""
    for name, arg in calls:
        if name == "alloc":
            assert to_plain(alloc.alloc(arg)) == model.alloc(arg)
        elif name == "free":
            alloc.free(torch.tensor(arg))
            model.free(arg)
        else:
            alloc.need_sort = model.need_sort = arg
        alloc.check_invariants()
        assert to_plain(alloc.get_all_free_pages()) == model.get_all_free_pages()
        assert alloc.available_size() == model.available_size()


def test_token_staged_pages_wrap_past_the_ring_end_SORT_1(backend: bool) -> None:
    """Staged slots sit behind the ring's tail; with the tail moved to 5 by unsorted frees, five
    staged slots run over the end of the ring ([5, 8) then [0, 2)) and merge sorted."""
    alloc = make_impl(paged=False, size=8, page_size=1, need_sort=False)
    model = AllocatorModel(size=8, page_size=1, need_sort=False, paged=False)
    _same_as_model(alloc, model, [
        ("alloc", 6),  # slots 1..6; the ring holds [7, 8]
        ("free", [1, 2, 3, 4, 5]),  # pushed at the tail: [0, 5)
        ("alloc", 7),  # [7, 8, 1, 2, 3, 4, 5]; the ring is empty, its tail at 5
        ("need_sort", True),
        ("free", [7, 8, 1, 2, 3]),  # staged at [5, 8) and [0, 2)
        ("free", [6]),
        ("alloc", 4),  # merges the wrapped staged slots, sorted
        ("free", [4, 5]),
        ("alloc", 4),
    ])


def test_one_slot_token_ring_merges_into_its_empty_list_SORT_3(backend: bool) -> None:
    """A ring of capacity 1: the staged slot merges into an empty free list, so the new front
    goes just before the head, which wraps to 0 again (the head stays in range)."""
    alloc = make_impl(paged=False, size=1, page_size=1, need_sort=True)
    model = AllocatorModel(size=1, page_size=1, need_sort=True, paged=False)
    _same_as_model(alloc, model, [("alloc", 1), ("free", [1])])
    alloc.merge_and_sort_free()
    model.merge_and_sort_free()
    alloc.check_invariants()
    assert to_plain(alloc.get_all_free_pages()) == model.get_all_free_pages() == [1]
    _same_as_model(alloc, model, [("alloc", 1), ("free", [1]), ("alloc", 1)])


@pytest.mark.parametrize("paged", [False, True])
def test_one_staged_page_survives_a_push_after_need_sort_goes_off_SORT_1(backend: bool,
                                                                        paged: bool) -> None:
    """A single staged page sits where the ring's next push writes: it is moved behind it."""
    ps = 4 if paged else 1
    alloc = make_impl(paged=paged, size=8 * ps, page_size=ps, need_sort=True)
    model = AllocatorModel(size=8 * ps, page_size=ps, need_sort=True, paged=paged)
    _same_as_model(alloc, model, [
        ("alloc", 7 * ps), ("free", list(range(5 * ps, 6 * ps))), ("need_sort", False),
        ("free", list(range(ps, 2 * ps))), ("alloc", 3 * ps)])


def test_compact_moves_only_a_stacks_staged_pages(backend: bool) -> None:
    """``Staging.compact``: a stack's staged pages move to ``buf[0, count)`` in release order;
    the ring's (which must stay right after its tail) and a stack's already at 0 stay put."""
    ops = TorchOps(1, "cpu") if backend else NumpyOps(1, "cpu")
    stack = PageStack(10, "cpu", ops)
    stack.fill()
    stack.take(6)
    staged = Staging(stack, ops)
    staged.append(torch.tensor([5, 2, 4]), ascending=False)  # just below the front: [3, 6)
    assert (staged.base, to_plain(staged.contents())) == (3, [5, 2, 4])
    staged.compact()
    assert (staged.base, to_plain(staged.contents())) == (0, [5, 2, 4])
    assert staged.check_invariants() == [] and to_plain(stack.contents()) == [7, 8, 9, 10]
    ring = _ring(8, backend)
    ring.take(5)
    ring.push(torch.tensor([2, 1]))  # the tail moves to 2
    on_ring = Staging(ring, ops)
    on_ring.append(torch.tensor([4, 3]), ascending=False)  # right after the tail: [2, 4)
    ring.take(2)  # the tail stays; the staged pages still follow it
    before = to_plain(ring.buf)
    on_ring.compact()
    assert to_plain(ring.buf) == before and on_ring.base == ring.tail() == 2
    assert to_plain(on_ring.contents()) == [4, 3] and on_ring.check_invariants() == []
