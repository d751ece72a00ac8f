"""Causes of a free-list mismatch beyond :mod:`.attribution`'s: merges and free-list changes.

The census (``get_all_free_pages()``, ``available_size()``) agreed with the spec before every
call, so a difference in the free list right after a call that changed it is that call's:

- a merge of the staged pages into the free list (``need_sort``), explicit
  (``merge_and_sort_free``) or inside an allocation, that drops, repeats or invents a page
  breaks SORT-3 (:func:`attribute_change`); an allocation that returned None after a merge
  lost staged pages breaks SORT-3 too, its shortage clause the symptom
  (:func:`short_after_merge`);
- a free that changes pages beyond the ones its slots touch (a freed page coalesced into a
  neighbour's run, a neighbour lost) breaks its release rule (FREE-4, SEG-2, SEG-5, FREE-8;
  GROUP-5 inside an open group).

:func:`explain` tries every rule in order; a mismatch after any other call (or a page listed
outside the pool, INV-3) stays an invariant failure. Nothing here raises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvpool.spec.wording import noun

from .attribution import (
    RELEASE_CLAUSE,
    SHORTAGE_CLAUSE,
    Step,
    attribute,
    attribute_group_end,
    freed_pages,
    outside_pool,
    seen_text,
)

# Calls that merge the staged pages into the free list (SORT-2, SORT-3).
MERGE_CALLS = ("alloc", "alloc_extend", "alloc_decode", "merge_and_sort_free")
# Each allocation's "short of free pages: merge the staged ones first" rule.
MERGE_RULE = {"alloc": "ALLOC-5", "alloc_extend": "EXTEND-7", "alloc_decode": "DECODE-7"}


def attribute_change(
    call: str, args: Mapping[str, Any], *, page_size: int, extra: Sequence[int],
    lacking: Sequence[int], group_open: bool, merged: Sequence[int] = (),
) -> tuple[str, str] | None:
    """``(clause, detail)`` for a free-list difference that :func:`attribute` leaves alone,
    right after a call that changed the free list, else None (only ``available_size()`` off,
    or a call that changes no free list: its invariant stays the report).

    ``merged``: the pages the spec had staged before the call and merged during it (empty when
    no merge ran). A merge is the cause when the call is ``merge_and_sort_free`` or every
    differing page was one it merged (SORT-3); a free (FREE-4, SEG-2, SEG-5, FREE-8; GROUP-5
    inside an open group) when the call is one.
    """
    differing = {*extra, *lacking}
    if not differing:
        return None
    seen = seen_text(extra, lacking, 0)
    if call == "merge_and_sort_free" or (merged and differing <= {int(p) for p in merged}):
        where = "merge_and_sort_free()" if call == "merge_and_sort_free" else (
            f"the merge of the staged pages inside {call}")
        return "SORT-3", (
            f"{where} did not leave free = sorted(free + staged) "
            f"({noun(len(merged), 'staged page')} {sorted(merged)}): {seen}"
        )
    if call not in RELEASE_CLAUSE:
        return None
    touched = sorted(freed_pages(call, args, page_size))
    beyond = f"{call} of {noun(len(touched), 'page')} {touched} changed the free list beyond them"
    if group_open:
        return "GROUP-5", f"{beyond} inside an open free group: {seen}"
    return RELEASE_CLAUSE[call], (
        f"{beyond} (a freed page coalesced into a neighbour's run, or a neighbour lost): {seen}"
    )


def explain(
    steps: Sequence[Step],
    *,
    page_size: int,
    num_pages: int,
    extra: Sequence[int],
    lacking: Sequence[int],
    group_open: bool,
    available_delta: int,
    shortage: bool,
    handed_out: Sequence[int],
    merged: Sequence[int],
) -> tuple[str, str] | None:
    """The cause of a census mismatch right after ``steps[-1]``, in this order: a merge that
    ran in it (:func:`attribute_change`), the call's own rule (:func:`attribute`), the group
    a ``free_group_end`` closes (:func:`attribute_group_end`), a page outside the pool
    (:func:`outside_pool`), any other change by a merge or a free; None: no call explains it."""
    step = steps[-1]
    merged = merged if step.call in MERGE_CALLS else ()  # clear() and resize() empty it too
    common: dict[str, Any] = {"page_size": page_size, "extra": extra, "lacking": lacking}
    call, args = eviction_as_free(step)
    return (
        (attribute_change(step.call, step.args, group_open=group_open, merged=merged, **common)
         if merged else None)
        or attribute(call, args, group_open=group_open, available_delta=available_delta,
                     shortage=shortage, handed_out=handed_out, **common)
        or (attribute_group_end(steps, available_delta=available_delta, **common)
            if step.call == "free_group_end" else None)
        or outside_pool(extra, num_pages)
        or attribute_change(step.call, step.args, group_open=group_open, **common)
    )


def skipped_merge(steps: Sequence[Any], staged_before: Sequence[int],
                  free: Sequence[int]) -> tuple[str, str] | None:
    """The merge rule of an allocation (``steps[-1]``, exact order) the spec answered with None
    after merging its staged pages ``staged_before``, where the target left
    ``get_all_free_pages()`` as it was before the call (``free``): it returned None without the
    merge (ALLOC-5, EXTEND-7, DECODE-7; the order clause the symptom). None otherwise."""
    step = steps[-1]
    if step.call not in MERGE_RULE or step.expect is not None or not staged_before:
        return None
    before = next((s.free_after for s in reversed(steps[:-1]) if s.free_after is not None), None)
    if before is None or list(free) != list(before):
        return None
    return MERGE_RULE[step.call], (
        f"{step.call} returned None without merging the staged "
        f"{noun(len(staged_before), 'page')} {sorted(staged_before)} first: "
        f"get_all_free_pages() is {list(free)}, as before the call (the cause; the symptom: "
        f"the free order, SORT-2)"
    )


def eviction_as_free(step: Step) -> tuple[str, Mapping[str, Any]]:
    """A capacity hook that evicted cache entries (``step.evicted``, the count both sides
    agreed on) as the ``free`` of those entries' slots, which is how the cache releases them
    (FREE-4); any other step as it is."""
    evicted = getattr(step, "evicted", None)
    if step.call not in ("evict_to_free_tokens", "check_decode_capacity") or not evicted:
        return step.call, step.args
    entries = step.args["entries"][:evicted]
    return "free", {"free_index": [s for entry in entries for s in entry]}


def short_after_merge(
    call: str, clause: str, detail: str, merged: Sequence[int], target_free: Sequence[int]
) -> tuple[str, str] | None:
    """SORT-3 when an allocation that merged the staged pages ``merged`` returned None where the
    spec has pages (its shortage ``clause``, the symptom) and the target lists some of those
    pages as free no more: the merge lost them. None otherwise."""
    if clause != SHORTAGE_CLAUSE.get(call) or not detail.startswith("returned None"):
        return None
    listed = {int(p) for p in target_free}
    lost = sorted({int(p) for p in merged} - listed)
    if not lost:
        return None
    return "SORT-3", (
        f"the merge of the staged pages inside {call} lost {noun(len(lost), 'page')} {lost}: "
        f"neither handed out nor listed free (the cause; the symptom: [{clause}] {detail})"
    )
