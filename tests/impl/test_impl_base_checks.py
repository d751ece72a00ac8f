"""The shared allocator base: a page size below 1 is refused at construction, and its
self-check names a group closed while segment pages are still deferred (``GROUP-2``)."""

from __future__ import annotations

import pytest
import torch
from impl_adapter import make_impl
from kvpool.impl import PagedTokenToKVPoolAllocator


@pytest.mark.parametrize("page_size", [0, -4])
def test_page_size_below_one_is_refused(page_size: int) -> None:
    with pytest.raises(ValueError, match=f"page_size must be >= 1, got {page_size}"):
        PagedTokenToKVPoolAllocator(64, page_size, torch.float16, "cpu", None, False)


@pytest.mark.parametrize("ps", [1, 4])
def test_check_invariants_names_segment_pages_deferred_with_the_group_closed_GROUP_2(
        ps: int) -> None:
    """Paged allocators (page size 1 included) keep a group's segment pages apart."""
    alloc = make_impl(paged=True, size=16 * ps, page_size=ps, need_sort=False)
    row = alloc.alloc(4 * ps)
    assert row is not None
    alloc.free_group_begin()
    alloc.free_segment(row[: 2 * ps], start_pos=0)          # deferred until the group ends
    alloc.check_invariants()
    alloc.free_group = None                                 # closed without releasing them
    with pytest.raises(AssertionError, match="GROUP-2: deferred segment pages"):
        alloc.check_invariants()
