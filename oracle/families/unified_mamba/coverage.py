"""The unified full + Mamba family's coverage events and clause map: the situations the
scheduler model builds (:mod:`.machine`), the executor counts (``census``, ``placement``,
``compaction.move``, ``arithmetic``) and the calls reach (:func:`events_of`), and which ``UMB-*``
clause of SPEC.md section 21 each exercises (``bad.<kind>``: a caller error the spec rejects)."""

from __future__ import annotations

from typing import Any

from ...engine.clausemap import ClauseMap
from ...engine.events import Needs, call_events, event_rows, event_table
from ...engine.trace import TraceStep


def _lazy(c: Any, ps: int, ns: bool) -> bool:
    return "lazy" in c.compaction


def _decodes(c: Any, ps: int, ns: bool) -> bool:
    return ps > 1 or bool(c.decode_ps1)


def _paged(c: Any, ps: int, ns: bool) -> bool:
    return ps > 1


def _recorded(c: Any, ps: int, ns: bool) -> bool:
    """An event that records what a run could not do: never required."""
    return False


_NEEDS: dict[str, Needs] = {"lazy": _lazy, "decodes": _decodes, "paged_only": _paged,
                            "recorded": _recorded}
_ROWS = event_rows("""
create               UMB-1   always      a fresh composite: both ends empty, the sizes read
life.clear           UMB-1   cap:clear   clear() mid-run (both ends empty again)
arrive               UMB-2   always      new requests were admitted (alloc / alloc_extend)
short                UMB-2   always      a token allocation was refused
fill                 UMB-3   always      a request took everything available_size() promised
extend               UMB-2   paged_only  rows grew by chunks from their prefix
decode               UMB-2   decodes     rows decoded one token by alloc_decode
finish               UMB-2   always      a request finished by free
finish.shuffled      UMB-2   cap:free_any_order  a request's tokens freed last position first
finish.segment       UMB-2   paged_only  a request finished by free_segment
group                UMB-2   cap:groups  requests finished inside a free group
group.flush          UMB-5   cap:groups  prepare_mamba_allocation ran an open group's frees
state.alloc          UMB-5   always      requests took state slots
state.short          UMB-5   always      a state allocation was refused
state.free           UMB-5   always      requests released their state slots
state.prepare        UMB-5   always      prepare_mamba_allocation before a state allocation
view.state           UMB-4   always      the state end's view read after a call
view.token           UMB-3   always      the token views read after a call
lazy.holes           UMB-3   lazy        an end kept holes after a call (credited lazily)
flush-idle           UMB-7   lazy        flush_opportunistic() at idle
flush-idle.move      UMB-7   lazy        flush_opportunistic() moved live pages
gate-closed          UMB-3   lazy        a move gate was closed (no hole credited, no move)
gate-open            UMB-3   lazy        the move gate opened again
translate            UMB-7   always      a translation of live tokens
placement            UMB-7   always      every live token's row judged
compaction.move      UMB-7   always      a call moved live pages (by page copies)
arithmetic           UMB-6   always      the slot cost and the recheck distance read
arithmetic.missing   UMB-6   always      ... with state slots missing (a non-zero recheck)
census               UMB-8   always      verify_byte_accounting() read on a healthy chain
probe.census         UMB-8   always      the census probes ran on fresh instances
probe.unplanted      UMB-8   recorded    a census probe was skipped: the fault cannot be planted
""", _NEEDS)
BAD_KIND_CALLS: dict[str, str] = {"double_free": "free", "twice_in_call": "free",
                                  "translate_freed": "translate_kv_indices_for_transfer",
                                  "state_double_free": "free_state"}
BAD_CLAUSES: dict[str, str] = dict.fromkeys(BAD_KIND_CALLS, "UMB-8")


def _bad_needs(kind: str) -> Needs:
    call = BAD_KIND_CALLS[kind]
    return lambda c, ps, ns: c.checks(call) and (ps == 1 or kind != "twice_in_call")


EVENTS = event_table(_ROWS, {kind: _bad_needs(kind) for kind in BAD_CLAUSES})
CLAUSE_EVENTS: dict[str, tuple[str, ...]] = {
    "UMB-1": ("create", "life.clear"),
    "UMB-2": ("arrive", "short", "extend", "decode", "finish", "finish.shuffled",
              "finish.segment", "group"),
    "UMB-3": ("view.token", "fill", "lazy.holes", "gate-closed", "gate-open"),
    "UMB-4": ("view.state",),
    "UMB-5": ("state.alloc", "state.short", "state.free", "state.prepare", "group.flush"),
    "UMB-6": ("arithmetic", "arithmetic.missing"),
    "UMB-7": ("translate", "placement", "compaction.move", "flush-idle", "flush-idle.move"),
    "UMB-8": ("census", "probe.census"),
}
UNIFIED_MAMBA = ClauseMap(EVENTS, CLAUSE_EVENTS, BAD_CLAUSES)

_SIMPLE = {"translate_kv_indices_for_transfer": "translate", "clear": "life.clear"}


def events_of(step: TraceStep, result: Any, holes: bool) -> list[str]:
    """The events one performed call reached (beside the scheduler model's); ``holes``: an
    end holds holes after it."""
    out = ["view.token", "view.state", *(["lazy.holes"] if holes else [])]
    if step.call == "flush_opportunistic":
        return out + (["flush-idle.move"] if result else [])
    if step.call == "alloc_state":
        return [*out, "state.alloc" if result is not None else "state.short"]
    return out + call_events(step.call, result, _SIMPLE)
