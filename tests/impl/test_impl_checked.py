"""Checked mode: each class of caller error raises ContractViolation naming its clause and leaves
the allocator unchanged (``ERR-1``); unchecked mode still refuses to overrun its buffers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from impl_adapter import Allocator, call_impl, free_list, make_impl
from kvpool.spec import ContractViolation, ResizeConfig


def _state(alloc: Allocator) -> tuple[object, ...]:
    return (free_list(alloc), alloc.free_pages.tolist(), alloc.available_size(),
            alloc.debug_print(), alloc.size, alloc.num_pages)


def _paged(need_sort: bool = False) -> Allocator:
    """ps 4, 8 pages; owns pages 1-3 (slots 4..15), then page 1 is freed again."""
    alloc = make_impl(paged=True, size=32, page_size=4, need_sort=need_sort, checked=True)
    call_impl(alloc, "alloc", (12,))
    call_impl(alloc, "free", ([4, 5],))
    return alloc


def _token(need_sort: bool = False) -> Allocator:
    """8 slots; owns 1..4, then slot 1 is freed again."""
    alloc = make_impl(paged=False, size=8, page_size=1, need_sort=need_sort, checked=True)
    call_impl(alloc, "alloc", (4,))
    call_impl(alloc, "free", ([1],))
    return alloc


def _in_group(make: Callable[[], Allocator], first: list[int]) -> Callable[[], Allocator]:
    def build() -> Allocator:
        alloc = make()
        alloc.free_group_begin()
        call_impl(alloc, "free", (first,))
        return alloc
    return build


def _page_ids_in_group(make: Callable[[], Allocator], page_ids: list[int],
                       ) -> Callable[[], Allocator]:
    def build() -> Allocator:
        alloc = make()
        alloc.free_group_begin()
        call_impl(alloc, "free_page_ids", (page_ids,))
        return alloc
    return build


def _ext(pre: list[int], seq: list[int], loc: list[int], extend: int | None = None,
         ) -> tuple[str, tuple[Any, ...]]:
    return "alloc_extend", (pre, seq, loc, extend)


ERRORS: list[tuple[str, Callable[[], Allocator], str, tuple[Any, ...]]] = [
    ("ALLOC-1", _paged, "alloc", (3,)),
    ("ALLOC-2", _paged, "alloc", (-4,)),
    ("ALLOC-2", _token, "alloc", (-1,)),
    ("FREE-1", _paged, "free", ([40],)),
    ("FREE-1", _token, "free", ([9],)),
    ("FREE-2", _paged, "free", ([2],)),
    ("FREE-2", _token, "free", ([0],)),
    ("FREE-3", _paged, "free", ([4],)),                    # page 1 already free
    ("FREE-3", _paged, "free", ([20],)),                   # page 5 never handed out
    ("FREE-3", lambda: _paged(True), "free", ([4],)),      # page 1 staged
    ("FREE-3", _token, "free", ([1],)),
    ("FREE-3", _token, "free", ([2, 2],)),
    ("FREE-3", lambda: _token(True), "free", ([1],)),
    ("FREE-3", _in_group(_token, [2]), "free", ([2],)),    # token: deferred twice
    ("FREE-3", _in_group(_paged, [8]), "free_segment", ([8, 9, 10, 11], 4)),
    ("GROUP-1", _in_group(_paged, [8]), "free_group_begin", ()),
    ("FREE-1", _paged, "free_page_ids", ([9],)),          # past the 8 pages
    ("FREE-2", _paged, "free_page_ids", ([0],)),
    ("FREE-3", _paged, "free_page_ids", ([1],)),          # page 1 already free
    ("FREE-3", _paged, "free_page_ids", ([2, 2],)),       # named twice: no dedup (FREE-8)
    ("FREE-3", _page_ids_in_group(_paged, [2]), "free", ([8],)),  # deferred as a segment page
    ("SEG-1", _paged, "free_segments", ([([8, 9], 1)],)),  # slot 8 is not at offset 1
    ("SEG-1", _paged, "free_segments", ([([8], 0), ([12], 4), ([9], 8)],)),
    ("SEG-4", _paged, "free_segments", ([([8, 9, 10, 11], 4), ([12], 2)],)),
    ("SEG-1", _token, "free_segments", ([([2], -1)],)),
    ("EXTEND-1", _paged, *_ext([0, 0], [4], [-1, -1])),
    ("EXTEND-1", _paged, *_ext([0], [4], [-1], 5)),
    ("EXTEND-2", _paged, *_ext([5], [4], [8])),
    ("EXTEND-3", _paged, *_ext([2], [6], [-1])),           # -1 with a prefix
    ("EXTEND-3", _paged, *_ext([2], [6], [8])),            # (8 + 1) % 4 != 2
    ("EXTEND-3", _paged, *_ext([2], [6], [21])),           # page 5 not owned
    ("EXTEND-8", _paged, *_ext([2, 2], [3, 3], [9, 9])),   # both continue page 2
    ("DECODE-1", _paged, "alloc_decode", ([3, 3], [9])),
    ("DECODE-2", _paged, "alloc_decode", ([0], [-1])),
    ("DECODE-3", _paged, "alloc_decode", ([3], [8])),
    ("DECODE-8", _paged, "alloc_decode", ([3, 3], [9, 9])),
]


@pytest.mark.parametrize(("clause", "make", "name", "args"), ERRORS,
                         ids=[f"{e[0]}-{e[2]}-{i}" for i, e in enumerate(ERRORS)])
def test_checked_error_raises_clause_and_changes_nothing(
        clause: str, make: Callable[[], Allocator], name: str, args: tuple[Any, ...]) -> None:
    """ERR-1: the clause is named, every observable part of the state is unchanged."""
    alloc = make()
    before = _state(alloc)
    with pytest.raises(ContractViolation) as err:
        call_impl(alloc, name, args)
    assert err.value.clause == clause, err.value
    assert _state(alloc) == before
    alloc.check_invariants()


def test_checked_host_copies_must_match() -> None:
    """EXTEND-1 / DECODE-1: the ``*_cpu`` lengths must equal the device lengths."""
    alloc = _paged()
    before = _state(alloc)
    t = torch.tensor
    with pytest.raises(ContractViolation, match="EXTEND-1"):
        alloc.alloc_extend(t([0]), t([0]), t([4]), t([8]), t([-1]), 4)
    with pytest.raises(ContractViolation, match="DECODE-1"):
        alloc.alloc_decode(t([3]), t([4]), t([9]))
    with pytest.raises(ContractViolation, match="EXTEND-4"):
        alloc.alloc_extend(t([0]), t([0]), t([4]), t([4]), t([-1]), 4, num_new_pages=2)
    with pytest.raises(ContractViolation, match="LIFE-2"):
        alloc.resize(ResizeConfig(-1))
    assert _state(alloc) == before


@pytest.mark.parametrize("need_sort", [False, True])
@pytest.mark.parametrize("paged", [False, True])
def test_unchecked_double_free_is_refused_by_the_guard(paged: bool, need_sort: bool) -> None:
    """Unchecked mode trades validation for speed, not its own invariants: the ownership guard
    refuses a second free of a page (FREE-3) before any change, also inside a group at its
    end."""
    ps = 2 if paged else 1
    alloc = make_impl(paged=paged, size=4 * ps, page_size=ps, need_sort=need_sort)
    first = call_impl(alloc, "alloc", (2 * ps,))[:ps]
    call_impl(alloc, "free", (first,))
    before = _state(alloc)
    with pytest.raises(ContractViolation, match="FREE-3"):
        call_impl(alloc, "free", (first,))
    assert _state(alloc) == before
    alloc.free_group_begin()
    call_impl(alloc, "free", (first,))  # deferred: checked when the group releases it
    with pytest.raises(ContractViolation, match="FREE-3"):
        alloc.free_group_end()
    assert alloc.free_group is not None  # the group stays open, nothing released
    assert _state(alloc)[:3] == before[:3] and alloc.deferred_pages() == [1]


def test_unchecked_nested_group_is_rejected() -> None:
    """GROUP-1 holds without checked mode too."""
    alloc = make_impl(paged=True, size=8, page_size=2, need_sort=False)
    alloc.free_group_begin()
    with pytest.raises(ContractViolation, match="GROUP-1"):
        alloc.free_group_begin()
    alloc.free_group_end()
    alloc.free_group_end()  # GROUP-2: idempotent
    assert alloc.free_group is None


def test_unchecked_negative_alloc_is_refused() -> None:
    """ALLOC-2 on a host int costs nothing, so unchecked mode refuses it too."""
    alloc = make_impl(paged=True, size=8, page_size=2, need_sort=False)
    with pytest.raises(ContractViolation, match="ALLOC-2"):
        alloc.alloc(-2)
    assert alloc.available_size() == 8
