"""A family's clause accounting: which coverage events and bad-input kinds exercise which clause.

Every family (single pool, hybrid, ...) gives one :class:`ClauseMap`: its coverage events
(:class:`~kvpool.oracle.families.single.coverage.Event` rows: name, clause, when reachable),
the clause -> events table (a valid call of such a situation could violate the clause), the
bad-input kinds and the clause the spec rejects each with (sent as the event ``bad.<kind>``;
the executor counts the clause raised as ``rejected:<clause>``), and the clauses judged only in
SGLang's exact order.
:mod:`kvpool.oracle.reporting.clauses` prints and gates on what these maps compute.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .events import Event

REJECTED = "rejected:"  # event-name prefix of a bad call's clause (counted by the executor)


@dataclass(frozen=True)
class ClauseMap:
    """One family's events and clause tables (see the module docstring)."""

    events: Mapping[str, Event]
    clause_events: Mapping[str, tuple[str, ...]]
    bad_clauses: Mapping[str, str]
    order_clauses: frozenset[str] = field(default_factory=frozenset)

    def mapped(self) -> set[str]:
        """Every clause a run can exercise: by a valid call's event, a rejection, or ERR-1."""
        return {*self.clause_events, *self.bad_clauses.values(), "ERR-1"}

    def required(self, caps: Any, page_size: int, need_sort: bool) -> list[str]:
        """The events one configuration can reach (under ``caps.at(page_size)``)."""
        caps = caps.at(page_size)
        return [e.name for e in self.events.values() if e.needs(caps, page_size, need_sort)]

    def exercised(self, counts: Mapping[str, int], order: str) -> Counter[str]:
        """Clause -> how often one configuration's checks ran on a case that could violate it."""
        out: Counter[str] = Counter()
        for clause, events in self.clause_events.items():
            if order == "exact" or clause not in self.order_clauses:
                out[clause] += sum(counts.get(e, 0) for e in events)
        for name, n in counts.items():
            if name.startswith(REJECTED):
                out[name.removeprefix(REJECTED)] += n
                out["ERR-1"] += n
        return +out

    def expected(self, caps: Any, page_size: int, need_sort: bool, order: str) -> set[str]:
        """The clauses one configuration can exercise (an event of each is reachable there)."""
        reach = set(self.required(caps, page_size, need_sort))
        out = {
            clause
            for clause, events in self.clause_events.items()
            if reach.intersection(events) and (order == "exact" or clause not in self.order_clauses)
        }
        bad = {clause for kind, clause in self.bad_clauses.items() if f"bad.{kind}" in reach}
        return out | bad | ({"ERR-1"} if bad else set())
