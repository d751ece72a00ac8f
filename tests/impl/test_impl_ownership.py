"""The ownership guard on the unchecked path (``kvpool.impl.ownership``): every caller error it
covers raises ContractViolation naming its clause, on both CPU backends, with the allocator
unchanged; valid calls are untouched, and the bits agree with the free lists."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from kvpool.impl import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator
from kvpool.spec import ContractViolation


def _t(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def _state(alloc: Any) -> tuple[Any, ...]:
    """What a refused call must leave as it was: the lists, the counters and the bits."""
    owners = alloc._owners
    return (alloc.free_pages.tolist(), alloc.release_pages.tolist(), alloc.available_size(),
            alloc.deferred_pages(), None if owners is None else owners.handed_out())


@pytest.fixture(params=["native", "numpy"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Allocators built in the test use this CPU backend (``KVPOOL_NATIVE``)."""
    if request.param == "native":
        from kvpool.impl.native_ops import native_available
        if not native_available():
            pytest.skip("the compiled extension is not built")
    monkeypatch.setenv("KVPOOL_NATIVE", "1" if request.param == "native" else "0")
    return str(request.param)


def _paged(need_sort: bool, guard: bool = True) -> PagedTokenToKVPoolAllocator:
    alloc = PagedTokenToKVPoolAllocator(64, 4, torch.float16, "cpu", None, need_sort,
                                        guard=guard)
    assert alloc.alloc(16) is not None  # pages 1..4 handed out: slots 4..19
    return alloc


def _refused(alloc: Any, clause: str, call: Callable[[], Any], healthy: bool = True) -> None:
    """``call`` raises ``clause`` and changes nothing (``healthy``: the census holds after)."""
    before = _state(alloc)
    with pytest.raises(ContractViolation, match=clause) as info:
        call()
    assert info.value.clause == clause
    assert _state(alloc) == before
    if healthy:
        alloc.check_invariants()


BAD_PAGED_FREES = [
    ("out of range", [64 * 4 + 4], "FREE-1"),
    ("negative", [-4], "FREE-1"),
    ("page 0", [1], "FREE-2"),
    ("free page", [40], "FREE-3"),
    ("good then free page", [4, 5, 40], "FREE-3"),
]


@pytest.mark.parametrize("need_sort", [False, True])
@pytest.mark.parametrize(("name", "slots", "clause"), BAD_PAGED_FREES)
def test_paged_free_refuses_bad_ids(backend: str, need_sort: bool, name: str,
                                    slots: list[int], clause: str) -> None:
    alloc = _paged(need_sort)
    _refused(alloc, clause, lambda: alloc.free(_t(slots)))
    alloc.free(_t([4, 5, 6, 7]))  # a valid free still goes through
    _refused(alloc, "FREE-3", lambda: alloc.free(_t([4])))  # and a second one is refused


@pytest.mark.parametrize("need_sort", [False, True])
def test_token_free_refuses_a_slot_named_twice(backend: str, need_sort: bool) -> None:
    alloc = TokenToKVPoolAllocator(16, torch.float16, "cpu", None, need_sort)
    row = alloc.alloc(4)
    assert row is not None
    _refused(alloc, "FREE-3", lambda: alloc.free(torch.cat((row[:2], row[:1]))))
    _refused(alloc, "FREE-2", lambda: alloc.free(_t([0])))
    alloc.free(row)
    alloc.check_invariants()


def test_free_page_ids_and_segments_refuse_double_frees(backend: str) -> None:
    alloc = _paged(False)
    _refused(alloc, "FREE-3", lambda: alloc.free_page_ids(_t([2, 2])))
    _refused(alloc, "FREE-3", lambda: alloc.free_page_ids(_t([2, 9])))
    # a start_pos that does not match the row: its representatives name page 1 twice
    _refused(alloc, "FREE-3", lambda: alloc.free_segments([(_t([4, 5, 6, 7, 8]), 2)]))


def test_group_end_refuses_a_page_freed_twice_and_stays_open(backend: str) -> None:
    alloc = _paged(False)
    alloc.free_group_begin()
    alloc.free(_t([4, 5]))                       # page 1
    alloc.free_segment(_t([4, 5, 6, 7]), start_pos=0)  # page 1 again (GROUP-6)
    # the census flags the open group's double-named page: the group is left as it was
    _refused(alloc, "FREE-3", alloc.free_group_end, healthy=False)
    assert alloc.free_group is not None


def test_last_loc_on_a_page_not_handed_out_is_refused(backend: str) -> None:
    alloc = _paged(True)
    lens = (_t([3]), _t([3]), _t([6]), _t([6]))
    _refused(alloc, "EXTEND-3", lambda: alloc.alloc_extend(*lens, _t([30]), 3))
    _refused(alloc, "EXTEND-3", lambda: alloc.alloc_extend(*lens, _t([-1]), 3))
    _refused(alloc, "DECODE-3", lambda: alloc.alloc_decode(_t([4]), _t([4]), _t([42])))
    out = alloc.alloc_extend(*lens, _t([6]), 3)  # slot 6 lies on page 1, handed out
    assert out is not None and out.tolist() == [7, 20, 21]


def test_cpu_lengths_that_disagree_are_refused(backend: str) -> None:
    alloc = _paged(False)
    _refused(alloc, "EXTEND-1", lambda: alloc.alloc_extend(
        _t([0]), _t([4]), _t([8]), _t([8]), _t([-1]), 8))
    _refused(alloc, "DECODE-1", lambda: alloc.alloc_decode(_t([5]), _t([6]), _t([7])))


def test_without_the_guard_nothing_is_checked(backend: str) -> None:
    """``guard=False`` keeps SGLang's behaviour (the census reports the damage later): the
    guard is what refuses above."""
    alloc = _paged(False, guard=False)
    alloc.free(_t([40]))
    assert alloc.verify_byte_accounting()  # page 10 listed free twice


def test_bits_that_disagree_with_the_lists_fail_check_invariants(backend: str) -> None:
    alloc = _paged(False)
    alloc.check_invariants()
    alloc._owners.mark_free(torch.tensor([2]).numpy())  # page 2 handed out, its bit lost
    with pytest.raises(AssertionError, match="ownership bits disagree"):
        alloc.check_invariants()


@pytest.mark.parametrize("need_sort", [False, True])
@pytest.mark.parametrize("page_size", [1, 4])
def test_bits_follow_random_traffic(backend: str, need_sort: bool, page_size: int) -> None:
    """Allocations of many pages (the compiled take marks a run by its ends when the list is
    known sorted, by its values when not), frees of rows in any order and merges:
    after every call the bits are exactly the pages handed out (check_invariants)."""
    import random

    rng = random.Random(page_size * 2 + need_sort)
    alloc = PagedTokenToKVPoolAllocator(4096 * page_size, page_size, torch.float16, "cpu",
                                        None, need_sort)
    rows: list[torch.Tensor] = []
    for _ in range(120):
        if rows and rng.random() < 0.45:
            row = rows.pop(rng.randrange(len(rows)))
            if rng.random() < 0.5:
                alloc.free(row)
            else:  # only the row's first page's slots: its other pages stay handed out
                alloc.free(row[:page_size])
                rest = row[page_size:]
                if rest.numel():
                    rows.append(rest)
        else:
            num_pages = rng.choice([1, 3, 63, 64, 65, 130, 300])
            prefix = 0
            out = alloc.alloc_extend(_t([prefix]), _t([prefix]), _t([num_pages * page_size]),
                                     _t([num_pages * page_size]), _t([-1]),
                                     num_pages * page_size)
            if out is not None:
                rows.append(out)
        alloc.check_invariants()
    for row in rows:
        alloc.free(row)
    alloc.check_invariants()
    assert alloc.available_size() == 4096 * page_size


@pytest.mark.parametrize("need_sort", [False, True])
def test_token_bits_follow_random_traffic(backend: str, need_sort: bool) -> None:
    """The token ring hands slots out in free order (long runs, short ones and single slots):
    after every alloc and free the bits are exactly the slots handed out."""
    import random

    rng = random.Random(7 + need_sort)
    alloc = TokenToKVPoolAllocator(3000, torch.float16, "cpu", None, need_sort)
    rows: list[torch.Tensor] = []
    for _ in range(150):
        if rows and rng.random() < 0.5:
            row = rows.pop(rng.randrange(len(rows)))
            keep = rng.randrange(row.numel())  # the tail now, the head later (pieces)
            alloc.free(row[keep:])
            if keep:
                rows.append(row[:keep])
        else:
            out = alloc.alloc(rng.choice([1, 7, 8, 9, 63, 64, 65, 200]))
            if out is not None:
                rows.append(out)
        alloc.check_invariants()
