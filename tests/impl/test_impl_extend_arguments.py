"""``alloc_extend``'s host arguments on both CPU backends: the ``num_new_pages`` hint
(``EXTEND-4``) and an ``extend_num_tokens`` outside int64's range (``EXTEND-1``).

A wrong hint (negative, zero, one page off, far too many) or an out-of-range token count raises
ContractViolation with the same clause on the numpy and the compiled backend, checked or not,
guard on or off, and a refused call leaves the allocator exactly as it was (free list, staged
pages, ``available_size()``, ``check_invariants()``). A right hint gives the same slots as no
hint. The compiled backend's cases skip where the extension is not built, and fail under
``KVPOOL_REQUIRE_NATIVE=1``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch
from kvpool.impl import PagedTokenToKVPoolAllocator, base
from kvpool.impl.native_ops import NativeOps, native_available
from kvpool.impl.numpy_ops import NumpyOps
from kvpool.spec.errors import ContractViolation

PAGE_SIZE = 4
NUM_PAGES = 32
# (checked, guard): the checked mode, the unchecked default, the unchecked mode without guard
MODES = [(True, True), (False, True), (False, False)]
MODE_IDS = ["checked", "unchecked", "unguarded"]


@pytest.fixture(params=["numpy", "native"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Allocators built under this fixture use the named CPU backend."""
    name: str = request.param
    if name == "native" and not native_available():
        if os.environ.get("KVPOOL_REQUIRE_NATIVE") == "1":
            pytest.fail("kvpool.impl._native is not built (KVPOOL_REQUIRE_NATIVE=1)")
        pytest.skip("kvpool.impl._native is not built")
    ops = NativeOps if name == "native" else NumpyOps

    def chosen(page_size: int, device: Any) -> NumpyOps:
        return ops(page_size, device)

    monkeypatch.setattr(base, "ops_for", chosen)
    return name


def _ints(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def _allocator(checked: bool, guard: bool, need_sort: bool) -> PagedTokenToKVPoolAllocator:
    """A paged allocator with two rows handed out (pages 1..3 and 4..5) and, with
    ``need_sort``, one page staged, so that a merge would show in its state."""
    alloc = PagedTokenToKVPoolAllocator(NUM_PAGES * PAGE_SIZE, PAGE_SIZE, torch.int64, "cpu",
                                        None, need_sort, checked=checked, guard=guard)
    rows = alloc.alloc_extend(_ints([0, 0]), _ints([0, 0]), _ints([10, 7]), _ints([10, 7]),
                              _ints([-1, -1]), 17)
    assert rows is not None
    spare = alloc.alloc(PAGE_SIZE)
    assert spare is not None
    alloc.free(spare)  # staged with need_sort, else back on the list
    return alloc


def _batch(alloc: PagedTokenToKVPoolAllocator) -> tuple[list[torch.Tensor], int, int]:
    """Both rows extended (prefix 10 and 7: partial last pages): the arguments before
    ``extend_num_tokens``, the token count and the batch's page count."""
    prefix, seq = [10, 7], [19, 8]
    last = [alloc.page_size * 3 + 1, alloc.page_size * 5 + 2]  # the rows' last slots
    args = [_ints(prefix), _ints(prefix), _ints(seq), _ints(seq), _ints(last)]
    num_pages = sum(-(-s // PAGE_SIZE) - -(-p // PAGE_SIZE) for p, s in zip(prefix, seq))
    return args, sum(seq) - sum(prefix), num_pages


def _state(alloc: PagedTokenToKVPoolAllocator) -> tuple[Any, ...]:
    """Everything a refused call must leave as it was; the allocator's own census holds."""
    alloc.check_invariants()
    return (alloc.available_size(), alloc.free_pages.tolist(), alloc.release_pages.tolist())


@pytest.mark.parametrize(("checked", "guard"), MODES, ids=MODE_IDS)
@pytest.mark.parametrize("need_sort", [False, True])
@pytest.mark.parametrize("wrong", [-1, 0, "-1", "+1", "+100"])
def test_a_wrong_page_hint_is_refused_with_nothing_changed(
        backend: str, checked: bool, guard: bool, need_sort: bool, wrong: int | str) -> None:
    """``num_new_pages`` other than the batch's page count: ContractViolation ``EXTEND-4``,
    nothing changed; the right count then gives the slots that no hint gives."""
    alloc = _allocator(checked, guard, need_sort)
    args, num_tokens, num_pages = _batch(alloc)
    hint = num_pages + int(wrong) if isinstance(wrong, str) else wrong
    assert hint != num_pages
    before = _state(alloc)
    with pytest.raises(ContractViolation) as raised:
        alloc.alloc_extend(*args, num_tokens, num_new_pages=hint)
    assert raised.value.clause == "EXTEND-4"
    assert _state(alloc) == before
    twin = _allocator(checked, guard, need_sort)
    want = twin.alloc_extend(*args, num_tokens)
    got = alloc.alloc_extend(*args, num_tokens, num_new_pages=num_pages)
    assert got is not None and want is not None and got.tolist() == want.tolist()
    assert _state(alloc) == _state(twin)


@pytest.mark.parametrize(("checked", "guard"), MODES, ids=MODE_IDS)
@pytest.mark.parametrize("num_tokens", [2**63, 2**64 + 19, 2**64, -1, -(2**63), -(2**64) + 10])
@pytest.mark.parametrize("hinted", [False, True])
def test_a_token_count_outside_int64_is_refused_alike(
        backend: str, checked: bool, guard: bool, num_tokens: int, hinted: bool) -> None:
    """``extend_num_tokens`` >= 2**63 or negative: ContractViolation ``EXTEND-1`` on both
    backends (never OverflowError), nothing changed."""
    alloc = _allocator(checked, guard, need_sort=True)
    args, _, num_pages = _batch(alloc)
    before = _state(alloc)
    with pytest.raises(ContractViolation) as raised:
        alloc.alloc_extend(*args, num_tokens, num_new_pages=num_pages if hinted else None)
    assert raised.value.clause == "EXTEND-1"
    assert _state(alloc) == before
