"""Segment arithmetic: which pages a row segment touches, and the boundary-page dedup.

A segment is ``(free_index, start_pos)``: ``free_index`` holds the slots of positions
``[start_pos, start_pos + len(free_index))`` of one request's kv row. Under the row layout
(``MODEL-4``) positions on one logical page share one physical page, so a segment's pages are
found from one representative slot per logical page, at a stride (``SEG-2``)::

    positions   start_pos ...................................... start_pos + n
    pages       | head (ps - offset) |  ps  |  ps  | ... | tail <= ps |
    reps        ^ index 0            ^ ps - offset, then every ps

Consecutive segments of ``free_segments`` may touch a shared page; the later segment's head is
trimmed to the next page boundary so the shared page is released once (``SEG-5``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .layout import ceil_div


def rep_offsets(num_tokens: int, start_pos: int, page_size: int) -> list[int]:
    """Indices into a segment of one representative per logical page touched (``SEG-2``).

    ``[0, ps - start_pos % ps, ... step ps]`` cut at ``num_tokens``; ``[0, ps, 2ps, ...]`` when the
    start is page-aligned. Their count is known without reading the slots: the number of logical
    pages the positions ``[start_pos, start_pos + num_tokens)`` touch.

    pre: 0 <= num_tokens <= 256
    pre: 0 <= start_pos <= 256
    pre: 1 <= page_size <= 64
    post: len(__return__) == (ceil_div(start_pos + num_tokens, page_size) - start_pos // page_size if num_tokens else 0)
    post: all(0 <= i < num_tokens for i in __return__)
    post: __return__ == sorted(set(__return__))
    post: len({(start_pos + i) // page_size for i in __return__}) == len(__return__)
    post: {(start_pos + i) // page_size for i in __return__} == {(start_pos + k) // page_size for k in range(num_tokens)}
    """
    if num_tokens == 0:
        return []
    offset = start_pos % page_size
    first = 0 if offset == 0 else page_size - offset
    return [0, *range(first or page_size, num_tokens, page_size)]


def segment_pages(free_index: Sequence[int], start_pos: int, page_size: int) -> list[int]:
    """Pages released by ``free_segment(free_index, start_pos)``, in row order (``SEG-2``).

    Exactly the distinct pages the segment's slots lie on, provided the slots follow the row
    layout (``segment_layout_ok``). Not sorted, not deduplicated beyond that.

    pre: len(free_index) <= 64
    pre: 0 <= start_pos <= 256
    pre: 1 <= page_size <= 16
    pre: segment_layout_ok(free_index, start_pos, page_size)
    post: sorted(__return__) == sorted({s // page_size for s in free_index})
    """
    return [free_index[i] // page_size for i in rep_offsets(len(free_index), start_pos, page_size)]


def segment_layout_ok(free_index: Sequence[int], start_pos: int, page_size: int) -> bool:
    """Whether ``free_index`` can be positions ``start_pos...`` of a row (``SEG-1``).

    The row layout (``MODEL-4``): each slot sits at its position's in-page offset, and two
    positions share a physical page iff they share a logical page.

    pre: len(free_index) <= 64
    pre: 0 <= start_pos <= 256
    pre: 1 <= page_size <= 16
    post: __return__ == (all(s % page_size == (start_pos + k) % page_size for k, s in enumerate(free_index)) and len({((start_pos + k) // page_size, s // page_size) for k, s in enumerate(free_index)}) == len({s // page_size for s in free_index}) == len({(start_pos + k) // page_size for k in range(len(free_index))}))
    """
    if any(slot % page_size != (start_pos + k) % page_size for k, slot in enumerate(free_index)):
        return False
    return row_map_conflict(free_index, start_pos, page_size, {}, {}) is None


def row_map_conflict(free_index: Sequence[int], start_pos: int, page_size: int,
                     page_of_logical: dict[int, int],
                     logical_of_page: dict[int, int]) -> tuple[int, int] | None:
    """Record positions ``start_pos...`` of a row in the two maps; the first conflict (``SEG-1``).

    The maps (logical page -> physical page and back) may hold earlier segments of the same
    call. Returns ``(logical, page)`` of the first slot that puts a logical page on a second
    physical page (``page_of_logical[logical] != page``) or a physical page under a second
    logical page; None when the positions keep the maps a bijection.

    pre: len(free_index) <= 64
    pre: 0 <= start_pos <= 256
    pre: 1 <= page_size <= 16
    post: bool(__old__.page_of_logical or __old__.logical_of_page) or (__return__ is None) == (len({((start_pos + k) // page_size, s // page_size) for k, s in enumerate(free_index)}) == len({s // page_size for s in free_index}) == len({(start_pos + k) // page_size for k in range(len(free_index))}))
    """
    for k, slot in enumerate(free_index):
        logical, page = (start_pos + k) // page_size, slot // page_size
        if page_of_logical.setdefault(logical, page) != page:
            return logical, page
        if logical_of_page.setdefault(page, logical) != logical:
            return logical, page
    return None


def trim_boundary(
    start_pos: int, num_tokens: int, prev_end: int | None, page_size: int
) -> int:
    """Tokens to drop from the head of a segment so a shared boundary page is freed once.

    ``prev_end`` is the end position of the previous non-empty segment (``None`` for the first).
    When this segment starts on the page where the previous one ended, its head up to the next
    page boundary is dropped; the result may cover the whole segment, which then frees nothing
    (``SEG-5``). Returns a count in ``[0, num_tokens]``.

    pre: 0 <= start_pos <= 256
    pre: 0 <= num_tokens <= 256
    pre: prev_end is None or 1 <= prev_end <= start_pos
    pre: 1 <= page_size <= 64
    post: 0 <= __return__ <= num_tokens
    post: __return__ == 0 or prev_end is not None and (prev_end - 1) // page_size == start_pos // page_size
    post: __return__ == num_tokens or (start_pos + __return__) // page_size > (-1 if prev_end is None else (prev_end - 1) // page_size)
    """
    if prev_end is None or start_pos // page_size != (prev_end - 1) // page_size:
        return 0
    boundary = (start_pos // page_size + 1) * page_size
    return min(num_tokens, boundary - start_pos)


def next_trim(start_pos: int, num_tokens: int, prev_end: int | None,
              page_size: int) -> tuple[int, int | None]:
    """One step of the segment loop of ``free_segments``: the head to drop, and the new ``prev_end``.

    An empty segment drops nothing and leaves ``prev_end`` where it was (``SEG-6``); any other
    segment is trimmed by :func:`trim_boundary` (``SEG-5``) and ends at ``start_pos + num_tokens``.
    The spec (:func:`segments_pages`, ``rules.check_segments``) and ``kvpool.impl`` walk their
    segments with it.

    pre: 0 <= start_pos <= 256
    pre: 0 <= num_tokens <= 256
    pre: prev_end is None or 1 <= prev_end <= start_pos
    pre: 1 <= page_size <= 64
    post: __return__[0] == (0 if num_tokens == 0 else trim_boundary(start_pos, num_tokens, prev_end, page_size))
    post: __return__[1] == (prev_end if num_tokens == 0 else start_pos + num_tokens)
    """
    if num_tokens == 0:
        return 0, prev_end
    return trim_boundary(start_pos, num_tokens, prev_end, page_size), start_pos + num_tokens


def segments_pages(segments: Sequence[tuple[Sequence[int], int]], page_size: int) -> list[int]:
    """Pages released by ``free_segments(segments)``, in order, after the boundary trim.

    Empty segments are skipped and do not move ``prev_end`` (``SEG-6``). Each page touched by the
    union of the segments appears exactly once (``SEG-5``; Z3 lemma ``dedup_step``).

    pre: len(segments) <= 4
    pre: all(len(idx) <= 16 and 0 <= start <= 64 for idx, start in segments)
    pre: 1 <= page_size <= 8
    pre: all(segment_layout_ok(idx, start, page_size) for idx, start in segments)
    pre: all(segments[i][1] + len(segments[i][0]) <= segments[i + 1][1] for i in range(len(segments) - 1))
    pre: len({((start + k) // page_size, s // page_size) for idx, start in segments for k, s in enumerate(idx)}) == len({s // page_size for idx, _ in segments for s in idx}) == len({(start + k) // page_size for idx, start in segments for k in range(len(idx))})
    post: sorted(__return__) == sorted({s // page_size for idx, _ in segments for s in idx})
    """
    pages: list[int] = []
    prev_end: int | None = None
    for free_index, start_pos in segments:
        trim, prev_end = next_trim(start_pos, len(free_index), prev_end, page_size)
        pages.extend(segment_pages(free_index[trim:], start_pos + trim, page_size))
    return pages


def touched_pages(num_tokens: int, start_pos: int, page_size: int) -> range:
    """Logical pages touched by positions ``[start_pos, start_pos + num_tokens)``.

    pre: 0 <= num_tokens <= 256
    pre: 0 <= start_pos <= 256
    pre: 1 <= page_size <= 64
    post: len(__return__) == len(rep_offsets(num_tokens, start_pos, page_size))
    post: set(__return__) == {(start_pos + k) // page_size for k in range(num_tokens)}
    """
    if num_tokens == 0:
        return range(0)
    return range(start_pos // page_size, ceil_div(start_pos + num_tokens, page_size))
