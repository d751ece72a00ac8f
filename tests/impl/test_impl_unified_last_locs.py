"""Checked mode's ``last_loc`` test of kvpool's unified pools (``EXTEND-1``/``-2``/``-3``/``-8``,
``DECODE-2``/``-3``/``-8`` over virtual pages): the full + SWA pool, the tri-pool and the full +
Mamba pool each refuse a ``last_loc`` that does not continue its prefix (wrong in-page offset,
``-1`` for a non-empty prefix, a page that is not live, one partial page continued twice) with
the clause, and leave everything as it was. An unchecked pool takes the same calls and hands out
colliding ids. ``check_last_locs`` agrees with the paged rules (``spec.rules.check_extend``) on
random batches, a live virtual page standing for an owned page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from kvpool.impl import UnifiedMambaAllocator, UnifiedMambaSWAAllocator
from kvpool.impl.unified_last_locs import check_last_locs
from kvpool.impl.unified_swa import UnifiedSWAAllocator
from kvpool.spec import rules
from kvpool.spec.errors import ContractViolation

PAGES = 64


def t(xs: list[int]) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.int64)


BUILDERS: dict[str, Callable[[int, bool], Any]] = {
    "full+swa": lambda ps, checked: UnifiedSWAAllocator(
        2 * PAGES * ps * 32, ps, checked=checked),
    "tri": lambda ps, checked: UnifiedMambaSWAAllocator(
        2 * PAGES * ps * 32 + 4 * 256, ps, state_bytes=256, checked=checked),
    "full+mamba": lambda ps, checked: UnifiedMambaAllocator(
        PAGES * ps * 32 + 4 * 256, ps, state_bytes=256, checked=checked),
}


def snapshot(a: Any) -> tuple[Any, ...]:
    return (a.full.v2p.tolist(), a.free_virtual.tolist(), a.available_size(),
            repr(a.verify_byte_accounting()))


def bad_calls(held: torch.Tensor, ps: int) -> list[tuple[str, str, Callable[[Any], Any]]]:
    """``(name, clause, call)`` for calls whose ``last_loc`` is wrong; ``held`` is a live row
    of two pages, its first ``ps + 1`` tokens the prefix (two pages at page size 1)."""
    row = held.tolist()
    n = ps + 1
    last = row[n - 1]
    out: list[tuple[str, str, Callable[[Any], Any]]] = [
        ("-1 for a non-empty prefix", "EXTEND-3",
         lambda a: a.alloc_extend(t([n]), t([n]), t([n + 2]), t([n + 2]), t([-1]), 2)),
        ("a slot for an empty prefix", "EXTEND-3",
         lambda a: a.alloc_extend(t([0]), t([0]), t([2]), t([2]), t([last]), 2)),
        ("a freed page", "EXTEND-3",
         lambda a: a.alloc_extend(t([n]), t([n]), t([n + 2]), t([n + 2]),
                                  t([(PAGES - 2) * ps + (n - 1) % ps]), 2)),
        ("beyond the ids", "EXTEND-3",
         lambda a: a.alloc_extend(t([n]), t([n]), t([n + 2]), t([n + 2]),
                                  t([10 ** 6 * ps + (n - 1) % ps]), 2)),
        ("a negative prefix", "EXTEND-2",
         lambda a: a.alloc_extend(t([-1]), t([-1]), t([1]), t([1]), t([-1]), 2)),
        ("lengths that differ", "EXTEND-1",
         lambda a: a.alloc_extend(t([n]), t([n]), t([n + 2]), t([n + 2]), t([last, last]), 2)),
        ("a decode after a freed page", "DECODE-3",
         lambda a: a.alloc_decode(t([n + 1]), t([n + 1]), t([(PAGES - 2) * ps + (n - 1) % ps]))),
        ("a decode of an empty request", "DECODE-2",
         lambda a: a.alloc_decode(t([0]), t([0]), t([-1]))),
    ]
    if ps > 1:
        out += [
            ("the wrong in-page offset", "EXTEND-3",
             lambda a: a.alloc_extend(t([n]), t([n]), t([n + 2]), t([n + 2]), t([last + 1]), 2)),
            ("one partial page continued twice", "EXTEND-8",
             lambda a: a.alloc_extend(t([n, n]), t([n, n]), t([n + 1, n + 1]),
                                      t([n + 1, n + 1]), t([last, last]), 2)),
            ("a decode continuing one page twice", "DECODE-8",
             lambda a: a.alloc_decode(t([n + 1, n + 1]), t([n + 1, n + 1]), t([last, last]))),
        ]
    return out


def _pool(kind: str, ps: int, checked: bool) -> tuple[Any, torch.Tensor]:
    a = BUILDERS[kind](ps, checked)
    held = a.alloc(2 * ps)
    assert held is not None
    return a, held


@pytest.mark.parametrize("ps", [1, 4])
@pytest.mark.parametrize("kind", list(BUILDERS))
def test_a_last_loc_that_does_not_continue_its_prefix_is_refused(kind: str, ps: int) -> None:
    a, held = _pool(kind, ps, checked=True)
    for name, clause, call in bad_calls(held, ps):
        before = snapshot(a)
        with pytest.raises(ContractViolation) as err:
            call(a)
        assert err.value.clause == clause, name
        assert snapshot(a) == before, name
    n = ps + 1                                    # the valid continuation still works
    out = a.alloc_extend(t([n]), t([n]), t([n + 2]), t([n + 2]), t([held[n - 1].item()]), 2)
    assert out is not None
    if ps > 1:                                    # the prefix's last page is continued
        assert out[0].item() == held[n - 1].item() + 1


def test_an_unchecked_pool_hands_out_colliding_ids() -> None:
    """What the check prevents: at page size 4, a ``last_loc`` one slot off continues into a
    slot the request's prefix already holds."""
    a, held = _pool("full+swa", 4, checked=False)
    out = a.alloc_extend(t([5]), t([5]), t([7]), t([7]), t([held[5].item()]), 2)
    assert out is not None and out[0].item() in held.tolist()


def _live_table(live: list[bool]) -> np.ndarray:
    return np.array([0 if on else -1 for on in live], dtype=np.int64)


@settings(max_examples=300, deadline=None)
@given(ps=st.sampled_from([1, 2, 3, 4, 6]), live=st.lists(st.booleans(), min_size=6, max_size=6),
       requests=st.lists(st.tuples(st.integers(-1, 9), st.integers(0, 10), st.integers(-2, 26)),
                         min_size=1, max_size=3))
def test_the_check_agrees_with_the_paged_rules(ps: int, live: list[bool],
                                               requests: list[tuple[int, int, int]]) -> None:
    """Raised or not as ``rules.check_extend`` (virtual page 0 never live, as the sink's), the
    same clause for one request."""
    live[0] = False
    prefix, seq, last = (list(x) for x in zip(*requests, strict=True))
    seq = [max(s, p) for p, s in zip(prefix, seq, strict=True)]
    status = {p: rules.OWNED if on else rules.FREE for p, on in enumerate(live)}
    theirs: str | None = None
    try:
        rules.check_extend(prefix, seq, last, page_size=ps, num_pages=len(live) - 1,
                           status_of=lambda p: status[p])
    except ContractViolation as err:
        theirs = err.clause
    mine: str | None = None
    try:
        check_last_locs(np.array(prefix), np.array(seq), np.array(last), ps, _live_table(live))
    except ContractViolation as err:
        mine = err.clause
    assert (mine is None) == (theirs is None)
    if len(requests) == 1:
        assert mine == theirs


def test_a_refusal_names_the_first_request_whose_page_is_not_live() -> None:
    """The ``-3`` refusal names the first request on a page that is not live, among rows with
    and without a prefix (live pages bound to physical page 0 count, virtual page 0 too)."""
    v2p = np.array([0, -1, 5, 0, -1, 7], dtype=np.int64)  # virtual 0, 2, 3, 5 live
    ps = 4

    def refusal(prefix: list[int], last: list[int]) -> str:
        seq = [p + 1 for p in prefix]
        with pytest.raises(ContractViolation) as err:
            check_last_locs(np.array(prefix), np.array(seq), np.array(last), ps, v2p)
        assert err.value.clause == "EXTEND-3"
        return str(err.value)

    assert "request 1: last_loc 7 is on virtual page 1," in refusal([4, 4], [3, 7])
    assert "request 2: last_loc 19 is on virtual page 4," in refusal([0, 4, 4], [-1, 15, 19])
    assert "request 2: last_loc 27 is on virtual page 6," in refusal([4, 4, 4, 4],
                                                                        [3, 23, 27, 7])
    assert "request 1: last_loc -5 is on virtual page -2," in refusal([0, 4], [-1, -5])


@pytest.mark.parametrize("ps", [2, 3, 4])
def test_two_requests_continuing_one_partial_page_are_refused(ps: int) -> None:
    """Exactly two requests (the fewest that can) continuing the same partial page: ``-8``;
    continuing two different ones, adding no token to it, or ending whole pages: accepted."""
    v2p = np.array([-1, 0, 0, 0], dtype=np.int64)
    prefix, seq = np.array([1, 1]), np.array([2, 2])
    with pytest.raises(ContractViolation) as err:
        check_last_locs(prefix, seq, np.array([ps, ps]), ps, v2p)
    assert err.value.clause == "EXTEND-8"
    check_last_locs(prefix, seq, np.array([ps, 2 * ps]), ps, v2p)
    check_last_locs(prefix, prefix, np.array([ps, ps]), ps, v2p)  # no new token: no page opened
    check_last_locs(np.array([ps, ps]), np.array([ps + 1, ps + 1]),
                    np.array([2 * ps - 1, 2 * ps - 1]), ps, v2p)


@pytest.mark.parametrize("ps", [1, 4])
def test_a_prefix_outside_its_sequence_is_refused_whatever_its_last_loc(ps: int) -> None:
    """A prefix longer than its sequence, or negative, is ``-2`` even with a ``last_loc``
    that ends it on a live page; the same prefix within its sequence passes."""
    v2p = np.array([-1, 0, 0, 0], dtype=np.int64)
    last = np.array([2 * ps - 1])
    for prefix, seq in ((2 * ps, ps), (-ps, ps)):
        with pytest.raises(ContractViolation) as err:
            check_last_locs(np.array([prefix]), np.array([seq]),
                            last if prefix > 0 else np.array([-ps - 1]), ps, v2p)
        assert err.value.clause == "EXTEND-2", (prefix, seq)
    check_last_locs(np.array([2 * ps]), np.array([2 * ps + 1]), last, ps, v2p)
