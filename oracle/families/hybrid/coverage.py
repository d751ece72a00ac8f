"""The hybrid family's coverage events and clause map (the single pool's: ``coverage`` /
``clauses``).

Events come from two places: the scheduler model names the situations it built (``arrive``,
``slide-unaligned``, ``finish-segments-shared``, ``bad.<kind>``, ...;
:mod:`kvpool.oracle.families.hybrid.machine`) and the engine counts per call what it checked
(:func:`events_of`: each call kind, shortages, ``alias.*``, ``cap.byte_accounting``). Every
SWA clause of SPEC.md section 15 is mapped here to the events whose checks can break it, so the
hybrid run's ``--require-coverage`` and clause table work like the single pool's.
"""

from __future__ import annotations

from typing import Any

from ...engine.clausemap import ClauseMap
from ...engine.events import Needs, always, call_events, event_rows, event_table, form_events
from ...engine.events import paged as _paged
from ...engine.trace import TraceStep


def _checked_and(kind: str, pred: Needs) -> Needs:
    """A bad-input kind is sent when the target checks its call (``BAD_KIND_CALLS``)."""
    return lambda c, ps, ns: c.checks(BAD_KIND_CALLS[kind]) and pred(c, ps, ns)


_NEEDS: dict[str, Needs] = {
    "shared": lambda c, ps, ns: ps > 1 and c.segments == "shared",
    "atomic": lambda c, ps, ns: ps > 1 and getattr(c, "atomic_decode", True),
    "swa_tail": lambda c, ps, ns: ps > 1 and getattr(c, "swa_tail", True),
    "pure": lambda c, ps, ns: getattr(c, "pure_swa", False),
}
_ROWS = event_rows("""
arrive                  SWA-7    always              new requests were admitted
short                   SWA-5    always              new requests were refused (one side short)
fill                    SWA-5    always              a request took every slot the smaller side had
                                                     left
prealloc                SWA-20   swa_tail            a request arrived pre-allocated, SWA pages for
                                                     its window tail only
extend                  SWA-8    paged               rows grew by chunks
decode                  SWA-9    always              rows decoded one token
decode-short            SWA-9    always              a decode was refused
slide-aligned           SWA-10   always              a window slid to a page boundary
slide-unaligned         SWA-3    paged               a window slid to mid-page (the page keeps its
                                                     peer)
finish-free             SWA-13   always              a request finished by free_full + free
finish-segments         SWA-14   always              a request finished by the segment frees
free.repeat_slot        SWA-13   paged               a free() / free_full() named one slot twice
finish-segments-shared  SWA-14   shared              two finishing segments shared a page
group                   SWA-15   cap:groups          requests finished inside a free group
group.input_reused      GROUP-3  cap:groups          a deferred free's input was overwritten
alloc.ok                SWA-6    ps1                 alloc handed out slots on both sides
alloc.short             SWA-6    ps1                 alloc returned None
alloc_extend.ok         SWA-7    paged               alloc_extend succeeded
alloc_extend.short      SWA-7    paged               alloc_extend returned None
alloc_decode.ok         SWA-9    paged               alloc_decode succeeded
alloc_decode.short      SWA-9    atomic              alloc_decode returned None
translate               SWA-16   always              translate_loc_from_full_to_swa
capacity.check          SWA-17   cap:capacity_hooks  check_decode_capacity
capacity.evict          SWA-17   cap:capacity_hooks  the cache was asked to evict
life.clear              SWA-1    cap:clear           clear() mid-run
life.resize             SWA-18   cap:resize          resize() mid-run
cap.byte_accounting     SWA-19   always              verify_byte_accounting() read
alias.held              ALIAS-1  always              a result re-checked after later calls
alias.inputs            ALIAS-2  cap:ownership       the caller overwrote a free's input
input.int32             SWA-13   form:int32          a call passed int32 slot tensors
input.strided           SWA-13   form:strided        a call passed strided slot tensor views
pure.one_pool           SWA-21   pure                a pure pool was created: one pool as both sides
pure.identity           SWA-22   pure                a pure pool translated its held slots
pure.alloc              SWA-23   pure                a pure pool handed out slots
pure.short              SWA-23   pure                a pure pool refused an alloc (one view short)
pure.slide              SWA-24   pure                a pure window slide gave slots back to the pool
pure.reuse              SWA-24   pure                a slid-out slot was handed out again
pure.resize             SWA-25   pure                a pure pool was resized (one size)
""", _NEEDS)
# bad-input kinds of the hybrid scheduler model -> the clause the spec rejects each with
BAD_CLAUSES: dict[str, str] = {
    "swa_double": "SWA-11",
    "free_released": "SWA-11",
    "segment_released": "SWA-11",
    "free_full_live": "SWA-12",
    "translate_freed": "SWA-16",
    "extend_released": "SWA-8",
    "resize_unequal": "SWA-25",
}
# bad-input kinds -> the call each is sent to (a partially checked target gets its calls' kinds)
BAD_KIND_CALLS: dict[str, str] = {
    "swa_double": "free_swa",
    "free_released": "free",
    "segment_released": "free_swa_segment",
    "free_full_live": "free_full",
    "translate_freed": "translate_loc_from_full_to_swa",
    "extend_released": "alloc_extend",
    "resize_unequal": "resize",
}
_BAD_NEEDS: dict[str, Needs] = {
    "extend_released": _paged, "resize_unequal": _NEEDS["pure"],
    "free_full_live": lambda c, ps, ns: not getattr(c, "pure_swa", False),
}
EVENTS = event_table(
    _ROWS, {kind: _checked_and(kind, _BAD_NEEDS.get(kind, always)) for kind in BAD_CLAUSES}
)

CLAUSE_EVENTS: dict[str, tuple[str, ...]] = {
    "SWA-1": ("arrive", "life.clear"),
    "SWA-2": ("slide-aligned", "finish-free", "finish-segments"),
    "SWA-3": ("slide-unaligned", "finish-segments-shared"),
    "SWA-4": ("finish-free", "finish-segments", "group"),
    "SWA-5": ("short", "fill"),
    "SWA-6": ("alloc.ok", "alloc.short"),
    "SWA-7": ("alloc_extend.ok", "alloc_extend.short"),
    "SWA-8": ("extend",),
    "SWA-9": ("alloc_decode.ok", "alloc_decode.short"),
    "SWA-10": ("slide-aligned", "slide-unaligned"),
    "SWA-13": ("finish-free", "free.repeat_slot"),
    "SWA-14": ("finish-segments", "finish-segments-shared"),
    "SWA-15": ("group",),
    "SWA-16": ("translate",),
    "SWA-17": ("capacity.check", "capacity.evict"),
    "SWA-18": ("life.resize",),
    "SWA-19": ("cap.byte_accounting",),
    "SWA-20": ("prealloc",),
    "SWA-21": ("pure.one_pool",),
    "SWA-22": ("pure.identity",),
    "SWA-23": ("pure.alloc", "pure.short"),
    "SWA-24": ("pure.slide", "pure.reuse"),
    "SWA-25": ("pure.resize", "bad.resize_unequal"),
    "INV-1": ("finish-free", "finish-segments"),
    "GROUP-3": ("group.input_reused",),
    "ALIAS-1": ("alias.held",),
    "ALIAS-2": ("alias.inputs",),
}
HYBRID = ClauseMap(EVENTS, CLAUSE_EVENTS, BAD_CLAUSES)

_SIMPLE = {"translate_loc_from_full_to_swa": "translate", "check_decode_capacity": "capacity.check",
           "clear": "life.clear", "resize": "life.resize"}


def events_of(step: TraceStep, group_open: bool, result: Any) -> list[str]:
    """The events one performed hybrid call reached (beside the scheduler model's)."""
    c = step.call
    out = call_events(c, result, _SIMPLE) + form_events(step.args)
    if c == "evict_to_free_tokens" and step.args.get("num_tokens"):
        out.append("capacity.evict")
    if step.clobber and group_open and c.startswith("free"):
        out.append("group.input_reused")
    return out
