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
    "plain": lambda c, ps, ns: not getattr(c, "dsv4", False),
    "dsv4": lambda c, ps, ns: bool(getattr(c, "dsv4", False)),
}
_ROWS = event_rows("""
create              HSP-1   plain           a fresh pair (logical size * ratio, device size)
ratio.one           HSP-1   plain           a pair of ratio 1 (both sides the same size)
census              HSP-2   plain           available_size() read after a call (the min)
capacity.device     HSP-2   plain           the device side was the smaller (the min's right)
mapping             HSP-3   plain           the whole mapping compared after a call
alloc.ok            HSP-4   ps1+plain       alloc bound logical to device slots
alloc.short         HSP-4   ps1+plain       alloc returned None
alloc.rollback      HSP-4   ps1+plain       the device side was short: logical slots freed back
extend.new          HSP-5   plain           a prefill of fresh requests bound its slots
extend.continue     HSP-5   paged+plain     a chunk continued a prefix mid-page (device last_loc)
extend.short        HSP-5   plain           a prefill refused (a side lacked pages)
decode.ok           HSP-6   decode+plain    a decode took unbound logical slots
logical_only.ok     HSP-6   plain           alloc_logical_only took unbound logical slots
logical.short       HSP-6   plain           a logical-only allocation refused
buffer.reuse        HSP-7   plain           a device buffer from bound slots, surplus freed
buffer.exact        HSP-7   plain           a device buffer of exactly the bound slots
buffer.grow         HSP-7   plain           a device buffer grown by new device pages
buffer.pad          HSP-7   paged+plain     a device buffer padded to its last page
finish              HSP-8   plain           a request freed its logical slots
finish.tail         HSP-8   paged+plain     a row's tail freed from a page boundary
finish.bound        HSP-8   plain           a free released bound device pages
buffer.free         HSP-9   plain           a device buffer freed
buffer.sink         HSP-9   plain           a free_hisparse_indices named the padding page
translate           HSP-10  plain           get_last_loc_hisparse_device (bound, unbound, -1)
compressed          HSP-10  plain           get_last_loc_compressed (the identity)
group               HSP-11  groups+plain    a free inside free_group_begin/end (immediate)
life.clear          HSP-11  cap:clear+plain clear() mid-run
need_sort           HSP-4   sorted+plain    a pair with need_sort (frees staged)
dsv4.create         HSP-12  dsv4            a fresh DSV4 pair (hybrid logical side, C4 device side)
dsv4.hps1           HSP-12  dsv4            a device page of one compressed slot
dsv4.hps2           HSP-12  dsv4            a device page of two compressed slots
dsv4.clear          HSP-12  dsv4            clear() mid-run (every side whole, mapping 0 but -1)
dsv4.census         HSP-13  dsv4            the three capacity views read after a call
dsv4.capacity.device HSP-13 dsv4            4 * device was below the logical side (the min's right)
dsv4.mapping        HSP-14  dsv4            the whole compressed mapping compared after a call
dsv4.extend         HSP-14  dsv4            a prefill bound the compressed ids of fresh requests
dsv4.extend.chunk   HSP-14  dsv4            a chunk continued a prefix (device last_loc)
dsv4.extend.short   HSP-14  dsv4            a prefill refused (a side lacked pages)
dsv4.decode         HSP-14  dsv4            a decode took logical slots, nothing bound
dsv4.translate      HSP-14  dsv4            get_last_loc_compressed / _hisparse_device read
dsv4.free           HSP-15  dsv4            free of a row none of whose compressed ids is bound
dsv4.free.bound     HSP-15  dsv4            free of a row released its bound device slots
dsv4.free_swa       HSP-15  dsv4            a window slid: free_swa of leading pages
dsv4.free_full      HSP-15  dsv4            free_full of a row whose SWA side is gone
dsv4.group          HSP-15  dsv4            frees inside a free group (free, free_full deferred)
dsv4.buffer.free    HSP-15  dsv4            free_hisparse_indices of a device buffer
dsv4.buffer.reuse   HSP-16  dsv4            a device buffer from bound slots, surplus freed
dsv4.buffer.exact   HSP-16  dsv4            a device buffer of exactly the bound slots
dsv4.buffer.grow    HSP-16  dsv4            a device buffer grown by new device pages
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
    "HSP-12": ("dsv4.create", "dsv4.hps1", "dsv4.hps2", "dsv4.clear"),
    "HSP-13": ("dsv4.census", "dsv4.capacity.device"),
    "HSP-14": ("dsv4.mapping", "dsv4.extend", "dsv4.extend.chunk", "dsv4.extend.short",
               "dsv4.decode", "dsv4.translate"),
    "HSP-15": ("dsv4.free", "dsv4.free.bound", "dsv4.free_swa", "dsv4.free_full", "dsv4.group",
               "dsv4.buffer.free"),
    "HSP-16": ("dsv4.buffer.reuse", "dsv4.buffer.exact", "dsv4.buffer.grow"),
}
HISPARSE = ClauseMap(EVENTS, CLAUSE_EVENTS, BAD_CLAUSES)


def events_of(step: TraceStep, result: Any) -> list[str]:
    """The events one performed call reached by its kind (beside the scheduler model's)."""
    simple = {"create": "create", "clear": "life.clear",
              "get_last_loc_hisparse_device": "translate",
              "get_last_loc_compressed": "compressed"}
    return ["census", "mapping", *([simple[step.call]] if step.call in simple else [])]


def dsv4_events_of(step: TraceStep, result: Any) -> list[str]:
    """The DSV4 variant's events of one performed call by its kind."""
    simple = {"create": "dsv4.create", "clear": "dsv4.clear",
              "get_last_loc_hisparse_device": "dsv4.translate"}
    return ["dsv4.census", "dsv4.mapping", *([simple[step.call]] if step.call in simple else [])]
