"""Per-clause coverage of a run: which SPEC.md clauses it exercised, which it was expected to,
and the clause gate.

What exercises a clause is each family's data (its :class:`~kvpool.oracle.engine.clausemap.
ClauseMap`: single pool :mod:`kvpool.oracle.families.single.clause_map`, hybrid
:mod:`kvpool.oracle.families.hybrid.coverage`): a valid call of a named situation (an event),
or a rejected bad call (the executor records the clause the spec raised, ``rejected:<clause>``,
which counts for that clause and for ``ERR-1``). A clause is *expected* in a configuration when
one of its events can be reached there; ``--require-coverage`` fails a target whose expected
clause stayed at zero in all of its configurations. Clauses that no run can exercise are listed,
with the reason, in :mod:`kvpool.oracle.reporting.unexercised`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kvpool.spec.clause_index import clause_prefixes
from kvpool.spec.wording import counted

from ..engine.clausemap import ClauseMap
from .unexercised import CONCERNS, NOT_EXERCISED

__all__ = ["CLAUSE_GROUPS", "CONCERNS", "NOT_EXERCISED", "TargetClauses", "clause_key",
           "per_target", "report", "unexercised_for"]


def summary(found: Counter[str], wanted: set[str]) -> str:
    """``CLAUSE n`` for every clause exercised, in SPEC.md's order of clause groups; ``CLAUSE 0!``
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


# the clause groups (ID prefixes: ``MODEL``, ``INV``, ...) in SPEC.md's clause index order
CLAUSE_GROUPS: tuple[str, ...] = clause_prefixes()


def clause_key(clause: str) -> tuple[int, int]:
    """SPEC.md's order: the clause's group (ID prefix) as in the clause index, then its number;
    a prefix the index lacks sorts after every listed one, a non-numeric suffix as 0."""
    group, _, number = clause.partition("-")
    rank = CLAUSE_GROUPS.index(group) if group in CLAUSE_GROUPS else len(CLAUSE_GROUPS)
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
    results: Sequence[Any], targets: Sequence[Any], cmap: ClauseMap
) -> list[TargetClauses]:
    """One :class:`TargetClauses` per target of a run (``results[i]`` ran ``targets[i]``)."""
    out: dict[str, TargetClauses] = {}
    for r, t in zip(results, targets):
        cfg = r.config
        tc = out.setdefault(r.target, TargetClauses(r.target, Counter(), set()))
        tc.found.update(cmap.exercised(r.coverage, cfg.order))
        tc.wanted |= cmap.expected(t.caps, cfg.page_size, cfg.need_sort, cfg.order)
    return list(out.values())


def unexercised_for(family: str | None) -> dict[str, str]:
    """The entries of :data:`NOT_EXERCISED` that concern a run of ``family`` (``CONCERNS``);
    all of them with ``family=None``. A family none concerns (``mamba_slot``) gets none."""
    return {c: why for c, why in NOT_EXERCISED.items()
            if family is None or family in CONCERNS[c]}


def report(per: Sequence[TargetClauses], gate: bool, family: str | None = None) -> str:
    """The clause section of a run's output: per target the clauses exercised (with counts),
    the gate's misses, and the clauses that a run of ``family`` (of any family without it)
    cannot exercise, listed with a pointer to the reasons."""
    lines = ["\nclauses exercised (SPEC.md IDs, checks run on cases that could break them; "
             "0! = expected, not exercised)"]
    for tc in per:
        done = sum(1 for c in tc.wanted if tc.found[c])
        lines.append(f"  {tc.target}: {done} of {counted(len(tc.wanted), 'expected clause')} "
                     "exercised")
        lines.append(summary(tc.found, tc.wanted))
        if gate and tc.missing():
            lines.append(f"  clause gate: {tc.target}: never exercised {', '.join(tc.missing())}")
    listed = ", ".join(ranges(sorted(unexercised_for(family), key=clause_key)))
    if listed:
        lines.append("  not exercised by this run (kvpool.oracle.reporting.unexercised, with "
                     "reasons): " + listed)
    return "\n".join(lines)


def ranges(ids: Sequence[str]) -> list[str]:
    """Sorted clause IDs with runs of one clause group written ``SWA-1..19``."""
    out: list[str] = []
    run: list[tuple[str, int]] = []
    for clause in [*ids, "END-0"]:
        group, _, number = clause.partition("-")
        if run and (group != run[-1][0] or int(number) != run[-1][1] + 1):
            first, last = run[0], run[-1]
            out.append(f"{first[0]}-{first[1]}" + (f"..{last[1]}" if last != first else ""))
            run = []
        run.append((group, int(number)))
    return out
