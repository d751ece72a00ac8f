"""The page-interleave family's coverage events and clause map: the situations a run reaches,
counted by the executor after each call's checks passed, and which ``PINTER-*`` clause each
exercises (``bad.<kind>``: a call the spec rejects, counted for its clause and ``ERR-1``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvpool.spec.page_interleave import class_counts, least_full_class, start_class

from ...engine.clausemap import ClauseMap
from ...engine.events import Needs, event_rows, event_table

_NEEDS: dict[str, Needs] = {
    "sorted": lambda c, ps, ns: ns,
    "unsorted": lambda c, ps, ns: not ns,
    "groups": lambda c, ps, ns: bool(c.groups),
    "merge": lambda c, ps, ns: bool(c.merge),
}
_ROWS = event_rows("""
create           PINTER-1   always         a fresh pool: class r lists N+r, 2N+r, ..
census           PINTER-2   always         class lists, counts, capacity views read after a call
floor.skewed     PINTER-3   always         available_size() below the aggregate (classes unequal)
floor.zero       PINTER-3   always         some class empty: available_size() is 0
base.new         PINTER-4   always         a new chain drew its base from the least-full class
base.tie         PINTER-4   always         ... with several classes tied for the most free pages
base.batch       PINTER-4   always         ... after an earlier request of the same batch drew
chain.new        PINTER-5   always         a new chain's pages cycle from its base
chain.given      PINTER-5   always         a new chain with a base the caller named
chain.extend     PINTER-5   always         an extension continued its chain's phase
chain.cyclic     PINTER-5   always         alloc_cyclic placed one chain
chain.partial    PINTER-5   paged          a chain ending inside its last page
short            PINTER-6   always         an extension some class could not supply (None)
short.batch      PINTER-6   always         ... a batch refused whole though its first request fit
balance.wrap     PINTER-7   always         a chain of more than N pages (its owners wrap)
free.whole       PINTER-8   always         a free outside a group (pages to their lists' front)
free.some_slots  PINTER-8   paged          a free naming some slots of a page (the page freed whole)
free.classes     PINTER-8   always         one free of pages of several classes
free.tail        PINTER-8   always         a chain's tail pages freed, the chain extended later
free.release     PINTER-8   sorted         freed pages waiting on the release lists (need_sort)
merge.auto       PINTER-9   sorted         an extension merged the release lists first
merge.call       PINTER-9   merge          merge_and_sort_free() called
group.begin      PINTER-10  groups         a free group opened
group.free       PINTER-10  groups         a free inside an open group (held until its end)
group.end        PINTER-10  groups         a group ended, its pages freed as one free
mirror.agree     PINTER-12  always         a mirrored rank's state equal to the target's
life.clear       PINTER-13  cap:clear      clear() mid-run
""", _NEEDS)
# bad-input kinds -> the call they go to and the clause the spec rejects each with
BAD_KIND_CALLS: dict[str, str] = {
    "double_free": "free", "reserved_page": "free", "out_of_range": "free",
    "group_twice": "free", "unaligned_prefix": "alloc_extend", "no_new_page": "alloc_extend",
    "nested_group": "free_group_begin",
}
BAD_CLAUSES: dict[str, str] = dict.fromkeys(BAD_KIND_CALLS, "PINTER-11")


def _bad_needs(kind: str) -> Needs:
    call = BAD_KIND_CALLS[kind]
    grouped = kind in ("group_twice", "nested_group")
    paged_only = kind == "unaligned_prefix"
    return lambda c, ps, ns: (c.checks(call) and (bool(c.groups) or not grouped)
                              and (ps > 1 or not paged_only))


EVENTS = event_table(_ROWS, {kind: _bad_needs(kind) for kind in BAD_CLAUSES})
CLAUSE_EVENTS: dict[str, tuple[str, ...]] = {}
for _name, _event in EVENTS.items():
    if not _name.startswith("bad."):
        CLAUSE_EVENTS.setdefault(_event.clause, ())
        CLAUSE_EVENTS[_event.clause] += (_name,)
PAGE_INTERLEAVE = ClauseMap(EVENTS, CLAUSE_EVENTS, BAD_CLAUSES)


def extend_events(requests: Sequence[Sequence[int]], bases: Sequence[int | None],
                  counts: list[int], shard_size: int, page_size: int) -> list[str]:
    """The events of one ``alloc_extend`` batch the spec answered, by its requests and the
    class counts before it."""
    out, sim = [], list(counts)
    for i, ((prefix, seq), base) in enumerate(zip(requests, bases)):
        opened = -(-seq // page_size) - prefix // page_size
        if base is None:
            out.append("base.new")
            out += ["base.tie"] if sim.count(max(sim)) > 1 else []
            out += ["base.batch"] if i > 0 else []
            base = least_full_class(sim)
        out.append("chain.extend" if prefix else "chain.new" if bases[i] is None
                   else "chain.given")
        out += ["chain.partial"] if seq % page_size else []
        out += ["balance.wrap"] if opened > shard_size else []
        sim = [s - k for s, k in zip(sim, class_counts(start_class(base, prefix // page_size,
                                                                   shard_size),
                                                       opened, shard_size))]
    return out


def census_events(counts: list[int], page_size: int) -> list[str]:
    """``census`` and the floor's situations after a call."""
    out = ["census", "mirror.agree"]
    out += ["floor.skewed"] if min(counts) < max(counts) else []
    out += ["floor.zero"] if min(counts) == 0 else []
    return out


def free_events(slots: Sequence[int], page_size: int, shard_size: int, grouped: bool,
                need_sort: bool) -> list[str]:
    """The events of a free the spec accepted."""
    pages = {s // page_size for s in slots}
    out = ["group.free" if grouped else "free.whole"]
    covered = {s for s in slots}
    if any(any(p * page_size + k not in covered for k in range(page_size)) for p in pages):
        out.append("free.some_slots")
    if len({p % shard_size for p in pages}) > 1:
        out.append("free.classes")
    if need_sort and not grouped and pages:
        out.append("free.release")
    return out


def events_of(call: str, args: Any, result: Any, rule: str) -> list[str]:
    """The events of a call by its kind alone."""
    simple = {"create": "create", "clear": "life.clear", "free_group_begin": "group.begin",
              "free_group_end": "group.end", "merge_and_sort_free": "merge.call"}
    out = [simple[call]] if call in simple else []
    if call == "alloc_cyclic" and result is not None and result["slots"] is not None:
        out.append("chain.cyclic")
    if call in ("alloc_extend", "alloc_cyclic") and rule == "PINTER-9":
        out.append("merge.auto")
    return out
