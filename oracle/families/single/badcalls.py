"""Bad input for checked targets: calls the spec rejects, one kind per caller error.

``BAD_CALLS[kind]`` holds a precondition on the scheduler's state and a builder that draws a call
of that kind in that state; a kind is sent only when the target checks its call
(:mod:`.badkinds`). The executor asks the spec for the clause the call violates and
expects the target to raise the same clause with its state unchanged (``ERR-1``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from ...engine.draws import Draws
from .badkinds import kind_checked
from .scheduler import Scheduler

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class BadCall:
    """One kind of caller error: when it can be built, and how (drawing from ``data``)."""

    applies: Callable[[Scheduler], bool]
    build: Callable[[Scheduler, st.DataObject], Call]


def _free_pages(s: Scheduler) -> list[int]:
    return [*s.model.free_pages, *s.model.staged]


def _extend(s: Scheduler) -> bool:
    return s.uses_extend()


def _extend_with_reqs(s: Scheduler) -> bool:
    return s.uses_extend() and bool(s.reqs)


def _always(s: Scheduler) -> bool:
    return True


def _double_free(s: Scheduler, data: st.DataObject) -> Call:
    """FREE-3: an owned page's slots plus a slot of a page that is free or staged."""
    ps = s.ps
    page = data.draw(st.sampled_from(_free_pages(s)))
    owned = [slot for r in s.reqs.values() for slot in r.live()][:ps]
    return "free", {"free_index": [*owned, page * ps + data.draw(st.integers(0, ps - 1))]}


def _double_free_in_call(s: Scheduler, data: st.DataObject) -> Call:
    slot = s.reqs[sorted(s.reqs)[0]].live()[0]
    return "free", {"free_index": [slot, slot]}


def _free_deferred_segment(s: Scheduler, data: st.DataObject) -> Call:
    """A page the open free group holds back, freed again."""
    page = data.draw(st.sampled_from(s.model.deferred_pages()))
    slots = [page * s.ps + k for k in range(s.ps)]
    if s.caps.paged:
        return "free_segments", {"segments": [[slots, 0]]}
    return "free", {"free_index": slots}


def _page_ids_twice(s: Scheduler, data: st.DataObject) -> Call:
    """FREE-3: ``free_page_ids`` naming a live request's page twice (each page named once)."""
    req = s.reqs[data.draw(st.sampled_from(sorted(s.reqs)))]
    pages = list(dict.fromkeys(slot // s.ps for slot in req.live()))
    page = data.draw(st.sampled_from(pages))
    return "free_page_ids", {"page_ids": [*pages, page]}


def _page_zero(s: Scheduler, data: st.DataObject) -> Call:
    return "free", {"free_index": [data.draw(st.integers(0, s.ps - 1))]}


def _out_of_range(s: Scheduler, data: st.DataObject) -> Call:
    ps, num_pages = s.ps, s.model.num_pages
    bad = data.draw(st.sampled_from([-1, (num_pages + 1) * ps, (num_pages + 2) * ps - 1]))
    return "free", {"free_index": [bad]}


def _unaligned_alloc(s: Scheduler, data: st.DataObject) -> Call:
    ps = s.ps
    return "alloc", {
        "need_size": data.draw(st.integers(0, 3)) * ps + data.draw(st.integers(1, ps - 1))
    }


def _broken_last_loc(decode: bool) -> Callable[[Scheduler, st.DataObject], Call]:
    """A ``last_loc`` that is not the request's last slot: -1, a later in-page offset, or the
    right offset on a page the caller does not own."""

    def build(s: Scheduler, data: st.DataObject) -> Call:
        ps = s.ps
        req = s.reqs[data.draw(st.sampled_from(sorted(s.reqs)))]
        pre, last = len(req.row), req.row[-1]
        options = [-1] + [last + d for d in range(1, ps)]
        free_pages = _free_pages(s)
        if free_pages:
            options.append(data.draw(st.sampled_from(free_pages)) * ps + last % ps)
        loc = data.draw(st.sampled_from(options))
        if decode:
            return "alloc_decode", {"seq_lens": [pre + 1], "last_loc": [loc]}
        return "alloc_extend", {
            "prefix_lens": [pre],
            "seq_lens": [pre + 1],
            "last_loc": [loc],
            "extend_num_tokens": 1,
        }

    return build


def _overlapping(s: Scheduler) -> list[Any]:
    return [r for r in s.reqs.values() if len(r.row) - r.start >= 2]


def _overlapping_segments(s: Scheduler, data: st.DataObject) -> Call:
    req = _overlapping(s)[0]
    return "free_segments", {
        "segments": [
            [req.row[req.start :], req.start],
            [req.row[req.start : req.start + 1], req.start],
        ]
    }


def _partial(s: Scheduler) -> list[Any]:
    """Live requests whose last page is partial (the next position continues it)."""
    return [r for r in s.reqs.values() if len(r.row) % s.ps and len(r.row) > r.start]


def _shared_partial_page(decode: bool) -> Callable[[Scheduler, st.DataObject], Call]:
    """EXTEND-8 / DECODE-8: two requests of one call continue the same partial page."""

    def build(s: Scheduler, data: st.DataObject) -> Call:
        req = data.draw(st.sampled_from(_partial(s)))
        n, last = len(req.row), req.row[-1]
        if decode:
            return "alloc_decode", {"seq_lens": [n + 1, n + 1], "last_loc": [last, last]}
        return "alloc_extend", {
            "prefix_lens": [n, n],
            "seq_lens": [n + 1, n + 1],
            "last_loc": [last, last],
            "extend_num_tokens": 2,
        }

    return build


def _segment_layout(s: Scheduler, data: st.DataObject) -> Call:
    """SEG-1: a request's slots named from a start position one off their row positions."""
    req = _overlapping(s)[0]
    return "free_segments", {"segments": [[req.row[req.start :], req.start + 1]]}


def _fixed(call: Call) -> Callable[[Scheduler, st.DataObject], Call]:
    return lambda s, data: copy.deepcopy(call)


def _prefix_after_seq(s: Scheduler, data: st.DataObject) -> Call:
    req = s.reqs[sorted(s.reqs)[0]]
    return "alloc_extend", {
        "prefix_lens": [len(req.row)],
        "seq_lens": [len(req.row) - 1],
        "last_loc": [req.row[-1]],
        "extend_num_tokens": -1,
    }


# The order is part of the draw: Hypothesis samples a kind from the applicable ones in it.
BAD_CALLS: dict[str, BadCall] = {
    "double_free": BadCall(lambda s: bool(_free_pages(s)), _double_free),
    "double_free_in_call": BadCall(
        lambda s: not s.caps.paged and bool(s.reqs), _double_free_in_call
    ),
    "free_deferred_segment": BadCall(
        lambda s: s.caps.segments != "none" and bool(s.model.deferred_pages()),
        _free_deferred_segment,
    ),
    "page_zero": BadCall(_always, _page_zero),
    "out_of_range": BadCall(_always, _out_of_range),
    "unaligned_alloc": BadCall(lambda s: s.ps > 1, _unaligned_alloc),
    "negative_alloc": BadCall(_always, lambda s, data: ("alloc", {"need_size": -s.ps})),
    "broken_last_loc": BadCall(_extend_with_reqs, _broken_last_loc(decode=False)),
    "broken_decode_last_loc": BadCall(
        lambda s: _extend_with_reqs(s) and (s.ps > 1 or s.caps.decode_ps1),
        _broken_last_loc(decode=True),
    ),
    "nested_group": BadCall(
        lambda s: s.caps.groups and s.group_open, _fixed(("free_group_begin", {}))
    ),
    "overlapping_segments": BadCall(
        lambda s: s.caps.segments != "none" and bool(_overlapping(s)), _overlapping_segments
    ),
    "mismatched_lengths": BadCall(
        _extend,
        _fixed(
            (
                "alloc_extend",
                {
                    "prefix_lens": [0, 0],
                    "seq_lens": [1],
                    "last_loc": [-1, -1],
                    "extend_num_tokens": 1,
                },
            )
        ),
    ),
    "wrong_extend_num_tokens": BadCall(
        _extend,
        lambda s, data: (
            "alloc_extend",
            {
                "prefix_lens": [0],
                "seq_lens": [s.ps],
                "last_loc": [-1],
                "extend_num_tokens": s.ps + 1,
            },
        ),
    ),
    "prefix_after_seq": BadCall(_extend_with_reqs, _prefix_after_seq),
    "decode_empty_seq": BadCall(
        _extend, _fixed(("alloc_decode", {"seq_lens": [0], "last_loc": [-1]}))
    ),
    "decode_mismatched_lengths": BadCall(
        lambda s: _extend(s) and (s.ps > 1 or s.caps.decode_ps1),
        _fixed(("alloc_decode", {"seq_lens": [1], "last_loc": [-1, -1]})),
    ),
    "shared_partial_page": BadCall(
        lambda s: _extend(s) and bool(_partial(s)), _shared_partial_page(decode=False)
    ),
    "decode_shared_partial_page": BadCall(
        lambda s: _extend(s) and s.ps > 1 and bool(_partial(s)), _shared_partial_page(decode=True)
    ),
    "segment_layout": BadCall(
        lambda s: s.caps.segments != "none" and s.ps > 1 and bool(_overlapping(s)),
        _segment_layout,
    ),
    "page_ids_twice": BadCall(
        lambda s: s.caps.paged and s.caps.page_ids and any(r.live() for r in s.reqs.values()),
        _page_ids_twice,
    ),
}
BAD_KINDS = tuple(BAD_CALLS)
# Kinds that apply in every state of a target that checks their call; the others need requests,
# an open group, deferred or free pages, and are drawn on their own half of the time.
ANY_STATE = frozenset({
    "page_zero", "out_of_range", "unaligned_alloc", "negative_alloc", "mismatched_lengths",
    "wrong_extend_num_tokens", "decode_empty_seq", "decode_mismatched_lengths",
})


def applicable_kinds(s: Scheduler) -> list[str]:
    """The kinds that can build a bad call in the scheduler's current state, among those whose
    call the target checks (``Capabilities.checks``; every kind for a fully checked target)."""
    return [
        kind for kind, bad in BAD_CALLS.items() if kind_checked(kind, s.caps) and bad.applies(s)
    ]


def draw_kind(s: Scheduler, data: Draws) -> str | None:
    """One applicable kind (None when none applies): half of the time among those that need
    a state (``ANY_STATE`` excluded), where any applies, so that each is sent about as often as
    the kinds every state allows although its state is rarer."""
    kinds = applicable_kinds(s)
    stateful = [k for k in kinds if k not in ANY_STATE]
    if stateful and len(stateful) < len(kinds) and data.boolean():
        kinds = stateful
    return data.choice(kinds) if kinds else None


def make_bad_call(s: Scheduler, data: st.DataObject, kind: str) -> Call:
    """A call of ``kind`` (one of ``applicable_kinds(s)``) that the spec rejects."""
    return BAD_CALLS[kind].build(s, data)
