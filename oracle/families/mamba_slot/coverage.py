"""The mamba-slot family's coverage events and clause map: the situations the scheduler model
builds and the engine counts, and which ``MSLOT-*`` clause each exercises (``bad.<kind>``: a
call the spec rejects, counted for its clause and ``ERR-1`` by the engine)."""

from __future__ import annotations

from typing import Any

from ...engine.clausemap import ClauseMap
from ...engine.events import Needs, call_events, event_rows, event_table
from ...engine.trace import TraceStep

_NEEDS: dict[str, Needs] = {
    "groups": lambda c, ps, ns: bool(c.groups),
    "clear_in_group": lambda c, ps, ns: bool(c.groups and c.clear
                                             and getattr(c, "clear_in_group", True)),
}
_ROWS = event_rows("""
create              MSLOT-1   always          a fresh pool (slot 0 reserved, 1..size free)
census              MSLOT-2   always          available_size() and the free list read after a call
available.group     MSLOT-2   groups          ... while the open group held undrawn slots
arrive              MSLOT-3   always          a request got its slots
fill                MSLOT-3   always          a request took every free slot
alloc.ok            MSLOT-3   always          alloc handed out slots
short               MSLOT-4   always          a request was refused (more than the free slots)
alloc.short         MSLOT-4   always          alloc returned None
finish              MSLOT-5   always          requests freed their slots
finish.shuffled     MSLOT-5   always          slots freed in another order than handed out
group.begin         MSLOT-8   groups          a group pre-allocated slots
group.short         MSLOT-8   groups          a group's pre-allocation was more than the free slots
group.draw          MSLOT-9   groups          alloc(1) drew a pre-allocated slot
group.drained       MSLOT-9   groups          alloc(1) in a drained group (from the free list)
group.other         MSLOT-9   groups          alloc(n), n != 1, inside a group (from the free list)
group.free_inside   MSLOT-5   groups          a free inside an open group
group.end_rest      MSLOT-10  groups          a group ended with undrawn slots
group.end_empty     MSLOT-10  groups          a group ended with none left
life.clear          MSLOT-11  cap:clear       clear() mid-run
life.clear_group    MSLOT-11  clear_in_group  clear() while the open group held undrawn slots
""", _NEEDS)
# bad-input kinds -> the call they go to and the clause the spec rejects each with
BAD_KIND_CALLS: dict[str, str] = {
    "double_free": "free", "slot_zero": "free", "out_of_range": "free", "twice_in_call": "free",
    "group_slot": "free", "negative_alloc": "alloc", "negative_group": "alloc_group_begin",
    "nested_group": "alloc_group_begin",
}
BAD_CLAUSES: dict[str, str] = {
    "double_free": "MSLOT-6", "slot_zero": "MSLOT-6", "out_of_range": "MSLOT-6",
    "twice_in_call": "MSLOT-6", "group_slot": "MSLOT-6", "negative_alloc": "MSLOT-7",
    "negative_group": "MSLOT-7", "nested_group": "MSLOT-8",
}


def _bad_needs(kind: str) -> Needs:
    call = BAD_KIND_CALLS[kind]
    groups = kind in ("group_slot", "nested_group", "negative_group")
    return lambda c, ps, ns: c.checks(call) and (bool(c.groups) or not groups)


EVENTS = event_table(_ROWS, {kind: _bad_needs(kind) for kind in BAD_CLAUSES})
CLAUSE_EVENTS: dict[str, tuple[str, ...]] = {
    "MSLOT-1": ("create", "life.clear"),
    "MSLOT-2": ("census", "available.group"),
    "MSLOT-3": ("alloc.ok", "arrive", "fill"),
    "MSLOT-4": ("alloc.short", "short"),
    "MSLOT-5": ("finish", "finish.shuffled", "group.free_inside"),
    "MSLOT-8": ("group.begin", "group.short"),
    "MSLOT-9": ("group.draw", "group.drained", "group.other"),
    "MSLOT-10": ("group.end_rest", "group.end_empty"),
    "MSLOT-11": ("life.clear", "life.clear_group"),
}
MAMBA_SLOT = ClauseMap(EVENTS, CLAUSE_EVENTS, BAD_CLAUSES)


def events_of(step: TraceStep, result: Any) -> list[str]:
    """The events one performed call reached by its kind (beside the scheduler model's)."""
    return ["census", *call_events(step.call, result, {"clear": "life.clear",
                                                       "create": "create"})]
