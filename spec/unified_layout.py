"""Byte arithmetic of a unified memory pool: one byte buffer shared by sub-pools.

SGLang 0.5.23's ``UnifiedKVPool`` is one ``uint8`` buffer of ``total_bytes``. Every sub-pool sees
the whole buffer as rows of its own ``entry_bytes`` (the bytes one token slot occupies in it) and
hands out pages of ``page_size`` rows, so physical page ``p`` of a sub-pool covers the bytes
``[p * page_bytes, (p + 1) * page_bytes)`` with ``page_bytes = page_size * entry_bytes``
(``UNI-1``). The lowest bytes are a reserved sink for padding writes (``UNI-2``); one end
sub-pool grows up from the sink, the other grows down from the top, and their frontiers may
never cross (``UNI-3``). Capacity in tokens is derived from the free byte band between the
frontiers (``UNI-7``, ``UNI-8``).

Pure functions on ints; the contracts are PEP 316 docstring contracts, checked by CrossHair
(``pre:``/``post:``), and the Z3 lemmas of ``tests/formal/test_formal_z3_unified.py`` prove the
capacity formulas for unbounded sizes.
"""

from __future__ import annotations

MAX_CHECKED = 4096  # bound used by the contracts so that a solver never picks huge sizes


def reserved_floor_bytes(max_paged_entry_bytes: int, max_state_entry_bytes: int,
                         page_size: int) -> int:
    """Bytes at the bottom of the buffer kept as the padding sink (``UNI-2``).

    Slot 0 of every sub-pool is the sink for padding writes. A paged sub-pool hands out whole
    pages, so its page 0 (``page_size`` rows) must lie inside the sink; a state (mamba)
    sub-pool is unpaged and needs one row. ``max_state_entry_bytes`` is 0 without one.

    pre: 1 <= max_paged_entry_bytes <= MAX_CHECKED
    pre: 0 <= max_state_entry_bytes <= MAX_CHECKED
    pre: 1 <= page_size <= 64
    post: __return__ >= page_size * max_paged_entry_bytes
    post: __return__ >= max_state_entry_bytes
    post: __return__ == page_size * max_paged_entry_bytes or __return__ == max_state_entry_bytes
    """
    return max(page_size * max_paged_entry_bytes, max_state_entry_bytes)


def min_page_index(floor_bytes: int, entry_bytes: int, page_size: int) -> int:
    """First allocatable physical page of a sub-pool: the first page wholly above the sink
    (``UNI-2``). ``ceil(ceil(floor / entry) / page_size)``, as SGLang derives it from the
    first allocatable slot.

    pre: 0 <= floor_bytes <= MAX_CHECKED
    pre: 1 <= entry_bytes <= MAX_CHECKED
    pre: 1 <= page_size <= 64
    post: __return__ * page_size * entry_bytes >= floor_bytes
    post: __return__ == 0 or (__return__ - 1) * page_size * entry_bytes < floor_bytes
    """
    min_slot = -(-floor_bytes // entry_bytes)
    return -(-min_slot // page_size)


def num_pages(total_bytes: int, entry_bytes: int, page_size: int) -> int:
    """Physical pages a sub-pool's view of the buffer holds (``UNI-1``): whole rows, then whole
    pages; the tail bytes that make no whole page are never handed out.

    pre: 0 <= total_bytes <= MAX_CHECKED * 16
    pre: 1 <= entry_bytes <= MAX_CHECKED
    pre: 1 <= page_size <= 64
    post: __return__ * page_size * entry_bytes <= total_bytes
    post: (__return__ + 1) * page_size * entry_bytes > total_bytes
    """
    return total_bytes // entry_bytes // page_size


def page_byte_range(page: int, page_bytes: int) -> tuple[int, int]:
    """Half-open byte range ``[start, stop)`` of physical page ``page`` (``UNI-1``).

    pre: 0 <= page <= MAX_CHECKED
    pre: 1 <= page_bytes <= MAX_CHECKED
    post: __return__[1] - __return__[0] == page_bytes
    post: __return__[0] // page_bytes == page
    """
    return page * page_bytes, (page + 1) * page_bytes


def frontier_bytes(grows_up: bool, watermark: int, min_page: int, pages: int,
                   page_bytes: int) -> tuple[int, int]:
    """Byte band ``(low, high)`` an end sub-pool occupies (``UNI-3``).

    A grow-up pool owns pages ``[min_page, watermark)``: its band is
    ``[min_page * page_bytes, watermark * page_bytes)``. A grow-down pool owns
    ``(watermark, pages)``: its band is ``[(watermark + 1) * page_bytes, pages * page_bytes)``.
    An empty pool's band is empty (``low == high``).

    pre: 1 <= page_bytes <= 256
    pre: 0 <= min_page <= pages <= 256
    pre: (grows_up and min_page <= watermark <= pages) or (not grows_up and min_page - 1 <= watermark <= pages - 1)
    post: 0 <= __return__[0] <= __return__[1] <= pages * page_bytes
    post: __return__[1] - __return__[0] == allocated_pages(grows_up, watermark, min_page, pages) * page_bytes
    """
    if grows_up:
        return min_page * page_bytes, watermark * page_bytes
    return (watermark + 1) * page_bytes, pages * page_bytes


def allocated_pages(grows_up: bool, watermark: int, min_page: int, pages: int) -> int:
    """Pages inside an end sub-pool's span (live pages plus, under lazy compaction, holes;
    ``UNI-5``).

    pre: 0 <= min_page <= pages <= MAX_CHECKED
    pre: (grows_up and min_page <= watermark <= pages) or (not grows_up and min_page - 1 <= watermark <= pages - 1)
    post: 0 <= __return__ <= pages - min_page
    """
    if grows_up:
        return watermark - min_page
    return pages - 1 - watermark


def gap_bytes(up_high: int, down_low: int) -> int:
    """Free byte band between the grow-up pool's high frontier and the grow-down pool's low
    frontier (``UNI-7``); 0 when they touch (they never cross, ``UNI-3``).

    pre: 0 <= up_high <= MAX_CHECKED * 16
    pre: 0 <= down_low <= MAX_CHECKED * 16
    post: __return__ >= 0
    post: __return__ >= down_low - up_high
    post: __return__ == 0 or __return__ == down_low - up_high
    """
    return max(0, down_low - up_high)


def fits_pages(need_full: int, need_swa: int, holes_full: int, holes_swa: int,
               room_full: int, room_swa: int, gap: int, page_bytes_full: int,
               page_bytes_swa: int) -> bool:
    """Whether a full + SWA composite can take ``need_full`` full pages and ``need_swa`` SWA
    pages now, without compaction (``UNI-8``): each side first reuses its holes, then extends
    its frontier into the gap; each side's extension fits its own index room, and both
    extensions together fit the gap's bytes.

    pre: 0 <= need_full <= 64 and 0 <= need_swa <= 64
    pre: 0 <= holes_full <= 64 and 0 <= holes_swa <= 64
    pre: 0 <= room_full <= 64 and 0 <= room_swa <= 64
    pre: 0 <= gap <= 4096
    pre: 1 <= page_bytes_full <= 64 and 1 <= page_bytes_swa <= 64
    post: __return__ == (need_full <= holes_full + room_full and need_swa <= holes_swa + room_swa and max(0, need_full - holes_full) * page_bytes_full + max(0, need_swa - holes_swa) * page_bytes_swa <= gap)
    """
    if need_full > holes_full + room_full or need_swa > holes_swa + room_swa:
        return False
    extend_full = max(0, need_full - holes_full)
    extend_swa = max(0, need_swa - holes_swa)
    return extend_full * page_bytes_full + extend_swa * page_bytes_swa <= gap


def eager_joint_pages(gap: int, page_bytes_full: int, page_bytes_swa: int,
                      room_full: int, room_swa: int) -> int:
    """``available_size() // page_size`` of an eagerly compacted full + SWA composite
    (``UNI-7``): every composite page takes one full page and one SWA page from the gap.

    pre: 0 <= gap <= 4096
    pre: 1 <= page_bytes_full <= 64 and 1 <= page_bytes_swa <= 64
    pre: 0 <= room_full <= 64 and 0 <= room_swa <= 64
    post: fits_pages(__return__, __return__, 0, 0, room_full, room_swa, gap, page_bytes_full, page_bytes_swa)
    post: not fits_pages(__return__ + 1, __return__ + 1, 0, 0, room_full, room_swa, gap, page_bytes_full, page_bytes_swa)
    """
    return min(gap // (page_bytes_full + page_bytes_swa), room_full, room_swa)


def lazy_joint_pages(gap: int, page_bytes_full: int, page_bytes_swa: int, holes_full: int,
                     holes_swa: int, room_full: int, room_swa: int) -> int:
    """``available_size() // page_size`` of a lazily compacted full + SWA composite
    (``UNI-7``), SGLang's three phases: both sides drain holes; the side with fewer holes
    extends into the gap while the other still drains; both extend.

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
    total = both_drain + one_extends + both_extend
    return min(total, holes_full + room_full, holes_swa + room_swa)


def side_available_pages(gap: int, page_bytes: int, room: int, holes: int) -> int:
    """Pages one end sub-pool alone could take now (``UNI-9``): its holes plus the whole pages
    of the gap, capped by its index room. ``schedulable_*`` adds the bytes the neighbour's
    holes would free on compaction to ``gap``.

    pre: 0 <= gap <= 4096
    pre: 1 <= page_bytes <= 64
    pre: 0 <= room <= 64 and 0 <= holes <= 64
    post: __return__ >= holes
    post: (__return__ - holes) * page_bytes <= gap
    post: __return__ - holes <= room
    """
    return min(gap // page_bytes, room) + holes


def bands_ordered(bands: list[tuple[int, int]]) -> bool:
    """Whether sub-pool byte bands, in chain order (grow-up end, float middles, grow-down end),
    are disjoint and ordered (``UNI-3``): each non-empty band starts at or after the end of
    every non-empty band before it. An empty band (a parked float pool) holds no byte and is
    passed over, as SGLang's chain walk skips a transparent member.

    pre: len(bands) <= 4
    pre: all(0 <= low <= high <= 64 for low, high in bands)
    post: __return__ == all(a[1] <= b[0] for i, a in enumerate(bands) for b in bands[i + 1:] if a[0] < a[1] and b[0] < b[1])
    """
    frontier = 0
    for low, high in bands:
        if low == high:
            continue
        if low < frontier:
            return False
        frontier = high
    return True


def band_pages(page_bytes: int, min_page: int, num_pages: int, low_byte: int,
               high_byte: int) -> int:
    """Whole pages of one sub-pool's grid (pages ``[min_page, num_pages)`` of ``page_bytes``)
    inside the byte band ``[low_byte, high_byte)`` (``UNI-14``): a float pool's room between
    its neighbours' frontiers, which are multiples of *their* page bytes, so ``low_byte`` rounds
    up to this grid and ``high_byte`` down. Never negative.

    pre: 1 <= page_bytes <= 256
    pre: 0 <= min_page <= num_pages <= 256
    pre: 0 <= low_byte <= MAX_CHECKED and 0 <= high_byte <= MAX_CHECKED
    post: __return__ >= 0
    post: __return__ == 0 or max(-(-low_byte // page_bytes), min_page) * page_bytes >= low_byte
    post: __return__ == 0 or (max(-(-low_byte // page_bytes), min_page) + __return__) * page_bytes <= high_byte
    post: __return__ <= max(0, num_pages - min_page)
    """
    lo = max(-(-low_byte // page_bytes), min_page)
    hi = min(high_byte // page_bytes, num_pages)
    return max(0, hi - lo)
