"""ALIAS-1: tensors returned by the allocators belong to the caller; no later call mutates them.
GROUP-3: a deferred free keeps a copy, so the caller may reuse its tensor at once."""

from __future__ import annotations

import pytest
import torch
from kvpool.impl import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator


def _t(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


@pytest.mark.parametrize("need_sort", [False, True])
@pytest.mark.parametrize("ps", [1, 4])
def test_paged_results_survive_later_calls(ps: int, need_sort: bool) -> None:
    alloc = PagedTokenToKVPoolAllocator(8 * ps, ps, torch.float16, "cpu", None, need_sort)
    a = alloc.alloc(2 * ps)
    ext = alloc.alloc_extend(_t([0]), _t([0]), _t([ps + 1]), _t([ps + 1]), _t([-1]), ps + 1)
    assert a is not None and ext is not None
    dec = alloc.alloc_decode(_t([ps + 2]), _t([ps + 2]), ext[-1:].clone())
    assert dec is not None
    everything = alloc.get_all_free_pages()
    kept = [t.clone() for t in (a, ext, dec, everything)]
    alloc.free(a)              # the freed pages go back to the buffer ...
    alloc.free_segments([(ext, 0)])
    b = alloc.alloc(alloc.available_size())  # ... and are handed out again
    assert b is not None
    alloc.free(b)
    alloc.merge_and_sort_free()
    alloc.clear()
    for original, copy in zip((a, ext, dec, everything), kept):
        assert torch.equal(original, copy)


@pytest.mark.parametrize("need_sort", [False, True])
def test_token_results_survive_later_calls(need_sort: bool) -> None:
    alloc = TokenToKVPoolAllocator(8, torch.float16, "cpu", None, need_sort)
    a = alloc.alloc(5)
    assert a is not None
    kept = a.clone()
    alloc.free(a[1:3])
    alloc.free(a[:1])
    b = alloc.alloc(alloc.available_size())  # wraps around the ring, reuses a's slots
    assert b is not None
    alloc.free(b)
    assert torch.equal(a, kept)


@pytest.mark.parametrize("paged", [False, True])
def test_deferred_free_copies_its_input(paged: bool) -> None:
    """GROUP-3: mutating the tensor after a deferred free does not change what is released."""
    alloc = (PagedTokenToKVPoolAllocator(16, 2, torch.float16, "cpu", None, False) if paged
             else TokenToKVPoolAllocator(8, torch.float16, "cpu", None, False))
    a = alloc.alloc(4)
    assert a is not None
    expected = a.clone()
    alloc.free_group_begin()
    alloc.free(a)
    a.fill_(0)  # the caller reuses its buffer
    alloc.free_group_end()
    free = alloc.get_all_free_pages().tolist()
    released = sorted({s // alloc.page_size for s in expected.tolist()})
    assert free[:len(released)] == released if paged else free[-len(released):] == released
    alloc.check_invariants()
