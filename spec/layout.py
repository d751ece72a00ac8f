"""Index arithmetic shared by the reference order and the contract checks.

Pure functions on ints and lists of ints. A request's kv row maps positions to slots; slot ``s``
lives on page ``s // page_size`` at offset ``s % page_size`` (``MODEL-2``). Extending a row from
``prefix_len`` to ``seq_len`` tokens splits the new positions into three parts (``EXTEND-5``)::

    positions  [prefix_len, seq_len)
      part 1   [prefix_len, min(seq_len, ceil_page(prefix_len)))    rest of the prefix's last page
      part 2   [ceil_page(prefix_len), floor_page(seq_len))          whole new pages
      part 3   [max(floor_page(seq_len), ceil_page(prefix_len)), seq_len)   head of a new page

The contracts below are PEP 316 docstring contracts, checked by CrossHair (``pre:``/``post:``).
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_CHECKED = 4096  # bound used by the contracts so that a solver never picks huge sizes


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for ``a >= 0``, ``b >= 1``.

    pre: 0 <= a <= MAX_CHECKED
    pre: 1 <= b <= MAX_CHECKED
    post: __return__ * b >= a
    post: (__return__ - 1) * b < a or __return__ == 0
    """
    return -(-a // b)


def num_new_pages(prefix_len: int, seq_len: int, page_size: int) -> int:
    """Pages a request needs to grow from ``prefix_len`` to ``seq_len`` tokens (``EXTEND-4``).

    Equal to ``ceil(seq/ps) - ceil(prefix/ps)``: the logical pages that the new positions touch
    and the prefix did not. Zero when ``seq_len == prefix_len``.

    pre: 0 <= prefix_len <= seq_len <= MAX_CHECKED
    pre: 1 <= page_size <= 256
    post: __return__ >= 0
    post: __return__ * page_size >= seq_len - prefix_len - page_size + 1
    post: __return__ * page_size <= seq_len - prefix_len + page_size - 1
    post: (__return__ == 0) == (seq_len == prefix_len or prefix_len % page_size + (seq_len - prefix_len) <= page_size and prefix_len % page_size != 0)
    """
    return ceil_div(seq_len, page_size) - ceil_div(prefix_len, page_size)


def extend_parts(prefix_len: int, seq_len: int, page_size: int) -> tuple[int, int, int]:
    """Sizes of the three parts of an extend (``EXTEND-5``), in tokens.

    Part 1 fills the prefix's partial last page, part 2 covers whole new pages, part 3 is the
    head of the last new page. Each part is non-negative; they sum to ``seq_len - prefix_len``;
    part 2 is a whole number of pages; part 3 is shorter than a page.

    pre: 0 <= prefix_len <= seq_len <= MAX_CHECKED
    pre: 1 <= page_size <= 256
    post: all(part >= 0 for part in __return__)
    post: sum(__return__) == seq_len - prefix_len
    post: __return__[1] % page_size == 0
    post: __return__[2] < page_size
    post: (__return__[1] + __return__[2] == 0) or (prefix_len + __return__[0]) % page_size == 0
    """
    prefix_ceil = ceil_div(prefix_len, page_size) * page_size
    seq_floor = seq_len // page_size * page_size
    part1 = min(seq_len, prefix_ceil) - prefix_len
    part2 = max(0, seq_floor - prefix_ceil)
    part3 = seq_len - prefix_len - part1 - part2
    return part1, part2, part3


def merge_bound(extend_num_tokens: int, batch_size: int, page_size: int) -> int:
    """SGLang's cheap upper bound on the pages an extend batch needs (``SORT-2``).

    ``alloc_extend`` merges the staged pages first when this bound exceeds the free list.
    Safe: it is never below the exact count (Z3 lemma ``merge_bound_safe``).

    pre: 0 <= extend_num_tokens <= MAX_CHECKED
    pre: 0 <= batch_size <= 64
    pre: 1 <= page_size <= 256
    post: __return__ >= batch_size + 1
    """
    return extend_num_tokens // page_size + batch_size + 1


def decode_needs_page(seq_len: int, page_size: int) -> bool:
    """Whether the decode step to ``seq_len`` tokens opens a new page (``DECODE-4``).

    The new token sits at position ``seq_len - 1``; it opens a page iff that position is
    page-aligned. Correct for ``page_size == 1`` too (every step opens a page). Equal to
    ``num_new_pages(seq_len - 1, seq_len, page_size) == 1``.

    pre: 1 <= seq_len <= MAX_CHECKED
    pre: 1 <= page_size <= 256
    post: __return__ == (num_new_pages(seq_len - 1, seq_len, page_size) == 1)
    """
    return (seq_len - 1) % page_size == 0


def last_loc_aligned(prefix_len: int, last_loc: int, page_size: int) -> bool:
    """The ``alloc_extend`` precondition on ``last_loc`` (``EXTEND-3``).

    ``last_loc`` is the slot of position ``prefix_len - 1``, or ``-1`` when the prefix is empty;
    the slot after it must sit at the same in-page offset as position ``prefix_len``.

    pre: 0 <= prefix_len <= MAX_CHECKED
    pre: -1 <= last_loc <= MAX_CHECKED
    pre: 1 <= page_size <= 256
    post: __return__ == ((last_loc == -1) == (prefix_len == 0) and (last_loc + 1) % page_size == prefix_len % page_size)
    """
    if (last_loc == -1) != (prefix_len == 0):
        return False
    return (last_loc + 1) % page_size == prefix_len % page_size


def extend_row(
    prefix_len: int, seq_len: int, last_loc: int, new_pages: Sequence[int], page_size: int
) -> list[int]:
    """Slots for positions ``[prefix_len, seq_len)`` of one request (``EXTEND-5``).

    Part 1 continues ``last_loc`` slot by slot; every later position ``p`` goes to
    ``new_pages[k] * page_size + p % page_size`` where ``k`` counts the new logical pages before
    ``p``'s. ``new_pages`` must hold exactly ``num_new_pages(...)`` pages; the row layout
    ``out[k] % ps == (prefix_len + k) % ps`` follows when ``last_loc`` is aligned.

    pre: 0 <= prefix_len <= seq_len <= 48
    pre: 1 <= page_size <= 16
    pre: len(new_pages) == num_new_pages(prefix_len, seq_len, page_size)
    pre: len(set(new_pages)) == len(new_pages)
    pre: prefix_len % page_size == 0 or last_loc // page_size not in new_pages
    pre: -1 <= last_loc <= MAX_CHECKED
    pre: last_loc_aligned(prefix_len, last_loc, page_size)
    post: len(__return__) == seq_len - prefix_len
    post: all(s % page_size == (prefix_len + k) % page_size for k, s in enumerate(__return__))
    post: all(__return__[k] == last_loc + 1 + k for k in range(min(seq_len, ceil_div(prefix_len, page_size) * page_size) - prefix_len))
    post: all((a // page_size == b // page_size) == ((prefix_len + j) // page_size == (prefix_len + k) // page_size) for j, a in enumerate(__return__) for k, b in enumerate(__return__))
    post: len(set(__return__)) == len(__return__)
    """
    first_new_page = ceil_div(prefix_len, page_size)  # logical index of the first new page
    out: list[int] = []
    for pos in range(prefix_len, seq_len):
        if pos < first_new_page * page_size:
            out.append(last_loc + 1 + (pos - prefix_len))
        else:
            out.append(new_pages[pos // page_size - first_new_page] * page_size + pos % page_size)
    return out


def page_slots(pages: Sequence[int], page_size: int) -> list[int]:
    """Every slot of ``pages``, page after page, offsets ascending (``ALLOC-4``).

    Slot ``page * page_size + offset`` lies on ``page`` at ``offset`` (``MODEL-2``).

    pre: len(pages) <= 64
    pre: 1 <= page_size <= 16
    post: len(__return__) == len(pages) * page_size
    post: all(__return__[i] // page_size == pages[i // page_size] for i in range(len(__return__)))
    post: all(s % page_size == i % page_size for i, s in enumerate(__return__))
    post: len(set(__return__)) == len(set(pages)) * page_size
    """
    return [page * page_size + offset for page in pages for offset in range(page_size)]
