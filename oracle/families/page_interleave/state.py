"""What a page-interleave allocator shows, as plain values: its class lists, counts and
capacity views (:func:`state_of`, compared with the spec and between mirrored ranks), and the
class map a failure report draws (:func:`class_map`)."""

from __future__ import annotations

from typing import Any

State = tuple[list[list[int]], list[list[int]], list[int], int, int, int, list[int]]


def state_of(x: Any) -> State:
    """``(class free lists, class release lists, class_free_page_counts(), available_size(),
    aggregate_free_size(), least_full_class(), get_all_free_pages())`` of allocator ``x``."""
    return ([[int(p) for p in f.tolist()] for f in x.class_free_pages],
            [[int(p) for p in r.tolist()] for r in x.class_release_pages],
            [int(c) for c in x.class_free_page_counts()], int(x.available_size()),
            int(x.aggregate_free_size()), int(x.least_full_class()),
            [int(p) for p in x.get_all_free_pages().tolist()])


def class_map(shard_size: int, pages_per_rank: int, free: list[list[int]],
              release: list[list[int]]) -> str:
    """One row per class (rank), one character per physical page ``1..P``: ``.`` free, ``r``
    on the release list, ``o`` held (or pending in a group), ``2``.. listed that many times."""
    rows = []
    for r in range(shard_size):
        listed = [*free[r], *release[r]] if r < len(free) else []
        chars = []
        for local in range(1, pages_per_rank + 1):
            page = local * shard_size + r
            times = listed.count(page)
            chars.append("o" if not times else str(min(times, 9)) if times > 1 else
                         "r" if page in release[r] else ".")
        rows.append(f"rank {r}: {''.join(chars)}")
    return " | ".join(rows)
