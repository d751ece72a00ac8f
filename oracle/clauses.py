"""Per-clause coverage: which SPEC.md clauses a run exercised, and which it was expected to.

A clause is *exercised* in a configuration when a check citing it ran on a case that could
violate it. Two sources count:

- a valid call of a named situation (``CLAUSE_EVENTS``: clause -> the coverage events of
  :mod:`kvpool.oracle.coverage` that are such cases; e.g. ``ALLOC-3`` counts the shortages, both
  kinds, because that is where "None iff short" can fail);
- a rejected bad call: the executor records the clause the spec raised (``rejected:<clause>``),
  which the target had to raise with its state unchanged, so it counts for that clause and for
  ``ERR-1``. ``BAD_CLAUSES`` names the clause each bad-input kind is built to break, which makes
  that clause *expected* wherever the kind can be sent.

Order clauses (``ORDER_CLAUSES``: SGLang's exact order) are checked only in an ``exact``
comparison, so a ``contract`` configuration neither exercises nor expects them. A clause is
*expected* in a configuration when one of its events can be reached there (the event's own
``needs``); ``--require-coverage`` fails a target whose expected clause stayed at zero in all of
its configurations. Clauses that no default run can exercise are listed, with the reason, in
:mod:`kvpool.oracle.unexercised`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .capabilities import Capabilities
from .clausemap import ClauseMap
from .coverage import EVENTS
from .unexercised import NOT_EXERCISED

__all__ = [
    "NOT_EXERCISED", "SINGLE", "ClauseMap", "TargetClauses", "exercised", "expected", "per_target",
    "report",
]

# clause -> events whose occurrence is a case that could violate it
CLAUSE_EVENTS: dict[str, tuple[str, ...]] = {
    "MODEL-1": ("life.ragged",),
    "MODEL-2": ("extend.part1", "extend.part3", "decode.page_continue"),
    "MODEL-3": ("free.staged", "group.page_in_pieces", "group.segments", "group.page_ids"),
    "MODEL-4": ("extend.part1", "decode.page_continue", "seg.mid_span"),
    "INV-1": ("alloc.ok", "free.many_pages", "extend.ok"),
    "INV-2": ("group.page_in_pieces", "seg.trim", "group.end_many"),
    "INV-3": ("life.ragged", "free.many_pages"),
    "INV-4": ("free.staged", "group.alloc_inside", "alloc.short_partial"),
    "ALLOC-2": ("alloc.zero",),
    "ALLOC-3": ("alloc.short_empty", "alloc.short_partial"),
    "ALLOC-4": ("alloc.ok",),
    "ALLOC-5": ("merge.alloc",),
    "EXTEND-4": ("extend.ok", "extend.many_pages", "extend.bs_9_32", "extend.bs_33_64"),
    "EXTEND-5": ("extend.part1", "extend.part3"),
    "EXTEND-6": ("extend.short_empty", "extend.short_partial"),
    "EXTEND-7": ("merge.extend",),
    "DECODE-4": ("decode.page_open",),
    "DECODE-5": ("decode.page_continue", "decode.ok"),
    "DECODE-6": ("decode.short_empty", "decode.short_partial"),
    "DECODE-7": ("merge.decode",),
    "FREE-4": ("free.many_pages",),
    "FREE-5": ("free.many_pages", "free.unordered"),
    "FREE-6": ("free.empty",),
    "FREE-7": ("free.full",),
    "FREE-8": ("free.page_ids",),
    "SEG-2": ("seg.single", "seg.mid_span"),
    "SEG-3": ("seg.many",),
    "SEG-5": ("seg.trim", "seg.inside"),
    "SEG-6": ("seg.empty",),
    "GROUP-2": ("group.end_idle",),
    "GROUP-3": ("group.input_reused",),
    "GROUP-4": ("group.end_many", "group.segments", "group.page_ids"),
    "GROUP-5": ("group.alloc_inside",),
    "GROUP-6": ("group.page_in_pieces",),
    "SORT-1": ("free.staged",),
    "SORT-2": ("merge.alloc", "merge.extend", "merge.decode"),
    "SORT-3": ("merge.explicit",),
    "CAP-1": ("cap.evict",),
    "CAP-2": ("cap.check_false",),
    "CAP-3": ("cap.byte_accounting",),
    "LIFE-1": ("life.clear", "life.clear_staged"),
    "LIFE-2": ("life.resize",),
    "LIFE-3": ("life.translate",),
    "LIFE-4": ("free.staged",),
    "ALIAS-1": ("alias.held",),
    "ALIAS-2": ("alias.inputs",),
    "ALIAS-3": ("alias.results",),
}
# bad-input kind (kvpool.oracle.badcalls) -> the clause the spec rejects it with
BAD_CLAUSES: dict[str, str] = {
    "double_free": "FREE-3",
    "double_free_in_call": "FREE-3",
    "free_deferred_segment": "FREE-3",
    "page_zero": "FREE-2",
    "out_of_range": "FREE-1",
    "unaligned_alloc": "ALLOC-1",
    "negative_alloc": "ALLOC-2",
    "broken_last_loc": "EXTEND-3",
    "broken_decode_last_loc": "DECODE-3",
    "nested_group": "GROUP-1",
    "overlapping_segments": "SEG-4",
    "segment_layout": "SEG-1",
    "mismatched_lengths": "EXTEND-1",
    "wrong_extend_num_tokens": "EXTEND-1",
    "prefix_after_seq": "EXTEND-2",
    "shared_partial_page": "EXTEND-8",
    "decode_empty_seq": "DECODE-2",
    "decode_mismatched_lengths": "DECODE-1",
    "decode_shared_partial_page": "DECODE-8",
}
# checked only when the comparison is SGLang's exact order
ORDER_CLAUSES = frozenset(
    ("ALLOC-5", "EXTEND-7", "DECODE-7", "FREE-5", "SEG-3", "SORT-2", "SORT-3", "LIFE-4")
)


SINGLE = ClauseMap(EVENTS, CLAUSE_EVENTS, BAD_CLAUSES, ORDER_CLAUSES)


def mapped(cmap: ClauseMap = SINGLE) -> set[str]:
    """Every clause a run of the family can exercise: by an event, a rejection, or ERR-1."""
    return cmap.mapped()


def exercised(counts: Mapping[str, int], order: str, cmap: ClauseMap = SINGLE) -> Counter[str]:
    """Clause -> how often one configuration's checks ran on a case that could violate it."""
    return cmap.exercised(counts, order)


def expected(
    caps: Capabilities, page_size: int, need_sort: bool, order: str, cmap: ClauseMap = SINGLE
) -> set[str]:
    """The clauses one configuration can exercise (an event of each is reachable there)."""
    return cmap.expected(caps, page_size, need_sort, order)


def summary(found: Counter[str], wanted: set[str]) -> str:
    """``CLAUSE n`` for every clause exercised, in SPEC.md's order of families; ``CLAUSE 0!``
    for an expected one that was not."""
    names = sorted({*found, *wanted}, key=clause_key)
    cells = [f"{c} {found[c]}" if found[c] else f"{c} 0!" for c in names]
    lines, line = [], "   "
    for cell in cells:
        if len(line) + len(cell) + 2 > 100:
            lines.append(line)
            line = "   "
        line += f" {cell},"
    lines.append(line.rstrip(","))
    return "\n".join(lines)


FAMILIES = ("MODEL", "INV", "ERR", "ALLOC", "EXTEND", "DECODE", "FREE", "SEG", "GROUP", "SORT",
            "CAP", "LIFE", "ALIAS", "SWA")


def clause_key(clause: str) -> tuple[int, int]:
    """SPEC.md's order: family as in the clause index, then number."""
    family, _, number = clause.partition("-")
    rank = FAMILIES.index(family) if family in FAMILIES else len(FAMILIES)
    return rank, int(number) if number.isdigit() else 0


@dataclass
class TargetClauses:
    """The clauses one target exercised over its configurations, and those it was expected to."""

    target: str
    found: Counter[str]
    wanted: set[str]

    def missing(self) -> list[str]:
        """Expected clauses that no configuration exercised (the gate's misses)."""
        return sorted((c for c in self.wanted if not self.found[c]), key=clause_key)


def per_target(
    results: Sequence[Any], targets: Sequence[Any], cmap: ClauseMap = SINGLE
) -> list[TargetClauses]:
    """One :class:`TargetClauses` per target of a run (``results[i]`` ran ``targets[i]``)."""
    out: dict[str, TargetClauses] = {}
    for r, t in zip(results, targets):
        cfg = r.config
        tc = out.setdefault(r.target, TargetClauses(r.target, Counter(), set()))
        tc.found.update(cmap.exercised(r.coverage, cfg.order))
        tc.wanted |= cmap.expected(t.caps, cfg.page_size, cfg.need_sort, cfg.order)
    return list(out.values())


def report(per: Sequence[TargetClauses], gate: bool) -> str:
    """The clause section of a run's output: per target the clauses exercised (with counts),
    the gate's misses, and the clauses listed as not exercisable by this run."""
    lines = ["\nclauses exercised (SPEC.md IDs, checks run on cases that could break them; "
             "0! = expected, not exercised)"]
    for tc in per:
        done = sum(1 for c in tc.wanted if tc.found[c])
        lines.append(f"  {tc.target}: {done} of {len(tc.wanted)} expected clauses exercised")
        lines.append(summary(tc.found, tc.wanted))
        if gate and tc.missing():
            lines.append(f"  clause gate: {tc.target}: never exercised {', '.join(tc.missing())}")
    listed = ", ".join(ranges(sorted(NOT_EXERCISED, key=clause_key)))
    lines.append(f"  not exercised by this run (kvpool.oracle.unexercised, with reasons): {listed}")
    return "\n".join(lines)


def ranges(ids: Sequence[str]) -> list[str]:
    """Sorted clause IDs with runs of one family written ``SWA-1..19``."""
    out: list[str] = []
    run: list[tuple[str, int]] = []
    for clause in [*ids, "END-0"]:
        family, _, number = clause.partition("-")
        if run and (family != run[-1][0] or int(number) != run[-1][1] + 1):
            first, last = run[0], run[-1]
            out.append(f"{first[0]}-{first[1]}" + (f"..{last[1]}" if last != first else ""))
            run = []
        run.append((family, int(number)))
    return out
