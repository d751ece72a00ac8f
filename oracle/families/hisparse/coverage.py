"""The HiSparse family's coverage events and clause map: the situations the scheduler model
builds and the engine counts (after the call's checks passed), and which ``HSP-*`` clause each
exercises (``bad.<kind>``: a call the spec rejects, counted for its clause and ``ERR-1`` by the
engine)."""

from __future__ import annotations

from typing import Any

from ...engine.clausemap import ClauseMap
from ...engine.events import Needs, event_rows, event_table
from ...engine.trace import TraceStep

_NEEDS: dict[str, Needs] = {
    "groups": lambda c, ps, ns: bool(c.groups),
    "sorted": lambda c, ps, ns: ns,
    "decode": lambda c, ps, ns: ps > 1 or bool(c.decode_ps1),
}
_ROWS = event_rows("""
create              HSP-1   always          a fresh pair (logical size * ratio, device size)
ratio.one           HSP-1   always          a pair of ratio 1 (both sides the same size)
census              HSP-2   always          available_size() read after a call (the min)
capacity.device     HSP-2   always          the device side was the smaller (the min's right)
mapping             HSP-3   always          the whole mapping compared after a call
alloc.ok            HSP-4   ps1             alloc bound logical to device slots
alloc.short         HSP-4   ps1             alloc returned None
alloc.rollback      HSP-4   ps1             the device side was short: logical slots freed back
extend.new          HSP-5   always          a prefill of fresh requests bound its slots
extend.continue     HSP-5   paged           a chunk continued a prefix mid-page (device last_loc)
extend.short        HSP-5   always          a prefill refused (a side lacked pages)
decode.ok           HSP-6   decode          a decode took unbound logical slots
logical_only.ok     HSP-6   always          alloc_logical_only took unbound logical slots
logical.short       HSP-6   always          a logical-only allocation refused
buffer.reuse        HSP-7   always          a device buffer from bound slots, surplus freed
buffer.exact        HSP-7   always          a device buffer of exactly the bound slots
buffer.grow         HSP-7   always          a device buffer grown by new device pages
buffer.pad          HSP-7   paged           a device buffer padded to its last page
finish              HSP-8   always          a request freed its logical slots
finish.tail         HSP-8   paged           a row's tail freed from a page boundary
finish.bound        HSP-8   always          a free released bound device pages
buffer.free         HSP-9   always          a device buffer freed
buffer.sink         HSP-9   always          a free_hisparse_indices named the padding page
translate           HSP-10  always          get_last_loc_hisparse_device (bound, unbound, -1)
compressed          HSP-10  always          get_last_loc_compressed (the identity)
group               HSP-11  groups          a free inside free_group_begin/end (immediate)
life.clear          HSP-11  cap:clear       clear() mid-run
need_sort           HSP-4   sorted          a pair with need_sort (frees staged)
""", _NEEDS)
# bad-input kinds -> the call they go to and the clause the spec rejects each with
BAD_KIND_CALLS: dict[str, str] = {
    "alloc_paged": "alloc", "extend_unbound": "alloc_extend",
    "buffer_unaligned": "alloc_device_buffer", "buffer_not_held": "alloc_device_buffer",
    "double_free": "free", "free_partial": "free", "free_device": "free_hisparse_indices",
    "loc_out_of_range": "get_last_loc_hisparse_device",
}
BAD_CLAUSES: dict[str, str] = {
    "alloc_paged": "HSP-4", "extend_unbound": "HSP-5", "buffer_unaligned": "HSP-7",
    "buffer_not_held": "HSP-7", "double_free": "HSP-8", "free_partial": "HSP-8",
    "free_device": "HSP-9", "loc_out_of_range": "HSP-10",
}
BAD_PAGED = ("alloc_paged", "extend_unbound", "buffer_unaligned", "free_partial")


def _bad_needs(kind: str) -> Needs:
    call = BAD_KIND_CALLS[kind]
    return lambda c, ps, ns: c.checks(call) and (ps > 1 or kind not in BAD_PAGED)


EVENTS = event_table(_ROWS, {kind: _bad_needs(kind) for kind in BAD_CLAUSES})
CLAUSE_EVENTS: dict[str, tuple[str, ...]] = {
    "HSP-1": ("create", "ratio.one", "life.clear"),
    "HSP-2": ("census", "capacity.device"),
    "HSP-3": ("mapping",),
    "HSP-4": ("alloc.ok", "alloc.short", "alloc.rollback", "need_sort"),
    "HSP-5": ("extend.new", "extend.continue", "extend.short"),
    "HSP-6": ("decode.ok", "logical_only.ok", "logical.short"),
    "HSP-7": ("buffer.reuse", "buffer.exact", "buffer.grow", "buffer.pad"),
    "HSP-8": ("finish", "finish.tail", "finish.bound"),
    "HSP-9": ("buffer.free", "buffer.sink"),
    "HSP-10": ("translate", "compressed"),
    "HSP-11": ("group", "life.clear"),
}
HISPARSE = ClauseMap(EVENTS, CLAUSE_EVENTS, BAD_CLAUSES)


def events_of(step: TraceStep, result: Any) -> list[str]:
    """The events one performed call reached by its kind (beside the scheduler model's)."""
    simple = {"create": "create", "clear": "life.clear",
              "get_last_loc_hisparse_device": "translate",
              "get_last_loc_compressed": "compressed"}
    return ["census", "mapping", *([simple[step.call]] if step.call in simple else [])]
