"""Which clause explains a census or ``available_size()`` mismatch seen right after a free.

The oracle compares the free census and ``available_size()`` after every call (INV-1, INV-2,
INV-4). When the mismatch appears right after a free whose own rule covers exactly the pages
that differ, that rule is the better report: a paged ``free`` that releases a page once per
slot breaks FREE-4 (each page once), a ``free_segments`` that releases a shared boundary page
twice (or never) breaks SEG-5, and a free inside an open group that changes the free pages at
once breaks GROUP-5. At ``free_group_end`` the group's deferred frees are the calls whose rules
explain it (:func:`attribute_group_end`): a shared boundary page of a deferred
``free_segments`` (SEG-5), a page named by several frees of the group (GROUP-6), a group that
released what the caller wrote into the tensors it passed (the padding page 0, or nothing of
the pages those frees named: GROUP-3), or a deferred free's own rule. The report then names that
clause as the cause and the census clause as the symptom. A mismatch on pages no call touched
stays an invariant failure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kvpool.spec import AllocatorModel
from kvpool.spec.contract import Divergence, check_census

# The clause of each free call's "release exactly the touched pages, each once" rule.
RELEASE_CLAUSE = {
    "free": "FREE-4",
    "free_full": "FREE-4",
    "free_segment": "SEG-2",
    "free_segments": "SEG-5",
    "free_page_ids": "FREE-8",
}


class Step(Protocol):
    """What attribution reads of a trace step."""

    call: str
    args: dict[str, Any]
    clobber: bool


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


def _covers(differing: set[int], delta_pages: int, pages: set[int]) -> bool:
    """Whether ``pages`` can explain the mismatch: the differing pages lie among them, or (the
    free lists agree, ``available_size()`` does not) no more pages are off than they hold."""
    if differing:
        return differing <= pages
    return 0 < abs(delta_pages) <= len(pages)


def _seen(extra: Sequence[int], lacking: Sequence[int], delta_pages: int) -> str:
    parts = [
        f"the target also lists {sorted(extra)} as free" if extra else "",
        f"the target does not list {sorted(lacking)} as free" if lacking else "",
    ]
    if not extra and not lacking:
        parts.append(f"available_size() counts {delta_pages:+d} page(s) the free list does not")
    return " and ".join(p for p in parts if p)


def _delta_pages(available_delta: int, page_size: int) -> int:
    return available_delta // page_size if available_delta % page_size == 0 else 0


def attribute(
    call: str,
    args: Mapping[str, Any],
    *,
    page_size: int,
    extra: Sequence[int],
    lacking: Sequence[int],
    group_open: bool,
    available_delta: int = 0,
) -> tuple[str, str] | None:
    """``(clause, detail)`` when the call's own rule explains the mismatch, else None.

    ``extra``: pages the target lists free beyond the spec (with repeats); ``lacking``: pages
    the spec lists free that the target does not; ``available_delta``: the target's
    ``available_size()`` minus the spec's (used when the free lists agree).
    """
    if call not in RELEASE_CLAUSE:
        return None
    differing, delta = {*extra, *lacking}, _delta_pages(available_delta, page_size)
    if not _covers(differing, delta, touched_pages(call, args, page_size)):
        return None
    seen = _seen(extra, lacking, delta)
    if group_open:
        return "GROUP-5", f"{call} inside an open free group changed the free pages: {seen}"
    clause = RELEASE_CLAUSE[call]
    segments = _segments(call, args) if call == "free_segments" else []
    boundary = boundary_pages(segments, page_size)
    if boundary and _covers(differing, delta, boundary):
        twice = extra or delta > 0
        return clause, (
            f"free_segments released the shared boundary page(s) "
            f"{sorted(differing or boundary)} {'more than once' if twice else 'never'}: {seen}"
        )
    return clause, f"{call} did not release each page its slots touch exactly once: {seen}"


def group_frees(steps: Sequence[Step]) -> list[Step] | None:
    """The frees deferred by the group that the last step (a ``free_group_end``) closes; None
    when no group was open (none begun, or the last ``free_group_begin`` already ended)."""
    out: list[Step] = []
    for step in reversed(steps[:-1]):
        if step.call == "free_group_end":
            return None
        if step.call == "free_group_begin":
            return out[::-1]
        if step.call in RELEASE_CLAUSE:
            out.append(step)
    return None


def attribute_group_end(
    steps: Sequence[Step],
    *,
    page_size: int,
    extra: Sequence[int],
    lacking: Sequence[int],
    available_delta: int = 0,
) -> tuple[str, str] | None:
    """``(clause, detail)`` when the group that ``steps[-1]`` (a ``free_group_end``) closes, or
    its deferred frees, explain the mismatch, else None."""
    frees = group_frees(steps)
    differing, delta = {*extra, *lacking}, _delta_pages(available_delta, page_size)
    if not differing and not delta:
        return None
    seen = _seen(extra, lacking, delta)
    if frees is None:
        return "GROUP-2", f"free_group_end with no open group changed the free pages: {seen}"
    per_free = [touched_pages(s.call, s.args, page_size) for s in frees]
    touched: set[int] = set().union(*per_free)
    clobbered: set[int] = set().union(*(p for s, p in zip(frees, per_free) if s.clobber))
    boundary: set[int] = set().union(
        *(boundary_pages(_segments(s.call, s.args), page_size)
          for s in frees if s.call == "free_segments")
    )
    if boundary and _covers(differing, delta, boundary):
        twice = extra or delta > 0
        return "SEG-5", (
            f"free_group_end released the shared boundary page(s) {sorted(differing or boundary)}"
            f" of a deferred free_segments {'more than once' if twice else 'never'}: {seen}"
        )
    if clobbered and (0 in extra or (lacking and set(lacking) <= clobbered)):
        return "GROUP-3", (
            "free_group_end released what the caller wrote into the tensors it passed to the "
            f"group's frees (zeros: page 0), not what they held: {seen}"
        )
    named = Counter(p for pages in per_free for p in pages)
    repeated = {p for p, n in named.items() if n > 1}
    if (extra and set(extra) <= repeated) or (not differing and 0 < delta <= len(repeated)):
        return "GROUP-6", (
            f"free_group_end released page(s) {sorted(set(extra) or repeated)} once per free "
            f"of the group that named them, not once: {seen}"
        )
    if frees and _covers(differing, delta, touched):
        owner = next((s for s, p in zip(frees, per_free) if differing & p), frees[0])
        return RELEASE_CLAUSE[owner.call], (
            f"free_group_end did not release each page the group's frees touch exactly once "
            f"(the deferred {owner.call}'s rule): {seen}"
        )
    return None


def census_clause(model: AllocatorModel, free: Sequence[int], available: int) -> str:
    """The census clause a mismatch breaks (the symptom a cause above explains)."""
    try:
        check_census(model, free, available)
    except Divergence as d:
        return str(d.clause)
    return "INV-1"
