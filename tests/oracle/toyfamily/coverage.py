"""The toy family's coverage events and clause map: what the scheduler model and the engine
count, and which ``SLOT-*`` clause each situation exercises (``bad.<kind>``: a free the spec
rejects, counted for ``SLOT-4`` and ``ERR-1`` by the engine)."""

from __future__ import annotations

from typing import Any

from kvpool.oracle.engine.clausemap import ClauseMap
from kvpool.oracle.engine.events import call_events, event_rows, event_table
from kvpool.oracle.engine.trace import TraceStep

_ROWS = event_rows("""
arrive          SLOT-3   always     a request got its slots
fill            SLOT-2   always     a request took every free slot
short           SLOT-2   always     a request was refused (more than the free slots)
alloc.ok        SLOT-3   always     alloc handed out slots
alloc.short     SLOT-2   always     alloc returned None
finish          SLOT-3   always     a request freed its slots
finish.shuffled SLOT-3   always     a request freed its slots in another order than handed out
life.clear      SLOT-1   cap:clear  clear() mid-run
""")
# bad-input kinds -> the clause the spec rejects each with
BAD_CLAUSES: dict[str, str] = {"double_free": "SLOT-4", "never_held": "SLOT-4"}
EVENTS = event_table(
    _ROWS, {kind: (lambda c, ps, ns: c.checks("free")) for kind in BAD_CLAUSES})
CLAUSE_EVENTS: dict[str, tuple[str, ...]] = {
    "SLOT-1": ("arrive", "finish", "life.clear"),
    "SLOT-2": ("alloc.short", "fill"),
    "SLOT-3": ("alloc.ok", "finish", "finish.shuffled"),
}
TOY = ClauseMap(EVENTS, CLAUSE_EVENTS, BAD_CLAUSES)


def events_of(step: TraceStep, result: Any) -> list[str]:
    """The events one performed call reached (beside the scheduler model's)."""
    return call_events(step.call, result, {"clear": "life.clear"})
