"""``merge_and_sort_free`` (``SORT-2/3``): SGLang's ``sort(free ∪ staged)``, without sorting the
whole free list when it is known to be sorted.

Random call sequences on the token ring and the paged stack, with ``need_sort`` switched on and
off between calls (so the free list is sometimes unsorted when a merge runs, and the ring's new
front sometimes wraps around the buffer's end), compare every merge with the reference
``sorted(free + staged)``. The CPU merge's cost bound is checked on what it moves.
ci profile: about 3 s.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from host_backends import HOST_OPS
from hypothesis import given
from hypothesis import strategies as st
from kvpool.impl import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator

CALLS = st.lists(st.tuples(st.sampled_from(["alloc", "free", "toggle", "merge"]),
                           st.integers(1, 9)), min_size=1, max_size=60)


def _make(kind: str, num_pages: int) -> Any:
    if kind == "token":
        return TokenToKVPoolAllocator(num_pages, torch.float16, "cpu", None, True)
    return PagedTokenToKVPoolAllocator(num_pages * 4, 4, torch.float16, "cpu", None, True)


@given(kind=st.sampled_from(["token", "paged"]), calls=CALLS, seed=st.integers(0, 99))
def test_merge_is_sorted_union_SORT_3(kind: str, calls: list[tuple[str, int]],
                                      seed: int) -> None:
    """Every merge leaves exactly ``sorted(free + staged)`` and nothing staged."""
    rng = np.random.default_rng(seed)
    alloc = _make(kind, 24)
    ps = alloc.page_size
    held: list[torch.Tensor] = []
    for call, k in calls:
        if call == "alloc":
            out = alloc.alloc(k * ps)
            if out is not None:
                held.append(out)
        elif call == "free" and held:
            alloc.free(held.pop(int(rng.integers(len(held)))))
        elif call == "toggle":
            alloc.need_sort = not alloc.need_sort
        elif call == "merge":
            free, both = alloc.free_pages.tolist(), alloc.get_all_free_pages().tolist()
            want = sorted(both) if len(both) > len(free) else free  # nothing staged: no-op
            alloc.merge_and_sort_free()
            assert alloc.free_pages.tolist() == want
            assert alloc.available_size() == len(want) * ps
        alloc.check_invariants()


def test_cpu_merge_moves_only_pages_below_the_largest_staged() -> None:
    """A sorted free list: the pages above every staged page stay where they are."""
    for host in HOST_OPS:  # backend form: numpy arrays
        ops = host(1, "cpu")
        free = np.arange(100, 200, dtype=np.int64)
        staged = np.array([150, 3, 120, 7], dtype=np.int64)
        moved, merged = ops.merge_sorted(free, staged, front_sorted=True)
        assert moved == 50  # 100..149
        assert merged.tolist() == sorted([*range(100, 150), 150, 3, 120, 7])
        moved, merged = ops.merge_sorted(free[::-1].copy(), staged, front_sorted=False)
        assert moved == 100 and merged.tolist() == sorted([*range(100, 200), 150, 3, 120, 7])


def test_sorted_free_list_flag_follows_pushes() -> None:
    """A free without staging makes the list unsorted for the next merge; a merge sorts it."""
    alloc = TokenToKVPoolAllocator(16, torch.float16, "cpu", None, False)
    row = alloc.alloc(16)
    assert row is not None
    alloc.free(row[8:11])
    alloc.free(row[0:1])  # free list 9, 10, 11, 1: unsorted
    alloc.need_sort = True
    alloc.free(row[4:5])  # staged: 5
    alloc.merge_and_sort_free()
    assert alloc.free_pages.tolist() == [1, 5, 9, 10, 11]
    alloc.free(row[2:3])
    alloc.merge_and_sort_free()  # sorted again: the fast path
    assert alloc.free_pages.tolist() == [1, 3, 5, 9, 10, 11]
