"""Which clause explains a census or ``available_size()`` mismatch seen right after a free.

The oracle compares the free census and ``available_size()`` after every call (INV-1, INV-2,
INV-4). When the mismatch appears right after a free whose own rule covers exactly the pages
that differ, that rule is the better report: a paged ``free`` that releases a page once per
slot breaks FREE-4 (each page once), a ``free_segments`` that releases a shared boundary page
twice (or never) breaks SEG-5, and a free inside an open group that changes the free pages at
once breaks GROUP-5. A mismatch on pages the call did not touch stays an invariant failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# The clause of each free call's "release exactly the touched pages, each once" rule.
RELEASE_CLAUSE = {
    "free": "FREE-4",
    "free_full": "FREE-4",
    "free_segment": "SEG-2",
    "free_segments": "SEG-5",
    "free_page_ids": "FREE-8",
}


def _segments(call: str, args: Mapping[str, Any]) -> list[tuple[Sequence[int], int]]:
    if call == "free_segments":
        return [(idx, start) for idx, start in args["segments"]]
    return [(args["free_index"], int(args.get("start_pos", 0)))]


def touched_pages(call: str, args: Mapping[str, Any], page_size: int) -> set[int]:
    """The pages a free call's slots lie on (``free_page_ids``: the pages it names)."""
    if call == "free_page_ids":
        return {int(p) for p in args["page_ids"]}
    return {int(s) // page_size for idx, _ in _segments(call, args) for s in idx}


def boundary_pages(segments: Sequence[tuple[Sequence[int], int]], page_size: int) -> set[int]:
    """Pages on which one non-empty segment ends and the next non-empty one starts."""
    out, prev_last = set(), None
    for idx, _ in segments:
        if not idx:
            continue
        if prev_last is not None and int(idx[0]) // page_size == prev_last:
            out.add(prev_last)
        prev_last = int(idx[-1]) // page_size
    return out


def attribute(
    call: str,
    args: Mapping[str, Any],
    *,
    page_size: int,
    extra: Sequence[int],
    lacking: Sequence[int],
    group_open: bool,
) -> tuple[str, str] | None:
    """``(clause, detail)`` when the call's own rule explains the differing pages, else None.

    ``extra``: pages the target lists free beyond the spec (with repeats); ``lacking``: pages
    the spec lists free that the target does not.
    """
    if call not in RELEASE_CLAUSE:
        return None
    differing = {*extra, *lacking}
    if not differing or not differing <= touched_pages(call, args, page_size):
        return None
    seen = " and ".join(
        part
        for part in (
            f"the target also lists {sorted(extra)} as free" if extra else "",
            f"the target does not list {sorted(lacking)} as free" if lacking else "",
        )
        if part
    )
    if group_open:
        return "GROUP-5", f"{call} inside an open free group changed the free pages: {seen}"
    clause = RELEASE_CLAUSE[call]
    if call == "free_segments" and differing <= boundary_pages(_segments(call, args), page_size):
        return clause, (
            f"free_segments released the shared boundary page(s) {sorted(differing)} "
            f"{'more than once' if extra else 'never'}: {seen}"
        )
    return clause, f"{call} did not release each page its slots touch exactly once: {seen}"
