"""Which clause explains a census or ``available_size()`` mismatch seen right after a call.

The oracle compares the free census and ``available_size()`` after every call (INV-1, INV-2,
INV-4). When the mismatch appears right after a call whose own rule covers exactly the pages
that differ, that rule is the better report: a paged ``free`` that releases a page once per
slot breaks FREE-4 (each page once), a ``free_segments`` that releases a shared boundary page
twice (or never) breaks SEG-5, a free inside an open group that changes the free pages at once
breaks GROUP-5, an allocation that is short (None) yet changed the free pages breaks its
shortage rule (ALLOC-3, EXTEND-6, DECODE-6), one whose pages stay free its result rule
(ALLOC-4, EXTEND-4, DECODE-4), and ``clear()`` / ``resize()`` define the whole census (LIFE-1,
LIFE-2). At ``free_group_end`` the group's deferred frees
are the calls whose rules explain it (:func:`attribute_group_end`): a shared boundary page of
a deferred ``free_segments`` (SEG-5), a page named by several frees of the group (GROUP-6), a
group that released what the caller wrote into the tensors it passed (the padding page 0, or a
raise at the end: GROUP-3), or a deferred free's own rule. The report then names that clause
as the cause and the census clause as the symptom. A merge, and a free that changes pages
beyond the ones it touches, are attributed in :mod:`.causes`, which also orders these rules.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kvpool.spec import AllocatorModel
from kvpool.spec.contract import Divergence, check_census
from kvpool.spec.wording import noun

# The clause of each free call's "release exactly the touched pages, each once" rule.
RELEASE_CLAUSE = {
    "free": "FREE-4",
    "free_full": "FREE-4",  # exactly free(x) (FREE-7): one call cannot tell which rule broke
    "free_segment": "SEG-2",
    "free_segments": "SEG-5",
    "free_page_ids": "FREE-8",
}


class Step(Protocol):
    """What attribution reads of a trace step."""

    call: str
    args: dict[str, Any]
    clobber: bool
    raised: str | None


# The clause of each allocation's "a shortage returns None and changes nothing" rule, and of
# its "the result's pages were free and are now owned" rule.
SHORTAGE_CLAUSE = {"alloc": "ALLOC-3", "alloc_extend": "EXTEND-6", "alloc_decode": "DECODE-6"}
RESULT_CLAUSE = {"alloc": "ALLOC-4", "alloc_extend": "EXTEND-4", "alloc_decode": "DECODE-4"}
# Calls that rebuild the whole census: any mismatch right after one is its rule's (a new pool:
# only a wrong size, ``available_size()`` off, is the constructor's MODEL-1).
RESET_CLAUSE = {"clear": "LIFE-1", "resize": "LIFE-2", "create": "MODEL-1"}


def _segments(call: str, args: Mapping[str, Any]) -> list[tuple[Sequence[int], int]]:
    if call == "free_segments":
        return [(idx, start) for idx, start in args["segments"]]
    return [(args["free_index"], int(args.get("start_pos", 0)))]


def freed_pages(call: str, args: Mapping[str, Any], page_size: int) -> set[int]:
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


def seen_text(extra: Sequence[int], lacking: Sequence[int], delta_pages: int) -> str:
    parts = [
        f"the target also lists {sorted(extra)} as free" if extra else "",
        f"the target does not list {sorted(lacking)} as free" if lacking else "",
    ]
    if not extra and not lacking:
        pages = noun(abs(delta_pages), "page")
        parts.append(f"available_size() counts {delta_pages:+d} {pages} the free list does not")
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
    shortage: bool = False,
    handed_out: Sequence[int] = (),
) -> tuple[str, str] | None:
    """``(clause, detail)`` when the call's own rule explains the mismatch, else None.

    ``extra``: pages the target lists free beyond the spec (with repeats); ``lacking``: pages
    the spec lists free that the target does not; ``available_delta``: the target's
    ``available_size()`` minus the spec's (used when the free lists agree); ``shortage``: the
    spec's answer to an allocation was None (a shortage, which changes nothing);
    ``handed_out``: the slots an allocation returned (its pages must have left the free list).
    """
    differing, delta = {*extra, *lacking}, _delta_pages(available_delta, page_size)
    if call in SHORTAGE_CLAUSE and shortage and (differing or available_delta):
        return SHORTAGE_CLAUSE[call], (
            f"{call} was short (its answer is None) yet the free pages changed: "
            f"{seen_text(extra, lacking, delta) or f'available_size() is off by {available_delta}'}"
        )
    if call in RESET_CLAUSE and (differing or available_delta) and (
        call != "create" or available_delta
    ):
        return RESET_CLAUSE[call], (
            f"{call}() left a census other than the one it defines: "
            f"{seen_text(extra, lacking, delta) or f'available_size() is off by {available_delta}'}"
        )
    result_pages = {int(slot) // page_size for slot in handed_out}
    if call in RESULT_CLAUSE and not shortage and differing and differing <= result_pages:
        return RESULT_CLAUSE[call], (
            f"{call} handed out {noun(len(differing), 'page')} {sorted(differing)} that the target "
            "still counts as "
            f"free: {seen_text(extra, lacking, delta)}"
        )
    if call not in RELEASE_CLAUSE:
        return None
    if not _covers(differing, delta, freed_pages(call, args, page_size)):
        return None
    seen = seen_text(extra, lacking, delta)
    if group_open:
        return "GROUP-5", f"{call} inside an open free group changed the free pages: {seen}"
    clause = RELEASE_CLAUSE[call]
    segments = _segments(call, args) if call == "free_segments" else []
    boundary = boundary_pages(segments, page_size)
    if boundary and _covers(differing, delta, boundary):
        twice = extra or delta > 0
        return clause, (
            f"free_segments released the shared boundary "
            f"{noun(len(differing or boundary), 'page')} {sorted(differing or boundary)} "
            f"{'more than once' if twice else 'never'}: {seen}"
        )
    return clause, f"{call} did not release each page its slots touch exactly once: {seen}"


@dataclass
class _CacheFree:
    """One tree-cache entry a capacity call may have freed (a ``free()`` of its slots)."""

    args: dict[str, Any]
    call: str = "free"
    clobber: bool = False
    raised: str | None = None


CACHE_CALLS = ("evict_to_free_tokens", "check_decode_capacity")


def group_frees(steps: Sequence[Step]) -> list[Step] | None:
    """The frees deferred by the group that the last step (a ``free_group_end``) closes (a
    capacity call counts as a ``free()`` of each cache entry it was given); None when no group
    was open (none begun, or the last ``free_group_begin`` already ended)."""
    out: list[Step] = []
    for step in reversed(steps[:-1]):
        if step.call == "free_group_end":
            return None
        if step.call == "free_group_begin":
            return out[::-1]
        if step.call in RELEASE_CLAUSE:
            out.append(step)
        elif step.call in CACHE_CALLS:
            entries = step.args.get("entries", [])
            out += [_CacheFree({"free_index": list(e)}) for e in reversed(entries)]
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
    seen = seen_text(extra, lacking, delta)
    if frees is None:
        return "GROUP-2", f"free_group_end with no open group changed the free pages: {seen}"
    per_free = [freed_pages(s.call, s.args, page_size) for s in frees]
    touched: set[int] = set().union(*per_free)
    clobbered: set[int] = set().union(*(p for s, p in zip(frees, per_free) if s.clobber))
    boundary: set[int] = set().union(
        *(boundary_pages(_segments(s.call, s.args), page_size)
          for s in frees if s.call == "free_segments")
    )
    if boundary and _covers(differing, delta, boundary):
        twice = extra or delta > 0
        return "SEG-5", (
            f"free_group_end released the shared boundary "
            f"{noun(len(differing or boundary), 'page')} {sorted(differing or boundary)}"
            f" of a deferred free_segments {'more than once' if twice else 'never'}: {seen}"
        )
    if clobbered and 0 in extra:
        return "GROUP-3", (
            "free_group_end released what the caller wrote into the tensors it passed to the "
            f"group's frees (zeros: page 0), not what they held: {seen}"
        )
    named = Counter(p for pages in per_free for p in pages)
    repeated = {p for p, n in named.items() if n > 1}
    if (extra and set(extra) <= repeated) or (not differing and 0 < delta <= len(repeated)):
        return "GROUP-6", (
            f"free_group_end released {noun(len(set(extra) or repeated), 'page')} "
            f"{sorted(set(extra) or repeated)} once per free "
            f"of the group that named them, not once: {seen}"
        )
    if frees and _covers(differing, delta, touched):
        owner = next((s for s, p in zip(frees, per_free) if differing & p), frees[0])
        return RELEASE_CLAUSE[owner.call], (
            f"free_group_end did not release each page the group's frees touch exactly once "
            f"(the deferred {owner.call}'s rule): {seen}"
        )
    return None


def outside_pool(extra: Sequence[int], num_pages: int) -> tuple[str, str] | None:
    """INV-3 when the target lists the padding page 0, or a page past the pool, as free."""
    bad = sorted({p for p in extra if not 1 <= p <= num_pages})
    if not bad:
        return None
    return "INV-3", (f"the target lists {noun(len(bad), 'page')} {bad} as free, outside pages "
                     f"1..{num_pages}")


def raise_cause(steps: Sequence[Step], clause: str, detail: str) -> tuple[str, str]:
    """The clause for a divergence at ``steps[-1]`` when that valid call raised: a ``free`` /
    ``free_full`` of no slot breaks "an empty free does nothing" (FREE-6), a ``free_segments``
    with an empty segment "empty segments are skipped" (SEG-6, unless what it raised names a
    clause of its own); a ``free_group_end`` with no
    open group is a no-op (GROUP-2), and one after the caller overwrote a deferred free's input
    read what the caller wrote (GROUP-3). Anything else keeps its clause."""
    step = steps[-1]
    raised = step.raised
    if raised is None:
        return clause, detail
    if step.call == "free_group_end":
        frees = group_frees(steps)
        if frees is None:
            return "GROUP-2", (
                f"free_group_end with no open group raised {raised}; it is a no-op ([{clause}])"
            )
        if any(s.clobber for s in frees):
            return "GROUP-3", (
                f"free_group_end raised {raised} after the caller overwrote the tensors it "
                f"passed to the group's frees: the group kept them, not their values ([{clause}])"
            )
        return clause, detail
    if step.call not in RELEASE_CLAUSE or step.call == "free_page_ids":
        return clause, detail
    segments = _segments(step.call, step.args)
    names_a_clause = re.search(r"\[[A-Z]+-\d+\]", raised) is not None  # a rejection's own rule
    if step.call == "free_segments" and any(not idx for idx, _ in segments) and not names_a_clause:
        return "SEG-6", (
            f"free_segments with an empty segment raised {raised}; empty segments are skipped "
            f"([{clause}])"
        )
    if freed_pages(step.call, step.args, 1):
        return clause, detail
    rule = "SEG-6" if step.call.startswith("free_segment") else "FREE-6"
    return rule, f"{step.call} of nothing raised {raised}; an empty free does nothing ([{clause}])"


def census_clause(model: AllocatorModel, free: Sequence[int], available: int) -> str:
    """The census clause a mismatch breaks (the symptom a cause above explains)."""
    try:
        check_census(model, free, available)
    except Divergence as d:
        return str(d.clause)
    return "INV-1"
