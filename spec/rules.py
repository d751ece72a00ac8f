"""Caller-side rules: validate a call against the state before anything changes (``ERR-1``).

Each check raises :class:`ContractViolation` naming its clause, or returns what the call will
release. The checks see the allocator only through a page-status lookup, so the reference model
and ``kvpool.impl``'s checked mode share them.

Page statuses (``MODEL-3``): ``FREE`` (in the free list), ``STAGED`` (released under
``need_sort``, not yet merged), ``OWNED`` (handed out), ``DEFERRED`` (owned, named by a ``free()``
inside the open free group) and ``DEFERRED_SEGMENT`` (owned, named by a segment free inside the
open group).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .errors import ContractViolation
from .layout import last_loc_aligned, num_new_pages
from .segments import next_trim, row_map_conflict, segment_layout_ok, segment_pages
from .wording import counted

FREE, STAGED, OWNED, DEFERRED, DEFERRED_SEGMENT = "free", "staged", "owned", "deferred", "deferred-seg"
StatusOf = Callable[[int], str]


_INT = frozenset({int})  # the one slot type the fast path of check_free takes (bool is not int here)

def check_count(value: object, name: str, clause: str) -> int:
    """``value`` as a non-negative int, else ``clause`` (negative sizes, non-integers).

    pre: len(clause) <= 16
    post: __return__ == value and __return__ >= 0
    raises: ContractViolation
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ContractViolation(clause, f"{name} must be a non-negative int, got {value!r}")
    return value


def check_alloc(need_size: object, page_size: int) -> int:
    """``alloc(need_size)``: a non-negative int (``ALLOC-2``), page-aligned (``ALLOC-1``).

    Returns the number of pages requested.

    pre: 1 <= page_size <= 256
    post: __return__ >= 0 and __return__ * page_size == need_size
    raises: ContractViolation
    """
    n = check_count(need_size, "need_size", "ALLOC-2")
    if n % page_size:
        raise ContractViolation(
            "ALLOC-1", f"alloc({n}) is not a multiple of page_size {page_size}"
        )
    return n // page_size


def check_slot(slot: int, page_size: int, num_pages: int) -> int:
    """The page of ``slot``: in range (``FREE-1``) and not the padding page 0 (``FREE-2``).

    pre: 1 <= page_size <= 256
    pre: 0 <= num_pages <= 4096
    post: 1 <= __return__ <= num_pages and __return__ == slot // page_size
    raises: ContractViolation
    """
    if isinstance(slot, bool) or not isinstance(slot, int):
        raise ContractViolation("FREE-1", f"slot {slot!r} is not an int")
    if not 0 <= slot < (num_pages + 1) * page_size:
        raise ContractViolation(
            "FREE-1", f"slot {slot} is outside the pool [0, {(num_pages + 1) * page_size})"
        )
    if slot < page_size:
        raise ContractViolation("FREE-2", f"slot {slot} lies on the reserved padding page 0")
    return slot // page_size


def _check_owned(page: int, status_of: StatusOf, allowed: tuple[str, ...]) -> None:
    status = status_of(page)
    if status not in allowed:
        where = {FREE: "already free", STAGED: "already released (staged)"}.get(
            status, "already freed inside the open free group"
        )
        raise ContractViolation("FREE-3", f"double free: page {page} is {where}")


def check_free(
    slots: Sequence[int],
    *,
    paged: bool,
    page_size: int,
    num_pages: int,
    status_of: StatusOf,
    group_open: bool,
) -> list[int]:
    """``free(slots)``: the pages it releases, in release order (``FREE-4``, ``FREE-5``).

    Paged: the sorted distinct pages the slots lie on; a page may be named by several slots of
    one call, and inside a group by several ``free()`` calls (``GROUP-6``). Token
    (``paged=False``, page size 1): the slots in the given order; naming one twice is a double
    free. Every page must be owned (``FREE-3``).

    pre: len(slots) <= 8
    pre: 1 <= page_size <= 8 and (paged or page_size == 1)
    pre: 0 <= num_pages <= 16
    post: set(__return__) == {s // page_size for s in slots}
    post: __return__ == (sorted(set(__return__)) if paged else list(slots))
    raises: ContractViolation
    """
    end = (num_pages + 1) * page_size
    if set(map(type, slots)) <= _INT and (not slots or page_size <= min(slots) <= max(slots) < end):
        pages = [s // page_size for s in slots]  # every slot passes check_slot: skip its calls
    else:
        pages = [check_slot(s, page_size, num_pages) for s in slots]
    if paged:
        pages = sorted(set(pages))
    elif len(set(pages)) != len(pages):
        raise ContractViolation("FREE-3", f"double free: a slot appears twice in {list(slots)}")
    allowed = (OWNED, DEFERRED) if paged and group_open else (OWNED,)
    for page in pages:
        _check_owned(page, status_of, allowed)
    return pages


def check_segments(
    segments: Sequence[tuple[Sequence[int], int]],
    *,
    page_size: int,
    num_pages: int,
    status_of: StatusOf,
) -> list[list[int]]:
    """``free_segments(segments)``: per segment, the pages it releases after the trim.

    Segments ascend without overlap (``SEG-4``); each follows the row layout (``SEG-1``); a
    shared boundary page is released by the first segment only (``SEG-5``); every page released
    is owned, and released once across the call (``FREE-3``). ``free_segment`` is the one-segment
    case.

    pre: len(segments) <= 3 and all(len(idx) <= 6 and start <= 64 for idx, start in segments)
    pre: 1 <= page_size <= 4
    pre: 0 <= num_pages <= 16
    post: len(__return__) == len(segments)
    post: sorted(p for pages in __return__ for p in pages) == sorted({s // page_size for idx, _ in segments for s in idx})
    raises: ContractViolation
    """
    out: list[list[int]] = []
    page_of_logical: dict[int, int] = {}
    logical_of_page: dict[int, int] = {}
    prev_end: int | None = None
    last_stop = 0
    for free_index, start_pos in segments:
        start = check_count(start_pos, "start_pos", "SEG-1")
        n = len(free_index)
        if n == 0:  # skipped, as in SGLang: no order constraint, no boundary move (SEG-6)
            out.append([])
            continue
        if start < last_stop:
            raise ContractViolation(
                "SEG-4", f"segment at {start} overlaps or precedes the previous one ending at {last_stop}"
            )
        last_stop = start + n
        for slot in free_index:
            check_slot(slot, page_size, num_pages)
        if not segment_layout_ok(free_index, start, page_size):
            raise ContractViolation(
                "SEG-1", f"slots {list(free_index)} do not follow a row layout from position {start}"
            )
        _check_one_row(free_index, start, page_size, page_of_logical, logical_of_page)
        trim, prev_end = next_trim(start, n, prev_end, page_size)
        pages = segment_pages(free_index[trim:], start + trim, page_size)
        for page in pages:
            _check_owned(page, status_of, (OWNED,))
        out.append(pages)
    return out


def _check_one_row(free_index: Sequence[int], start: int, page_size: int,
                   page_of_logical: dict[int, int], logical_of_page: dict[int, int]) -> None:
    """Across the segments of one call, a row page lies on one physical page and back (``SEG-1``).

    Catches a trimmed head that names another page than the previous segment gave its row page
    (the trim would hide it) and one page named for two row pages (it would be released twice).
    """
    conflict = row_map_conflict(free_index, start, page_size, page_of_logical, logical_of_page)
    if conflict is None:
        return
    logical, page = conflict
    if page_of_logical[logical] != page:
        raise ContractViolation(
            "SEG-1", f"row page {logical} is on page {page_of_logical[logical]} in one segment "
                     f"and on page {page} in another")
    raise ContractViolation(
        "SEG-1", f"page {page} is named by two segments for different row pages "
                 f"({logical_of_page[page]} and {logical})")


def check_extend(
    prefix_lens: Sequence[int],
    seq_lens: Sequence[int],
    last_loc: Sequence[int],
    *,
    page_size: int,
    num_pages: int,
    status_of: StatusOf,
    extend_num_tokens: int | None = None,
    clause_prefix: str = "EXTEND",
) -> list[int]:
    """``alloc_extend`` arguments: the new pages each request needs (``EXTEND-4``).

    Equal lengths and a matching ``extend_num_tokens`` (``EXTEND-1``); ``0 <= prefix <= seq``
    (``EXTEND-2``); ``last_loc`` aligned with the prefix and on a page the caller owns
    (``EXTEND-3``); requests that continue a partial page continue distinct pages (``EXTEND-8``). ``clause_prefix``
    is ``"DECODE"`` when called for ``alloc_decode``, whose rules carry the same numbers.

    pre: len(seq_lens) <= 4
    pre: all(p <= 256 for p in prefix_lens) and all(s <= 256 for s in seq_lens)
    pre: all(-1 <= x <= 256 for x in last_loc)
    pre: 1 <= page_size <= 16
    pre: 0 <= num_pages <= 64
    pre: clause_prefix in ("EXTEND", "DECODE")
    post: len(__return__) == len(seq_lens) == len(prefix_lens) == len(last_loc)
    post: all(0 <= p <= s for p, s in zip(prefix_lens, seq_lens))
    post: all(last_loc_aligned(p, loc, page_size) for p, loc in zip(prefix_lens, last_loc))
    post: __return__ == [num_new_pages(p, s, page_size) for p, s in zip(prefix_lens, seq_lens)]
    post: extend_num_tokens is None or extend_num_tokens == sum(seq_lens) - sum(prefix_lens)
    raises: ContractViolation
    """
    bs = len(seq_lens)
    if len(prefix_lens) != bs or len(last_loc) != bs:
        raise ContractViolation(
            f"{clause_prefix}-1",
            f"length mismatch: {len(prefix_lens)} prefix_lens, {bs} seq_lens, {len(last_loc)} last_loc",
        )
    partial_pages: set[int] = set()
    for i in range(bs):
        pre = check_count(prefix_lens[i], f"prefix_lens[{i}]", f"{clause_prefix}-2")
        seq = check_count(seq_lens[i], f"seq_lens[{i}]", f"{clause_prefix}-2")
        if pre > seq:
            raise ContractViolation(f"{clause_prefix}-2", f"request {i}: prefix {pre} > seq {seq}")
        loc = last_loc[i]
        if not last_loc_aligned(pre, loc, page_size):
            raise ContractViolation(
                f"{clause_prefix}-3",
                f"request {i}: last_loc {loc} does not end a prefix of {counted(pre, 'token')} at page size "
                f"{page_size} (need last_loc == -1 iff prefix == 0 and (last_loc + 1) % ps == prefix % ps)",
            )
        if pre == 0:
            continue
        try:
            page = check_slot(loc, page_size, num_pages)
        except ContractViolation as err:
            raise ContractViolation(f"{clause_prefix}-3", f"request {i}: last_loc: {err.detail}") from None
        if status_of(page) != OWNED:
            raise ContractViolation(
                f"{clause_prefix}-3", f"request {i}: last_loc {loc} is on page {page}, which is {status_of(page)}"
            )
        if pre % page_size and seq > pre:
            if page in partial_pages:
                raise ContractViolation(
                    f"{clause_prefix}-8", f"request {i}: page {page} is continued by two requests"
                )
            partial_pages.add(page)
    total = sum(seq_lens) - sum(prefix_lens)
    if extend_num_tokens is not None and extend_num_tokens != total:
        raise ContractViolation(
            f"{clause_prefix}-1", f"extend_num_tokens {extend_num_tokens} != sum(seq - prefix) = {total}"
        )
    return [num_new_pages(p, s, page_size) for p, s in zip(prefix_lens, seq_lens)]


def check_decode(
    seq_lens: Sequence[int], last_loc: Sequence[int], *, page_size: int, num_pages: int, status_of: StatusOf
) -> list[int]:
    """``alloc_decode`` arguments: decode is an extend with ``prefix = seq - 1`` (``DECODE-2``).

    ``seq >= 1``; the same rules as ``check_extend`` under ``DECODE-*`` clause IDs (``DECODE-1``
    lengths, ``DECODE-3`` last_loc, ``DECODE-8`` distinct partial pages). Returns the new pages
    per request (0 or 1, ``DECODE-4``).

    pre: len(seq_lens) <= 4
    pre: all(s <= 256 for s in seq_lens) and all(-1 <= x <= 256 for x in last_loc)
    pre: 1 <= page_size <= 16
    pre: 0 <= num_pages <= 64
    post: __return__ == [int((s - 1) % page_size == 0) for s in seq_lens]
    raises: ContractViolation
    """
    for i, seq in enumerate(seq_lens):
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
            raise ContractViolation("DECODE-2", f"request {i}: seq_len must be an int >= 1, got {seq!r}")
    prefix = [s - 1 for s in seq_lens]
    return check_extend(
        prefix, seq_lens, last_loc, page_size=page_size, num_pages=num_pages,
        status_of=status_of, clause_prefix="DECODE",
    )
