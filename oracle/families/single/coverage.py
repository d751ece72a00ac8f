"""Coverage: the named events a run reached, and which of them a target's capabilities allow.

Every call the executor performs is classified after it ran (:func:`events_of`), from its
arguments, its result and the spec's state just before it (:class:`Before`): shortage kinds,
batch-size buckets, page crossings, merges, group contents, segment trims, lifecycle calls and
the bad-input kinds sent. ``EVENTS`` is the one table: name -> (clause family, when a
configuration can reach it, what it means). A run prints the counts; ``--require-coverage``
fails a configuration in which an event its capabilities allow stayed at zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kvpool.spec import AllocatorModel
from kvpool.spec.layout import decode_needs_page, num_new_pages
from kvpool.spec.segments import trim_boundary

from ...engine.capabilities import Capabilities
from ...engine.events import Event, Needs, always, cap, event_rows, event_table, form_events
from ...engine.events import both as _both
from ...engine.trace import TraceStep
from .badkinds import kind_checked
from .calls import FREE_CALLS

BATCH_BUCKETS = ((1, 1), (2, 8), (9, 32), (33, 64))


def _paged(c: Capabilities, ps: int, ns: bool) -> bool:
    return c.paged and ps > 1


def _extend(c: Capabilities, ps: int, ns: bool) -> bool:
    return c.paged and c.extend


def _decode(c: Capabilities, ps: int, ns: bool) -> bool:
    return c.paged and c.extend and (ps > 1 or c.decode_ps1)


def _sorted(c: Capabilities, ps: int, ns: bool) -> bool:
    return ns


_groups, _segs = cap("groups"), (lambda c, ps, ns: c.segments != "none")
_shared = lambda c, ps, ns: c.segments == "shared" and ps > 1  # noqa: E731


def _sent(kind: str) -> Needs:
    """A bad-input kind is sent when the target checks its call (``badkinds``)."""
    return lambda c, ps, ns: kind_checked(kind, c)


_one_request = lambda c, ps, ns: not c.paged or c.extend  # noqa: E731  (alloc / alloc_extend)
POWER_MIN = 256  # sizes around 2**k for 2**k >= POWER_MIN are the ``size.pow2_*`` events


# the needs terms of the event table beside ``always``, ``paged``, ``ps1``, ``cap:`` and ``form:``
_NEEDS: dict[str, Needs] = {
    "paged": _paged, "extend": _extend, "decode": _decode, "sorted": _sorted, "groups": _groups,
    "segments": _segs, "shared": _shared, "one_request": _one_request,
    "token": lambda c, ps, ns: not c.paged,
}


def _table() -> dict[str, Event]:
    rows = event_rows(f"""
alloc.ok              ALLOC-4   always               alloc handed out whole pages
alloc.zero            ALLOC-2   always               alloc(0) returned []
alloc.short_empty     ALLOC-3   always               alloc short with no page free or staged
alloc.short_partial   ALLOC-3   always               alloc short while some pages are free
extend.ok             EXTEND-4  extend               alloc_extend succeeded
extend.short_empty    EXTEND-6  extend               alloc_extend short, nothing free
extend.short_partial  EXTEND-6  extend               alloc_extend short, some pages free
extend.part1          EXTEND-5  extend+paged         a request continued a partial page
extend.part3          EXTEND-5  extend+paged         a request ended mid-page
extend.many_pages     EXTEND-4  extend               a request took >= 3 new pages
decode.ok             DECODE-5  decode               alloc_decode succeeded
decode.short_empty    DECODE-6  decode               alloc_decode short, nothing free
decode.short_partial  DECODE-6  decode               alloc_decode short, some pages free
decode.page_open      DECODE-4  decode               a decode opened a new page
decode.page_continue  DECODE-5  decode+paged         a decode continued a page
merge.alloc           ALLOC-5   sorted               alloc merged the staged pages first
merge.extend          EXTEND-7  sorted+extend        alloc_extend merged first
merge.decode          DECODE-7  sorted+decode        alloc_decode merged first
merge.explicit        SORT-3    sorted+cap:merge     merge_and_sort_free merged
free.many_pages       FREE-4    always               a free released >= 2 pages
free.repeat_slot      FREE-4    cap:paged            a paged free() named one slot twice
size.pow2_single      ALLOC-4   one_request          one request took 2**k - 1 .. 2**k + 1
                                                     tokens (2**k >= {POWER_MIN})
size.pow2_batch       EXTEND-4  extend               a batch of >= 2 took, or gave a request,
                                                     2**k +- 1 tokens (2**k >= {POWER_MIN})
free.unordered        FREE-5    token                a token free, not ascending
free.empty            FREE-6    always               an empty free
free.full             FREE-7    cap:base_api         free_full released pages
free.staged           SORT-1    sorted               a free staged its pages
free.page_ids         FREE-8    cap:page_ids         free_page_ids released >= 2 pages
group.page_ids        GROUP-4   groups+cap:page_ids  a free_page_ids deferred by a group
group.page_in_pieces  GROUP-6   groups+paged         a page named by several free() calls of one
                                                     group
group.repeat_slot     GROUP-6   groups+cap:paged     a slot named again by a later free() of one
                                                     group
group.segments        GROUP-4   groups+segments      a segment free deferred by a group
group.end_many        GROUP-4   groups               a group end released >= 2 pages
group.end_idle        GROUP-2   groups               free_group_end with no open group
group.alloc_inside    GROUP-5   groups               an allocation inside an open group
group.input_reused    GROUP-3   groups               the caller overwrote a deferred free's
                                                     input
seg.trim              SEG-5     shared               a segment head trimmed on a shared boundary
                                                     page
seg.inside            SEG-5     shared               a segment wholly inside the previous one's
                                                     last page
seg.empty             SEG-6     segments             an empty segment skipped
seg.many              SEG-3     segments             free_segments of >= 2 non-empty segments
seg.mid_span          SEG-2     segments+shared      a segment starting and ending mid-page
                                                     across >= 3 pages
seg.single            SEG-2     segments             free_segment released pages
seg.unaligned_1       SEG-2     shared               a segment starting mid-page, on 1 page
seg.unaligned_2       SEG-2     shared               a segment starting mid-page, touching 2
                                                     pages
seg.unaligned_3       SEG-2     shared               a segment starting mid-page, touching >= 3
                                                     pages
seg.single_wrap       SEG-2     shared               free_segment outside a group from mid-page to
                                                     a later page's offset below its start's (a
                                                     stride from its first slot misses that page)
life.clear            LIFE-1    cap:clear            clear() mid-run
life.clear_staged     LIFE-1    sorted+cap:clear     clear() with pages staged
life.resize           LIFE-2    cap:resize           resize() mid-run
life.ragged           MODEL-1   paged                a pool whose size is not a multiple of the
                                                     page
life.translate        LIFE-3    cap:base_api         translate_kv_indices_for_transfer
cap.evict             CAP-1     cap:capacity_hooks   the tree cache was asked to evict
cap.check_false       CAP-2     cap:capacity_hooks   check_decode_capacity said no
cap.byte_accounting   CAP-3     cap:base_api         verify_byte_accounting() read
input.int32           FREE-1    form:int32           a call passed int32 slot tensors
input.strided         FREE-1    form:strided         a call passed strided slot tensor views
alias.held            ALIAS-1   always               a result re-checked after later calls
alias.inputs          ALIAS-2   cap:ownership        the caller overwrote a free's input
alias.results         ALIAS-3   cap:ownership        the caller wrote into a census
""", _NEEDS)
    for lo, hi in BATCH_BUCKETS:
        rows.append((f"extend.bs_{lo}_{hi}", "EXTEND-4", _extend, f"alloc_extend of {lo}-{hi}"))
        rows.append((f"decode.bs_{lo}_{hi}", "DECODE-4", _decode, f"alloc_decode of {lo}-{hi}"))
    return event_table(rows, {kind: _both(_sent(kind), needs) for kind, needs in BAD_NEEDS.items()})


# Bad-input kinds (``kvpool.oracle.families.single.badcalls``) and when a target can be sent them.
BAD_NEEDS: dict[str, Needs] = {
    "double_free": always,
    "double_free_in_call": lambda c, ps, ns: not c.paged,
    "free_deferred_segment": lambda c, ps, ns: c.groups and c.segments != "none",
    "page_zero": always,
    "out_of_range": always,
    "unaligned_alloc": lambda c, ps, ns: ps > 1,
    "negative_alloc": always,
    "broken_last_loc": _extend,
    "broken_decode_last_loc": _decode,
    "nested_group": _groups,
    "overlapping_segments": _segs,
    "mismatched_lengths": _extend,
    "wrong_extend_num_tokens": _extend,
    "prefix_after_seq": _extend,
    "decode_empty_seq": _extend,
    "decode_mismatched_lengths": _decode,
    "shared_partial_page": _both(_extend, _paged),
    "decode_shared_partial_page": _both(_decode, _paged),
    "segment_layout": _both(_segs, _paged),
    "page_ids_twice": lambda c, ps, ns: c.paged and c.page_ids,
}
EVENTS = _table()


@dataclass(frozen=True)
class Before:
    """What the classification needs of the spec's state just before a call."""

    num_free: int
    num_staged: int
    group_open: bool
    status: tuple[str, ...]


def snapshot(model: AllocatorModel) -> Before:
    """The :class:`Before` of ``model`` (its page statuses copied)."""
    return Before(
        len(model.free_pages), len(model.staged), model.free_group is not None, tuple(model._status)
    )


def _bucket(prefix: str, bs: int) -> str | None:
    for lo, hi in BATCH_BUCKETS:
        if lo <= bs <= hi:
            return f"{prefix}.bs_{lo}_{hi}"
    return None


def _shortage(prefix: str, before: Before) -> str:
    return f"{prefix}.short_{'partial' if before.num_free + before.num_staged else 'empty'}"


def near_power_of_two(num_tokens: int) -> bool:
    """Whether ``num_tokens`` is ``2**k - 1``, ``2**k`` or ``2**k + 1``, ``2**k >= POWER_MIN``."""
    if num_tokens < POWER_MIN - 1:
        return False
    return any((num_tokens + d) & (num_tokens + d - 1) == 0 for d in (-1, 0, 1))


def _size_events(step: TraceStep) -> Iterable[str | None]:
    """``size.pow2_*``: a successful allocation sized around a power of two."""
    a = step.args
    if step.call == "alloc":
        yield "size.pow2_single" if near_power_of_two(a["need_size"]) else None
    elif step.call == "alloc_extend":
        news = [s - p for p, s in zip(a["prefix_lens"], a["seq_lens"])]
        if len(news) == 1:
            yield "size.pow2_single" if near_power_of_two(news[0]) else None
        elif any(map(near_power_of_two, [sum(news), *news])):
            yield "size.pow2_batch"


def _alloc_events(step: TraceStep, before: Before, ps: int, result: Any) -> Iterable[str | None]:
    a, c = step.args, step.call
    name = {"alloc": "alloc", "alloc_extend": "extend", "alloc_decode": "decode"}[c]
    if c != "alloc":
        yield _bucket(name, len(a["seq_lens"]))
    if result is None:
        yield _shortage(name, before)
        return
    yield from _size_events(step)
    if c == "alloc":
        yield "alloc.zero" if a["need_size"] == 0 else "alloc.ok"
        needed = a["need_size"] // ps
    elif c == "alloc_extend":
        yield "extend.ok"
        pairs = list(zip(a["prefix_lens"], a["seq_lens"]))
        news = [num_new_pages(p, s, ps) for p, s in pairs]
        needed = sum(news)
        if any(p % ps and s > p for p, s in pairs):
            yield "extend.part1"
        if any(s % ps and n for (p, s), n in zip(pairs, news)):
            yield "extend.part3"
        if any(n >= 3 for n in news):
            yield "extend.many_pages"
    else:
        yield "decode.ok"
        opens = [decode_needs_page(s, ps) for s in a["seq_lens"]]
        needed = sum(opens)
        yield "decode.page_open" if any(opens) else None
        yield "decode.page_continue" if not all(opens) else None
    if before.num_staged and needed > before.num_free:
        yield f"merge.{name}"
    if before.group_open:
        yield "group.alloc_inside"


def _free_events(step: TraceStep, before: Before, ps: int) -> Iterable[str | None]:
    a, c = step.args, step.call
    if c in ("free", "free_full"):
        slots = a["free_index"]
        pages = {s // ps for s in slots}
        yield "free.empty" if not slots else None
        yield "free.many_pages" if len(pages) >= 2 else None
        yield "free.unordered" if slots != sorted(slots) else None
        yield "free.repeat_slot" if len(set(slots)) < len(slots) else None
        yield "free.full" if c == "free_full" and slots else None
        if before.group_open and any(before.status[p] == "deferred" for p in pages):
            yield "group.page_in_pieces"
        return
    if c == "free_page_ids":
        yield "free.page_ids" if len(a["page_ids"]) >= 2 else None
        yield "group.page_ids" if before.group_open and a["page_ids"] else None
        return
    segs = [(a["free_index"], a["start_pos"])] if c == "free_segment" else a["segments"]
    if c == "free_segment" and segs[0][0]:
        yield "seg.single"
        idx, start_pos = segs[0]
        yield "seg.single_wrap" if not before.group_open and wraps(idx, start_pos, ps) else None
    if before.group_open and any(idx for idx, _ in segs):
        yield "group.segments"
    yield "seg.many" if sum(1 for idx, _ in segs if idx) >= 2 else None
    prev_end: int | None = None
    for idx, start in segs:
        n = len(idx)
        if not n:
            yield "seg.empty"
            continue
        trim = trim_boundary(start, n, prev_end, ps)
        yield "seg.trim" if 0 < trim < n else None
        yield "seg.inside" if trim == n else None
        end = start + n
        if start % ps:
            yield f"seg.unaligned_{min(3, (end - 1) // ps - start // ps + 1)}"
        if start % ps and end % ps and (end - 1) // ps - start // ps >= 2:
            yield "seg.mid_span"
        prev_end = end


def wraps(free_index: list[int], start_pos: int, ps: int) -> bool:
    """Whether a segment starts mid-page and ends on a later page at an in-page offset below its
    start's: the slots at ``0, ps, 2ps, ...`` of it miss its last page (``SEG-2``)."""
    last = start_pos + len(free_index) - 1
    offset = start_pos % ps
    return bool(offset) and last // ps > start_pos // ps and last % ps < offset


def _names_slots(step: TraceStep) -> bool:
    """Whether a free call named any slot or page."""
    a = step.args
    if "segments" in a:
        return any(idx for idx, _ in a["segments"])
    return bool(a.get("free_index") or a.get("page_ids"))


def _names_deferred_slot(step: TraceStep, model: AllocatorModel) -> bool:
    """Whether a ``free()`` inside a group named a slot that an earlier ``free()`` of the group
    named (``model``: after the call, whose input is the group's last chunk)."""
    group = model.free_group
    if step.call not in ("free", "free_full") or not group or not step.args["free_index"]:
        return False
    earlier = {s for chunk in group[:-1] for s in chunk}
    return any(s in earlier for s in step.args["free_index"])


def events_of(step: TraceStep, before: Before, model: AllocatorModel, result: Any) -> list[str]:
    """The events one successful call reached (``model`` is the spec's state after it)."""
    ps, c = model.page_size, step.call
    found: list[str | None] = list(form_events(step.args))
    if c in ("alloc", "alloc_extend", "alloc_decode"):
        found += _alloc_events(step, before, ps, result)
    elif c in FREE_CALLS:
        found += _free_events(step, before, ps)
        if step.clobber and before.group_open and _names_slots(step):
            found.append("group.input_reused")
        found.append("group.repeat_slot" if _names_deferred_slot(step, model) else None)
        if model.need_sort and not before.group_open and len(model.staged) > before.num_staged:
            found.append("free.staged")
    elif c == "free_group_end":
        if not before.group_open:
            found.append("group.end_idle")
        elif len(model.free_pages) + len(model.staged) - before.num_free - before.num_staged >= 2:
            found.append("group.end_many")
    elif c == "merge_and_sort_free" and before.num_staged:
        found.append("merge.explicit")
    elif c == "clear":
        found.append("life.clear")
        found.append("life.clear_staged" if before.num_staged else None)
    elif c == "resize":
        found.append("life.resize")
    elif c == "translate_kv_indices_for_transfer" and step.args["kv_indices"]:
        found.append("life.translate")
    elif c == "create" and step.args["size"] % ps:
        found.append("life.ragged")
    elif c in ("evict_to_free_tokens", "check_decode_capacity"):
        found.append("cap.evict" if result else None)  # result: cache entries evicted
        found.append("cap.check_false" if step.expect is False else None)
    return [e for e in found if e is not None]


def required(
    caps: Capabilities, page_size: int, need_sort: bool, events: Mapping[str, Event] = EVENTS
) -> list[str]:
    """The events one configuration can reach (of the family's table ``events``), under
    ``caps.at(page_size)``."""
    caps = caps.at(page_size)
    return [e.name for e in events.values() if e.needs(caps, page_size, need_sort)]
