"""SGLang's debug switches on kvpool's allocators (kvpool.integrations.sglang_debug): each of
SGLang 0.5.23's debug checks raises on kvpool's allocator exactly where it raises on SGLang's, as
an AssertionError carrying kvpool's clause, before anything changed; nothing is installed while
the switch is off; the hybrid's invariant checks follow SGLANG_INVARIANT_CHECK's levels."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.peers

N = types.SimpleNamespace


def T(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


@pytest.fixture(scope="module")
def mods(sglang_runtime: dict[str, types.ModuleType]) -> Any:
    import kvpool.integrations.sglang as ks
    import kvpool.integrations.sglang_debug as debug
    import kvpool.integrations.sglang_hybrid as hybrid
    from sglang.srt.mem_cache import allocator as sg
    from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator as SglangSWA

    return N(ks=ks, debug=debug, hybrid=hybrid, sg=sg, SglangSWA=SglangSWA)


def _paged(cls: Any, debug: bool) -> Any:
    alloc = cls(64, 4, torch.int64, "cpu", None, False)
    alloc.debug_mode = debug
    return alloc


def _extend(a: Any, prefix: int, seq: int, last_loc: int) -> Any:
    return a.alloc_extend(T([prefix]), T([prefix]), T([seq]), T([seq]), T([last_loc]), seq - prefix)


def _group_refree(a: Any) -> None:
    out = a.alloc(4)
    a.free(out)
    a.free_group_begin()
    a.free(out)
    a.free_group_end()  # SGLang's check runs here


def _group_twice(a: Any) -> None:
    out = a.alloc(4)
    a.free_group_begin()
    a.free(out)
    a.free(out)  # GROUP-6: a page named by two free() calls of one group is released once
    a.free_group_end()


# (name, call on a paged allocator in debug mode, kvpool's clause or None where SGLang passes)
PAGED_CASES: list[tuple[str, Callable[[Any], Any], str | None]] = [
    ("alloc unaligned", lambda a: a.alloc(3), "ALLOC-1"),
    ("alloc aligned", lambda a: a.alloc(8), None),
    ("extend last_loc off its offset", lambda a: _extend(a, 2, 6, int(a.alloc(4)[2])), "EXTEND-3"),
    ("extend last_loc at its offset", lambda a: _extend(a, 2, 6, int(a.alloc(4)[1])), None),
    ("decode last_loc off its offset",
     lambda a: a.alloc_decode(T([3]), T([3]), a.alloc(4)[2:3]), "DECODE-3"),
    ("decode last_loc at its offset",
     lambda a: a.alloc_decode(T([3]), T([3]), a.alloc(4)[1:2]), None),
    ("free twice", lambda a: [a.free(out) for out in [a.alloc(4)] * 2], "FREE-3"),
    ("free_page_ids twice", lambda a: a.free_page_ids(T([1, 1])), "FREE-3"),
    ("segment off the row layout",
     lambda a: a.free_segment(T([int(s) for s in a.alloc(8)[[0, 1, 4, 5]]]), start_pos=0),
     "SEG-1"),
    ("segment of a row", lambda a: a.free_segment(a.alloc(8)[:6], start_pos=0), None),
    ("grouped free of a free page", _group_refree, "FREE-3"),
    ("grouped free of one page twice", _group_twice, None),
]


@pytest.mark.parametrize(("name", "call", "clause"), PAGED_CASES, ids=[c[0] for c in PAGED_CASES])
def test_paged_debug_checks_raise_where_sglangs_do(mods: Any, name: str,
                                                   call: Callable[[Any], Any],
                                                   clause: str | None) -> None:
    theirs, ours = _paged(mods.sg.PagedTokenToKVPoolAllocator, True), \
        _paged(mods.ks.PagedTokenToKVPoolAllocator, True)
    if clause is None:
        call(theirs)
        call(ours)
        return
    with pytest.raises(AssertionError):
        call(theirs)
    with pytest.raises(mods.debug.ContractAssertionError) as err:
        call(ours)
    assert err.value.clause == clause
    if ours.free_group is None:  # refused before anything changed: the census still holds
        ours.check_invariants()
    else:  # a refused group end keeps the group open with what it deferred
        assert ours.deferred_pages() == [1] and ours.available_size() == 64


def test_off_installs_nothing_and_the_switch_is_assignable(mods: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SGLANG_DEBUG_MEMORY_POOL", raising=False)
    alloc = mods.ks.PagedTokenToKVPoolAllocator(64, 4, torch.int64, "cpu", None, False)
    assert not alloc.debug_mode and not alloc.checked
    assert not set(mods.debug.PAGED_DEBUG_CHECKS) & set(vars(alloc))  # class methods, no layer
    assert alloc.alloc(3) is not None  # SGLang floors an unaligned alloc when off (B7)
    alloc.debug_mode = True
    assert set(mods.debug.PAGED_DEBUG_CHECKS) <= set(vars(alloc))
    with pytest.raises(AssertionError):
        alloc.alloc(3)
    alloc.debug_mode = False
    assert not set(mods.debug.PAGED_DEBUG_CHECKS) & set(vars(alloc))
    monkeypatch.setenv("SGLANG_DEBUG_MEMORY_POOL", "1")
    token = mods.ks.TokenToKVPoolAllocator(8, torch.int64, "cpu", None, False)
    assert token.debug_mode and not vars(token).keys() & {"alloc", "free"}  # SGLang's has none


def test_checked_mode_stays_stricter(mods: Any) -> None:
    """checked=True refuses a last_loc on a page nobody holds; SGLang's debug switch checks only
    the in-page offset (kvpool's default path may refuse it too: EXTEND-3)."""
    checked = mods.ks.PagedTokenToKVPoolAllocator(64, 4, torch.int64, "cpu", None, False,
                                                  checked=True)
    with pytest.raises(AssertionError) as err:
        _extend(checked, 4, 8, 3)
    assert err.value.clause == "EXTEND-3"


def _hybrid(cls: Any, swa_kvcache: Any, page_size: int) -> Any:
    return cls(64, 32, page_size, torch.bfloat16, "cpu", swa_kvcache(64, 32, page_size), False)


def _fill(alloc: Any, num_tokens: int) -> torch.Tensor:
    if alloc.page_size == 1:
        return alloc.alloc(num_tokens)
    return alloc.alloc_extend(T([0]), T([0]), T([num_tokens]), T([num_tokens]), T([-1]),
                              num_tokens)


# (name, page size, call on a hybrid allocator, {level: kvpool's clause, or None where SGLang
# passes}). At level OFF, SGLang releases the padding SWA slot / page 0 of a released peer: at
# page size 1 its always-on capacity assert then fires (kvpool's default path refuses the same
# call, FREE-2); at page size 4 nothing fires, and kvpool's default path may still refuse the
# release (FREE-2, an intended difference): OFF_REFUSALS.
HYBRID_CASES: list[tuple[str, int, Callable[[Any], Any], dict[int, str | None]]] = [
    ("free_swa of a released peer, ps 1", 1,
     lambda a: [a.free_swa(row) for row in [_fill(a, 4)] * 2],
     {0: "FREE-2", 1: "SWA-11", 2: "SWA-11"}),
    ("free of a released peer, ps 1", 1,
     lambda a: (lambda row: (a.free_swa(row), a.free(row)))(_fill(a, 4)),
     {0: "FREE-2", 1: "SWA-11", 2: "SWA-11"}),
    ("segment of a released peer", 4,
     lambda a: (lambda row: (a.clear_full_to_swa_mapping(row),
                             a.free_swa_segment(row, start_pos=0)))(_fill(a, 8)),
     {1: "SWA-11", 2: "SWA-11"}),
    ("free_full with a live peer", 4, lambda a: a.free_full(_fill(a, 4)), {1: None, 2: "SWA-12"}),
    ("free_full_segment with a live peer", 4,
     lambda a: a.free_full_segment(_fill(a, 4), start_pos=0), {1: None, 2: "SWA-12"}),
    ("free_swa then free_full", 4,
     lambda a: (lambda row: (a.free_swa(row), a.free_full(row)))(_fill(a, 8)), {1: None, 2: None}),
]


OFF_REFUSALS = {"FREE-2"}


@pytest.mark.parametrize(("name", "page_size", "call", "levels"), HYBRID_CASES,
                         ids=[c[0] for c in HYBRID_CASES])
@pytest.mark.parametrize("level", [0, 1, 2])
def test_invariant_checks_follow_sglangs_levels(mods: Any, swa_kvcache: Any,
                                                monkeypatch: pytest.MonkeyPatch, name: str,
                                                page_size: int, call: Callable[[Any], Any],
                                                levels: dict[int, str | None],
                                                level: int) -> None:
    """SGLang raises (torch's async assert: a RuntimeError on the CPU; at OFF its always-on
    capacity assert) where kvpool raises its clause; neither raises where the level lets the
    check pass (WARN logs a GUARD)."""
    monkeypatch.setenv("SGLANG_INVARIANT_CHECK", str(level))
    clause = levels.get(level)
    theirs = _hybrid(mods.SglangSWA, swa_kvcache, page_size)
    ours = _hybrid(mods.hybrid.SWATokenToKVPoolAllocator, swa_kvcache, page_size)
    if clause is None:
        call(theirs)
        try:
            call(ours)
        except mods.debug.ContractAssertionError as err:  # kvpool's default path, level OFF
            assert level == 0 and err.clause in OFF_REFUSALS, err
        return
    with pytest.raises(RuntimeError if level else AssertionError):
        call(theirs)
    with pytest.raises(mods.debug.ContractAssertionError) as err:
        call(ours)
    assert err.value.clause == clause


def test_invariant_level_reads_sglangs_variables(mods: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from sglang.srt.utils.invariants import resolve_level

    for env, want in (({}, 0), ({"SGLANG_INVARIANT_CHECK": "1"}, 1),
                      ({"SGLANG_ENABLE_ASYNC_ASSERT": "true"}, 2),
                      ({"SGLANG_INVARIANT_CHECK": "0", "SGLANG_ENABLE_ASYNC_ASSERT": "1"}, 0)):
        for name in ("SGLANG_INVARIANT_CHECK", "SGLANG_ENABLE_ASYNC_ASSERT"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        assert mods.debug.invariant_level() == int(resolve_level()) == want


def test_swa_side_debug_mode_checks_the_segment_pages(mods: Any, swa_kvcache: Any) -> None:
    """The SWA side's debug_mode switches SGLang's SWA-3 check: two full pages that map to one
    SWA page are refused by both, by kvpool before anything changed."""
    for cls in (mods.SglangSWA, mods.hybrid.SWATokenToKVPoolAllocator):
        alloc = _hybrid(cls, swa_kvcache, 4)
        row = _fill(alloc, 8)
        alloc.full_to_swa_index_mapping[row[4:]] = alloc.full_to_swa_index_mapping[row[:4]]
        alloc.free_swa_segment(row[:0], start_pos=0)  # empty: no check
        alloc.swa_attn_allocator.debug_mode = True
        with pytest.raises(AssertionError, match="swa pages do not match the mapped pages"):
            alloc.free_swa_segment(row, start_pos=0)
    assert alloc.swa_available_size() == 24 and alloc.full_to_swa_index_mapping[row].min() > 0


def test_the_hybrid_checks_read_nothing_while_off(mods: Any, swa_kvcache: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Both switches off: no representative is sliced, no peer is read (the checks' helpers
    raise if reached); each call still does its work."""
    for name in ("SGLANG_INVARIANT_CHECK", "SGLANG_ENABLE_ASYNC_ASSERT",
                 "SGLANG_DEBUG_MEMORY_POOL"):
        monkeypatch.delenv(name, raising=False)

    def reached(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a check ran while the switches are off")

    monkeypatch.setattr(mods.debug, "_segment_reps", reached)
    monkeypatch.setattr(mods.debug.HybridDebugChecks, "_expect_peers", reached)
    for page_size in (1, 4):
        alloc = _hybrid(mods.hybrid.SWATokenToKVPoolAllocator, swa_kvcache, page_size)
        row = _fill(alloc, 16)
        alloc.free_swa_segment(row[:4], start_pos=0)
        alloc.free_full_segment(row[:4], start_pos=0)
        alloc.free_swa(row[4:8])
        alloc.free_full(row[4:8])
        alloc.free_segments([(row[8:12], 8), (row[12:], 12)])
        assert (alloc.full_available_size(), alloc.swa_available_size()) == (64, 32)
