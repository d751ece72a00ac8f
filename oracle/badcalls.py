"""Bad input for checked targets: calls the spec rejects, one kind per caller error.

Each kind builds a call from the machine's current state (``make_bad_call``); the executor asks
the spec for the clause it violates and expects the target to raise the same clause with its
state unchanged (``ERR-1``). A kind that does not apply to the current state returns None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st

if TYPE_CHECKING:
    from .machine import OracleMachine

BAD_KINDS = (
    "double_free",
    "double_free_in_call",
    "free_deferred_segment",
    "page_zero",
    "out_of_range",
    "unaligned_alloc",
    "negative_alloc",
    "broken_last_loc",
    "broken_decode_last_loc",
    "nested_group",
    "overlapping_segments",
    "mismatched_lengths",
    "wrong_extend_num_tokens",
    "prefix_after_seq",
    "decode_empty_seq",
)

Call = tuple[str, dict[str, Any]]


def _free_pages(m: OracleMachine) -> list[int]:
    return [*m.model.free_pages, *m.model.staged]


def applicable_kinds(m: OracleMachine) -> list[str]:
    """The kinds that can build a bad call in the machine's current state (a cheap filter)."""
    ps, caps, extend = m.ps, m.caps, m.uses_extend()
    ok = {
        "double_free": bool(_free_pages(m)),
        "double_free_in_call": not caps.paged and bool(m.reqs),
        "free_deferred_segment": caps.segments != "none" and bool(m.model.deferred_pages()),
        "unaligned_alloc": ps > 1,
        "broken_last_loc": extend and bool(m.reqs),
        "broken_decode_last_loc": extend and bool(m.reqs) and (ps > 1 or caps.decode_ps1),
        "nested_group": caps.groups and m.group_open,
        "overlapping_segments": caps.segments != "none"
        and any(len(r.row) - r.start >= 2 for r in m.reqs.values()),
        "mismatched_lengths": extend,
        "wrong_extend_num_tokens": extend,
        "prefix_after_seq": extend and bool(m.reqs),
        "decode_empty_seq": extend,
    }
    return [k for k in BAD_KINDS if ok.get(k, True)]


def make_bad_call(m: OracleMachine, data: st.DataObject, kind: str) -> Call | None:
    """A call of ``kind`` that the spec rejects in the machine's state, or None."""
    ps, caps, model = m.ps, m.caps, m.model
    reqs = sorted(m.reqs)
    extend = m.uses_extend()
    if kind == "double_free":
        pages = _free_pages(m)
        if not pages:
            return None
        page = data.draw(st.sampled_from(pages))
        owned = [s for r in m.reqs.values() for s in r.live()][:ps]
        return "free", {"free_index": [*owned, page * ps + data.draw(st.integers(0, ps - 1))]}
    if kind == "double_free_in_call" and not caps.paged and reqs:
        slot = m.reqs[reqs[0]].live()[0]
        return "free", {"free_index": [slot, slot]}
    if kind == "free_deferred_segment" and caps.segments != "none" and model.deferred_pages():
        page = data.draw(st.sampled_from(model.deferred_pages()))
        slots = [page * ps + k for k in range(ps)]
        return (
            ("free_segments", {"segments": [[slots, 0]]})
            if caps.paged
            else ("free", {"free_index": slots})
        )
    if kind == "page_zero":
        return "free", {"free_index": [data.draw(st.integers(0, ps - 1))]}
    if kind == "out_of_range":
        bad = data.draw(
            st.sampled_from([-1, (model.num_pages + 1) * ps, (model.num_pages + 2) * ps - 1])
        )
        return "free", {"free_index": [bad]}
    if kind == "unaligned_alloc" and ps > 1:
        return "alloc", {
            "need_size": data.draw(st.integers(0, 3)) * ps + data.draw(st.integers(1, ps - 1))
        }
    if kind == "negative_alloc":
        return "alloc", {"need_size": -ps}
    if kind in ("broken_last_loc", "broken_decode_last_loc") and extend and reqs:
        if kind == "broken_decode_last_loc" and ps == 1 and not caps.decode_ps1:
            return None
        req = m.reqs[data.draw(st.sampled_from(reqs))]
        pre, last = len(req.row), req.row[-1]
        options = [-1] + [last + d for d in range(1, ps)]
        free_pages = _free_pages(m)
        if free_pages:  # right in-page offset, but on a page the caller does not own
            options.append(data.draw(st.sampled_from(free_pages)) * ps + last % ps)
        loc = data.draw(st.sampled_from(options))
        if kind == "broken_decode_last_loc":
            return "alloc_decode", {"seq_lens": [pre + 1], "last_loc": [loc]}
        return "alloc_extend", {
            "prefix_lens": [pre],
            "seq_lens": [pre + 1],
            "last_loc": [loc],
            "extend_num_tokens": 1,
        }
    if kind == "nested_group" and caps.groups and m.group_open:
        return "free_group_begin", {}
    if kind == "overlapping_segments" and caps.segments != "none":
        live = [r for r in m.reqs.values() if len(r.row) - r.start >= 2]
        if not live:
            return None
        req = live[0]
        return "free_segments", {
            "segments": [
                [req.row[req.start :], req.start],
                [req.row[req.start : req.start + 1], req.start],
            ]
        }
    if kind == "mismatched_lengths" and extend:
        return "alloc_extend", {
            "prefix_lens": [0, 0],
            "seq_lens": [1],
            "last_loc": [-1, -1],
            "extend_num_tokens": 1,
        }
    if kind == "wrong_extend_num_tokens" and extend:
        return "alloc_extend", {
            "prefix_lens": [0],
            "seq_lens": [ps],
            "last_loc": [-1],
            "extend_num_tokens": ps + 1,
        }
    if kind == "prefix_after_seq" and extend and reqs:
        req = m.reqs[reqs[0]]
        return "alloc_extend", {
            "prefix_lens": [len(req.row)],
            "seq_lens": [len(req.row) - 1],
            "last_loc": [req.row[-1]],
            "extend_num_tokens": -1,
        }
    if kind == "decode_empty_seq" and extend:
        return "alloc_decode", {"seq_lens": [0], "last_loc": [-1]}
    return None
