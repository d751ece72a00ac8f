"""Index arithmetic of the hybrid sliding-window allocator (``SWA-*``).

Pure functions on ints and lists of ints, shared by :class:`kvpool.spec.hybrid.HybridModel`,
``kvpool.impl``'s SWA allocator and the oracle's window slides. A hybrid allocator pairs every
full-attention slot with an SWA slot; both pools page in step (one ``seq_lens`` drives both
sides), so a full page's mapped slots lie on one SWA page at the same offsets (``SWA-3``).

Releasing the SWA side works on whole full pages when ``page_size > 1`` (``SWA-10``; SGLang
PR #27779, bug B9)::

    row positions   [a ........ end)            freed by free_swa(row[a:end])
    full pages      | p0 | p1 | p2 |            every slot of p0..p2 loses its SWA peer
    frontier                         ^ ceil_page(end): positions below it have no SWA peer

The contracts are PEP 316 docstring contracts, checked by CrossHair (``.ci/crosshair``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .layout import ceil_div

RELEASED = 0  # a mapping value: no SWA peer (slot 0 of the SWA pool is the padding slot)


def full_page_slots(slots: Sequence[int], page_size: int) -> list[int]:
    """Every slot of the full pages that ``slots`` lie on, page by page (``SWA-10``).

    SGLang's ``_expand_to_full_pages``: duplicates kept (a page named twice is expanded twice;
    deduplicating would cost a device sync), offsets ascending within a page. At page size 1 the
    slots themselves.

    pre: len(slots) <= 8
    pre: all(0 <= s <= 256 for s in slots)
    pre: 1 <= page_size <= 8
    post: len(__return__) == len(slots) * page_size
    post: {x // page_size for x in __return__} == {s // page_size for s in slots}
    post: all(x % page_size == i % page_size for i, x in enumerate(__return__))
    post: page_size > 1 or __return__ == list(slots)
    """
    return [s // page_size * page_size + offset for s in slots for offset in range(page_size)]


def peer_pages(peers: Sequence[int], page_size: int) -> list[int]:
    """The SWA pages a ``free_swa`` releases, from the gathered mapping values (``SWA-10``).

    Page size 1 (a token pool): the peer slots in the order given. Page size > 1: the sorted
    distinct pages of the mapped peers; released entries (``RELEASED``) are dropped, as the
    expansion to whole full pages gathers slots that never had a peer.

    pre: len(peers) <= 8
    pre: all(0 <= s <= 256 for s in peers)
    pre: 1 <= page_size <= 8
    post: page_size > 1 or __return__ == list(peers)
    post: page_size == 1 or __return__ == sorted({s // page_size for s in peers if s != RELEASED})
    post: page_size == 1 or 0 not in __return__ or any(0 < s < page_size for s in peers)
    """
    if page_size == 1:
        return list(peers)
    return sorted({s // page_size for s in peers if s != RELEASED})


def released_frontier(end_pos: int, page_size: int) -> int:
    """First row position that keeps its SWA peer after ``free_swa`` of positions below
    ``end_pos`` (``SWA-10``): the next page boundary, as whole full pages lose their peers.

    A slide to an unaligned ``end_pos`` therefore also releases the SWA side of positions
    ``[end_pos, frontier)``; a scheduler that needs them in the window slides to a page boundary.

    pre: 0 <= end_pos <= 4096
    pre: 1 <= page_size <= 256
    post: __return__ % page_size == 0
    post: end_pos <= __return__ < end_pos + page_size
    post: (__return__ == end_pos) == (end_pos % page_size == 0)
    """
    return ceil_div(end_pos, page_size) * page_size


def slide_end(seq_len: int, window_tokens: int, page_size: int) -> int:
    """The page-aligned position below which a row may drop its SWA side (``SWA-10``).

    Positions ``[0, seq_len - window_tokens)`` left the window; whole pages of them can go
    (SGLang's eviction frontier is ``page_floor``; PR #22470 keeps one more page when the page is
    larger than the window). Never beyond the window: positions ``>= seq_len - window_tokens``
    keep their peers after ``free_swa`` up to the returned position.

    pre: 0 <= seq_len <= 4096
    pre: 1 <= window_tokens <= 4096
    pre: 1 <= page_size <= 256
    post: __return__ % page_size == 0
    post: 0 <= __return__ <= max(0, seq_len - window_tokens)
    post: released_frontier(__return__, page_size) == __return__
    post: max(0, seq_len - window_tokens) - __return__ < page_size
    """
    return max(0, seq_len - window_tokens) // page_size * page_size


def pages_agree(full_slots: Sequence[int], swa_slots: Sequence[int], page_size: int) -> bool:
    """Whether paired slots page in step (``SWA-3``): same in-page offsets, and full pages
    map one-to-one onto SWA pages.

    pre: len(full_slots) == len(swa_slots) <= 8
    pre: all(0 <= s <= 64 for s in full_slots) and all(0 <= s <= 64 for s in swa_slots)
    pre: 1 <= page_size <= 8
    post: __return__ == (all(f % page_size == s % page_size for f, s in zip(full_slots, swa_slots)) and len({(f // page_size, s // page_size) for f, s in zip(full_slots, swa_slots)}) == len({f // page_size for f in full_slots}) == len({s // page_size for s in swa_slots}))
    """
    swa_of_full: dict[int, int] = {}
    full_of_swa: dict[int, int] = {}
    for full, swa in zip(full_slots, swa_slots):
        if full % page_size != swa % page_size:
            return False
        fp, sp = full // page_size, swa // page_size
        if swa_of_full.setdefault(fp, sp) != sp or full_of_swa.setdefault(sp, fp) != fp:
            return False
    return True
