# ruff: noqa: E501  (contract lines are copied verbatim from the spec)
"""Deliberately wrong variants of ``kvpool.spec.unified_layout``, each with the real contract.

``test_formal_z3_unified.py`` runs ``crosshair check`` on each and expects a counterexample, and
checks that each variant's ``pre:``/``post:`` lines are the real function's, word for word.
"""

from __future__ import annotations

from kvpool.spec.unified_layout import MAX_CHECKED, allocated_pages, fits_pages

__all__ = ["MAX_CHECKED", "allocated_pages", "fits_pages"]  # names the copied contracts use
REAL = {
    "min_page_index_floor": "min_page_index",
    "reserved_floor_bytes_one_row": "reserved_floor_bytes",
    "frontier_bytes_down_off_by_a_page": "frontier_bytes",
    "gap_bytes_unclamped": "gap_bytes",
    "eager_joint_pages_one_side": "eager_joint_pages",
    "lazy_joint_pages_holes_twice": "lazy_joint_pages",
    "side_available_pages_holes_uncapped": "side_available_pages",
    "bands_ordered_ignores_floats": "bands_ordered",
    "band_pages_raw_span": "band_pages",
}


def min_page_index_floor(floor_bytes: int, entry_bytes: int, page_size: int) -> int:
    """Bug: floor for ceil: the first page may start inside the sink.

    pre: 0 <= floor_bytes <= MAX_CHECKED
    pre: 1 <= entry_bytes <= MAX_CHECKED
    pre: 1 <= page_size <= 64
    post: __return__ * page_size * entry_bytes >= floor_bytes
    post: __return__ == 0 or (__return__ - 1) * page_size * entry_bytes < floor_bytes
    """
    return floor_bytes // entry_bytes // page_size


def reserved_floor_bytes_one_row(max_paged_entry_bytes: int, max_state_entry_bytes: int,
                                      page_size: int) -> int:
    """Bug: one row of the widest entry, not a whole page: page 0 sticks out of the sink.

    pre: 1 <= max_paged_entry_bytes <= MAX_CHECKED
    pre: 0 <= max_state_entry_bytes <= MAX_CHECKED
    pre: 1 <= page_size <= 64
    post: __return__ >= page_size * max_paged_entry_bytes
    post: __return__ >= max_state_entry_bytes
    post: __return__ == page_size * max_paged_entry_bytes or __return__ == max_state_entry_bytes
    """
    return max(max_paged_entry_bytes, max_state_entry_bytes)


def frontier_bytes_down_off_by_a_page(grows_up: bool, watermark: int, min_page: int, pages: int,
                                       page_bytes: int) -> tuple[int, int]:
    """Bug: the grow-down pool's low frontier at the watermark page itself (off by a page).

    pre: 1 <= page_bytes <= 256
    pre: 0 <= min_page <= pages <= 256
    pre: (grows_up and min_page <= watermark <= pages) or (not grows_up and min_page - 1 <= watermark <= pages - 1)
    post: 0 <= __return__[0] <= __return__[1] <= pages * page_bytes
    post: __return__[1] - __return__[0] == allocated_pages(grows_up, watermark, min_page, pages) * page_bytes
    """
    if grows_up:
        return min_page * page_bytes, watermark * page_bytes
    return watermark * page_bytes, pages * page_bytes


def gap_bytes_unclamped(up_high: int, down_low: int) -> int:
    """Bug: no clamp at zero: crossed frontiers give a negative gap.

    pre: 0 <= up_high <= MAX_CHECKED * 16
    pre: 0 <= down_low <= MAX_CHECKED * 16
    post: __return__ >= 0
    post: __return__ >= down_low - up_high
    post: __return__ == 0 or __return__ == down_low - up_high
    """
    return down_low - up_high


def eager_joint_pages_one_side(gap: int, page_bytes_full: int, page_bytes_swa: int,
                               room_full: int, room_swa: int) -> int:
    """Bug: charges the gap only the full side's bytes (a sub-pool left out of the byte budget).

    pre: 0 <= gap <= 4096
    pre: 1 <= page_bytes_full <= 64 and 1 <= page_bytes_swa <= 64
    pre: 0 <= room_full <= 64 and 0 <= room_swa <= 64
    post: fits_pages(__return__, __return__, 0, 0, room_full, room_swa, gap, page_bytes_full, page_bytes_swa)
    post: not fits_pages(__return__ + 1, __return__ + 1, 0, 0, room_full, room_swa, gap, page_bytes_full, page_bytes_swa)
    """
    return min(gap // page_bytes_full, room_full, room_swa)


def lazy_joint_pages_holes_twice(gap: int, page_bytes_full: int, page_bytes_swa: int,
                                  holes_full: int, holes_swa: int, room_full: int,
                                  room_swa: int) -> int:
    """Bug: the drained holes counted twice (phase one added again at the end).

    pre: 0 <= gap <= 1024
    pre: 1 <= page_bytes_full <= 16 and 1 <= page_bytes_swa <= 16
    pre: 0 <= holes_full <= 16 and 0 <= holes_swa <= 16
    pre: 0 <= room_full <= 16 and 0 <= room_swa <= 16
    post: fits_pages(__return__, __return__, holes_full, holes_swa, room_full, room_swa, gap, page_bytes_full, page_bytes_swa)
    post: not fits_pages(__return__ + 1, __return__ + 1, holes_full, holes_swa, room_full, room_swa, gap, page_bytes_full, page_bytes_swa)
    """
    both_drain = min(holes_full, holes_swa)
    if holes_full <= holes_swa:
        extending_bytes, draining_holes = page_bytes_full, holes_swa
    else:
        extending_bytes, draining_holes = page_bytes_swa, holes_full
    one_extends = min(draining_holes - both_drain, gap // extending_bytes)
    both_extend = (gap - one_extends * extending_bytes) // (page_bytes_full + page_bytes_swa)
    total = both_drain + one_extends + both_extend + both_drain
    return min(total, holes_full + room_full, holes_swa + room_swa)


def side_available_pages_holes_uncapped(gap: int, page_bytes: int, room: int, holes: int) -> int:
    """Bug: the holes capped by the index room, as if reusing a hole advanced the frontier.

    pre: 0 <= gap <= 4096
    pre: 1 <= page_bytes <= 64
    pre: 0 <= room <= 64 and 0 <= holes <= 64
    post: __return__ >= holes
    post: (__return__ - holes) * page_bytes <= gap
    post: __return__ - holes <= room
    """
    return min(gap // page_bytes + holes, room)


def bands_ordered_ignores_floats(bands: list[tuple[int, int]]) -> bool:
    """Bug: compares only the two end pools, so a float middle pool overlapping one passes.

    pre: len(bands) <= 4
    pre: all(0 <= low <= high <= 64 for low, high in bands)
    post: __return__ == all(a[1] <= b[0] for i, a in enumerate(bands) for b in bands[i + 1:] if a[0] < a[1] and b[0] < b[1])
    """
    if len(bands) < 2:
        return True
    ends = [(low, high) for low, high in (bands[0], bands[-1]) if low < high]
    return len(ends) < 2 or ends[0][1] <= ends[1][0]


def band_pages_raw_span(page_bytes: int, min_page: int, num_pages: int, low_byte: int,
                        high_byte: int) -> int:
    """Bug: the band's raw span in pages, ``(high - low) // page_bytes``: a low frontier off
    this grid (a neighbour's multiple) counts a page that reaches below it.

    pre: 1 <= page_bytes <= 256
    pre: 0 <= min_page <= num_pages <= 256
    pre: 0 <= low_byte <= MAX_CHECKED and 0 <= high_byte <= MAX_CHECKED
    post: __return__ >= 0
    post: __return__ == 0 or max(-(-low_byte // page_bytes), min_page) * page_bytes >= low_byte
    post: __return__ == 0 or (max(-(-low_byte // page_bytes), min_page) + __return__) * page_bytes <= high_byte
    post: __return__ <= max(0, num_pages - min_page)
    """
    return max(0, min((high_byte - low_byte) // page_bytes, num_pages - min_page))
