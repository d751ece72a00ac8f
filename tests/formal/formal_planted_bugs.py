# ruff: noqa: E501  (contract lines are copied verbatim from the spec)
"""Deliberately wrong variants of spec functions, each with the real function's contract.

``test_formal_crosshair_bites.py`` runs ``crosshair check`` on each variant and expects a
counterexample; it also checks that every variant's ``pre:``/``post:`` lines are the real
function's, word for word. The alloc decision has no pure function in the spec (it lives in
``AllocatorModel._lay_out``), so ``extend_decision`` models it here and a test ties it to the
model. The ``reps_*`` / ``new_pages_*`` wrappers feed ``crosshair diffbehavior``: they build
only valid inputs and raise ``IgnoreAttempt`` otherwise (diffbehavior ignores preconditions).
"""

from __future__ import annotations

from collections.abc import Sequence

from crosshair import IgnoreAttempt
from kvpool.spec import segments
from kvpool.spec.layout import MAX_CHECKED, merge_bound, num_new_pages
from kvpool.spec.segments import rep_offsets, segment_pages

__all__ = ["MAX_CHECKED"]  # a name the copied contracts use


def two_segments_pages(start0: int, n0: int, start1: int, n1: int, page_size: int) -> list[int]:
    """``segments.segments_pages`` on two segments ``[start0, start0 + n0)``, ``[start1, ...)``
    of a row whose slots are the positions (SEG-5): every page touched, exactly once.

    Integer arguments only: on nested lists CrossHair found neither planted segment bug in
    40 s per condition here, on five ints it finds both in about 2 s.

    pre: 1 <= page_size <= 8
    pre: 0 <= start0 and 0 <= n0 <= 16 and start0 + n0 <= start1 <= 64 and 0 <= n1 <= 16
    post: sorted(__return__) == sorted({(s + k) // page_size for s, n in ((start0, n0), (start1, n1)) for k in range(n)})
    """
    return segments.segments_pages(
        [(list(range(s, s + n)), s) for s, n in ((start0, n0), (start1, n1))], page_size
    )


def two_segments_pages_boundary_off_by_one(start0: int, n0: int, start1: int, n1: int,
                                           page_size: int) -> list[int]:
    """Bug: compares the start's page with ``prev_end // ps`` (one past the previous end).

    pre: 1 <= page_size <= 8
    pre: 0 <= start0 and 0 <= n0 <= 16 and start0 + n0 <= start1 <= 64 and 0 <= n1 <= 16
    post: sorted(__return__) == sorted({(s + k) // page_size for s, n in ((start0, n0), (start1, n1)) for k in range(n)})
    """
    pages: list[int] = []
    prev_end: int | None = None
    for s, n in ((start0, n0), (start1, n1)):
        if n == 0:
            continue
        trim = 0
        if prev_end is not None and s // page_size == prev_end // page_size:
            trim = min(n, (s // page_size + 1) * page_size - s)
        prev_end = s + n
        pages.extend(segment_pages(list(range(s + trim, s + n)), s + trim, page_size))
    return pages


def two_segments_pages_no_dedup(start0: int, n0: int, start1: int, n1: int,
                                page_size: int) -> list[int]:
    """Bug: the boundary trim forgotten (SGLang B17b).

    pre: 1 <= page_size <= 8
    pre: 0 <= start0 and 0 <= n0 <= 16 and start0 + n0 <= start1 <= 64 and 0 <= n1 <= 16
    post: sorted(__return__) == sorted({(s + k) // page_size for s, n in ((start0, n0), (start1, n1)) for k in range(n)})
    """
    pages: list[int] = []
    for s, n in ((start0, n0), (start1, n1)):
        pages.extend(segment_pages(list(range(s, s + n)), s, page_size))
    return pages


def num_new_pages_floor(prefix_len: int, seq_len: int, page_size: int) -> int:
    """Bug: floor instead of ceil in the page count.

    pre: 0 <= prefix_len <= seq_len <= MAX_CHECKED
    pre: 1 <= page_size <= 256
    post: __return__ >= 0
    post: __return__ * page_size >= seq_len - prefix_len - page_size + 1
    post: __return__ * page_size <= seq_len - prefix_len + page_size - 1
    post: (__return__ == 0) == (seq_len == prefix_len or prefix_len % page_size + (seq_len - prefix_len) <= page_size and prefix_len % page_size != 0)
    """
    return seq_len // page_size - prefix_len // page_size


def extend_decision(
    prefix_lens: Sequence[int], seq_lens: Sequence[int], num_free: int, num_staged: int,
    page_size: int,
) -> tuple[int, int] | None:
    """``alloc_extend``'s decision (EXTEND-6, EXTEND-7, SORT-2): merge the staged pages when
    ``merge_bound`` exceeds the free list, then None iff the new pages exceed the free list.

    Returns ``(free, staged)`` page counts after the call, or None.

    pre: len(seq_lens) == len(prefix_lens) <= 4
    pre: all(0 <= p <= s <= 32 for p, s in zip(prefix_lens, seq_lens))
    pre: 0 <= num_free <= 16 and 0 <= num_staged <= 16
    pre: 1 <= page_size <= 16
    post: (__return__ is None) == (sum(num_new_pages(p, s, page_size) for p, s in zip(prefix_lens, seq_lens)) > num_free + num_staged)
    post: __return__ is None or sum(__return__) == num_free + num_staged - sum(num_new_pages(p, s, page_size) for p, s in zip(prefix_lens, seq_lens))
    post: __return__ is None or min(__return__) >= 0
    """
    needed = sum(num_new_pages(p, s, page_size) for p, s in zip(prefix_lens, seq_lens))
    extend_tokens = sum(seq_lens) - sum(prefix_lens)
    if merge_bound(extend_tokens, len(seq_lens), page_size) > num_free:
        num_free, num_staged = num_free + num_staged, 0
    if needed > num_free:
        return None
    return num_free - needed, num_staged


def extend_decision_merge_skipped(
    prefix_lens: Sequence[int], seq_lens: Sequence[int], num_free: int, num_staged: int,
    page_size: int,
) -> tuple[int, int] | None:
    """Bug: the None decision before the merge (SGLang B16).

    pre: len(seq_lens) == len(prefix_lens) <= 4
    pre: all(0 <= p <= s <= 32 for p, s in zip(prefix_lens, seq_lens))
    pre: 0 <= num_free <= 16 and 0 <= num_staged <= 16
    pre: 1 <= page_size <= 16
    post: (__return__ is None) == (sum(num_new_pages(p, s, page_size) for p, s in zip(prefix_lens, seq_lens)) > num_free + num_staged)
    post: __return__ is None or sum(__return__) == num_free + num_staged - sum(num_new_pages(p, s, page_size) for p, s in zip(prefix_lens, seq_lens))
    post: __return__ is None or min(__return__) >= 0
    """
    needed = sum(num_new_pages(p, s, page_size) for p, s in zip(prefix_lens, seq_lens))
    if needed > num_free:
        return None
    extend_tokens = sum(seq_lens) - sum(prefix_lens)
    if merge_bound(extend_tokens, len(seq_lens), page_size) > num_free:
        num_free, num_staged = num_free + num_staged, 0
    return num_free - needed, num_staged


def _valid_segment(num_tokens: int, start_pos: int, page_size: int) -> None:
    if not (0 <= num_tokens <= 64 and 0 <= start_pos <= 64 and 1 <= page_size <= 16):
        raise IgnoreAttempt


def reps_pages(num_tokens: int, start_pos: int, page_size: int) -> list[int]:
    """Logical pages of the stride representatives (``segments.rep_offsets``)."""
    _valid_segment(num_tokens, start_pos, page_size)
    return [(start_pos + i) // page_size for i in rep_offsets(num_tokens, start_pos, page_size)]


def reps_pages_aligned_stride(num_tokens: int, start_pos: int, page_size: int) -> list[int]:
    """Bug: the aligned-start stride ``idx[::ps]`` on any start (SGLang B17a)."""
    _valid_segment(num_tokens, start_pos, page_size)
    return [(start_pos + i) // page_size for i in range(0, num_tokens, page_size)]


def touched_pages_brute(num_tokens: int, start_pos: int, page_size: int) -> list[int]:
    """Reference: the distinct pages of every token, ascending."""
    _valid_segment(num_tokens, start_pos, page_size)
    return sorted({(start_pos + k) // page_size for k in range(num_tokens)})


def new_pages_formula(prefix_len: int, seq_len: int, page_size: int) -> int:
    """``layout.num_new_pages`` on valid inputs."""
    if not (0 <= prefix_len <= seq_len <= 64 and 1 <= page_size <= 16):
        raise IgnoreAttempt
    return num_new_pages(prefix_len, seq_len, page_size)


def new_pages_floor(prefix_len: int, seq_len: int, page_size: int) -> int:
    """Bug: floor instead of ceil."""
    if not (0 <= prefix_len <= seq_len <= 64 and 1 <= page_size <= 16):
        raise IgnoreAttempt
    return seq_len // page_size - prefix_len // page_size


def new_pages_brute(prefix_len: int, seq_len: int, page_size: int) -> int:
    """Reference: logical pages touched by ``[prefix, seq)`` and not by ``[0, prefix)``."""
    if not (0 <= prefix_len <= seq_len <= 64 and 1 <= page_size <= 16):
        raise IgnoreAttempt
    old = {p // page_size for p in range(prefix_len)}
    return len({p // page_size for p in range(prefix_len, seq_len)} - old)

