"""The unified family's coverage events and clause map.

Events come from the scheduler model (``arrive``, ``slide``, ``finish-free``, ``bad.<kind>``,
...; :mod:`.machine`), from the executor (``compaction.move``, ``cap.byte_accounting``,
``probe.census``, the data plane's ``data.*``) and per call (:func:`events_of`). Every UNI
clause of SPEC.md section 16 is mapped to the events whose checks can break it, so the run's
``--require-coverage`` and clause table work as for the other families.
"""

from __future__ import annotations

from typing import Any

from ...engine.clausemap import ClauseMap
from ...engine.events import call_events, event_rows, event_table, form_events
from ...engine.trace import TraceStep


def _lazy(c: Any, ps: int, ns: bool) -> bool:
    return "lazy" in c.compaction


def _decodes(c: Any, ps: int, ns: bool) -> bool:
    return ps > 1 or bool(c.decode_ps1)


def _checked(c: Any, ps: int, ns: bool) -> bool:
    return bool(c.error_types)


def _data(c: Any, ps: int, ns: bool) -> bool:
    return bool(c.data_plane)


def _exact_lazy(c: Any, ps: int, ns: bool) -> bool:
    """Lazy compaction on a target the spec model judges exactly (not a tri-pool)."""
    return "lazy" in c.compaction and bool(c.capacity_exact)


def _recorded(c: Any, ps: int, ns: bool) -> bool:
    """An event that records what a run could not do: never required of a configuration."""
    return False


_ROWS = event_rows("""
arrive               UNI-8   always              new requests were admitted
short                UNI-8   always              new requests were refused (the pages do not fit)
fill                 UNI-7   always              a request took everything available_size() promised
extend               UNI-8   paged               rows grew by chunks from their prefix
prealloc-tail        UNI-8   always              a request arrived with SWA pages for its tail only
gate-closed          UNI-6   lazy                a move gate was closed (no page may move)
gate-open            UNI-6   lazy                a move gate was opened again
decode               UNI-8   decodes             rows decoded one token by alloc_decode
decode-mixed         UNI-8   paged               a granted decode batch mixed rows that open a
                                                 page (two or more) with rows that continue one
slide                UNI-10  always              a window slid: free_swa of whole pages
finish-free          UNI-5   always              a request finished by free
finish-full          UNI-10  always              a request finished by free_full + free
finish-segments      UNI-10  always              a request finished by the segment frees
slide-segment        UNI-10  always              a window slid by free_swa_segment
group                UNI-10  cap:groups          requests finished inside a free group
group-frees          UNI-10  cap:groups          a free group deferred two or three plain frees
flush-idle           UNI-6   exact_lazy          flush_opportunistic(): the idle-time compaction
flush-idle.move      UNI-6   exact_lazy          flush_opportunistic() moved live pages
decode-gate          UNI-15  cap:capacity_hooks  check_decode_capacity after the cache's rows
alloc.ok             UNI-8   always              alloc handed out pages
alloc_extend.ok      UNI-8   always              alloc_extend succeeded
alloc_extend.short   UNI-8   always              alloc_extend returned None
alloc_decode.ok      UNI-8   decodes             alloc_decode succeeded
translate            UNI-11  always              a translation of live tokens
capacity.fit         UNI-8   cap:capacity_hooks  evict_to_free_tokens: the pages fit
capacity.short       UNI-8   cap:capacity_hooks  evict_to_free_tokens: they do not
capacity.evict       UNI-8   cap:capacity_hooks  evict_to_free_tokens asked the cache to evict
life.clear           UNI-12  cap:clear           clear() mid-run
placement            UNI-4   always              live pages' translations judged sound
compaction.move      UNI-6   always              a compaction moved live pages
lazy.holes           UNI-5   lazy                a lazy sub-pool kept holes after a call
cap.byte_accounting  UNI-13  always              verify_byte_accounting() read
probe.census         UNI-13  always              the census probes ran on a fresh instance
probe.unplanted      UNI-13  recorded            a census probe was skipped: the target cannot
                                                 plant its fault (no unified_plant hook)
cap.float_chain      UNI-14  cap:float_chain     the capacity views judged on the float chain
state-slots          UNI-14  cap:float_chain     the mamba end's state slots were taken or released
prealloc-float-holes UNI-14  cap:float_chain     a tri-pool prealloc as large as the SWA float's
                                                 holes let fit was granted
data.check           DATA-1  data_plane          every live token's K/V bytes read back
data.hand_out        DATA-2  data_plane          signatures written into handed-out tokens' K/V
input.int32          UNI-10  form:int32          a call passed int32 slot tensors
input.strided        UNI-10  form:strided        a call passed strided slot tensor views
""", {"decodes": _decodes, "lazy": _lazy, "data_plane": _data, "recorded": _recorded,
    "exact_lazy": _exact_lazy})
BAD_CLAUSES: dict[str, str] = {"translate_freed": "UNI-11", "double_free": "UNI-11"}
EVENTS = event_table(_ROWS, dict.fromkeys(BAD_CLAUSES, _checked))

CLAUSE_EVENTS: dict[str, tuple[str, ...]] = {
    "UNI-1": ("placement",),
    "UNI-2": ("placement", "probe.census"),
    "UNI-3": ("placement", "fill"),
    "UNI-4": ("placement",),
    "UNI-5": ("finish-free", "lazy.holes"),
    "UNI-6": ("compaction.move", "gate-closed", "gate-open", "flush-idle", "flush-idle.move"),
    "UNI-7": ("arrive", "short", "fill"),
    "UNI-8": ("alloc.ok", "alloc_extend.ok", "alloc_extend.short", "capacity.fit",
              "capacity.short", "capacity.evict", "prealloc-tail", "decode-mixed"),
    "UNI-9": ("arrive", "slide"),
    "UNI-10": ("slide", "finish-full", "finish-segments", "slide-segment", "group",
               "group-frees"),
    "UNI-11": ("translate",),
    "UNI-12": ("life.clear",),
    "UNI-13": ("cap.byte_accounting", "probe.census"),
    "UNI-14": ("cap.float_chain", "state-slots", "prealloc-float-holes"),
    "UNI-15": ("decode-gate",),
    "UNI-16": ("state-slots",),
    "DATA-1": ("data.check",),
    "DATA-2": ("data.hand_out",),
    "DATA-4": ("data.hand_out",),  # every hand-out first reads the fresh slots' bytes
}
UNIFIED = ClauseMap(EVENTS, CLAUSE_EVENTS, BAD_CLAUSES)

_SIMPLE = {"translate_kv_indices_for_transfer": "translate",
           "translate_loc_from_full_to_swa": "translate", "clear": "life.clear"}


def events_of(step: TraceStep, result: Any, holes: bool) -> list[str]:
    """The events one performed unified call reached (beside the scheduler model's);
    ``holes``: a lazy sub-pool holds holes after it."""
    c = step.call
    out = ["lazy.holes"] if holes else []
    out += form_events(step.args)
    if c == "evict_to_free_tokens":  # result: (the hook's result, the eviction requests)
        hook, asked = result if isinstance(result, tuple) else (result, [])
        return [*out, "capacity.fit" if hook else "capacity.short",
                *(["capacity.evict"] if asked else [])]
    if c == "flush_opportunistic":
        return out + (["flush-idle.move"] if result else [])
    return out + call_events(c, result, _SIMPLE)
