"""The unified pools' frees (full + SWA, tri-pool, full + Mamba) read their ids through the
compiled loops where they can (``kvpool.impl.native_ops.compiled_pages``) and through numpy
otherwise: the same pages, the same clause for a bad id, the same state after, whatever the
ids' order, repeats, dtype or strides. ``KVPOOL_NATIVE=0`` turns the compiled path off for
pools built after it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from kvpool.impl import UnifiedMambaAllocator, UnifiedMambaSWAAllocator
from kvpool.impl.native_ops import compiled_pages, native_available
from kvpool.impl.unified_swa import UnifiedSWAAllocator
from kvpool.spec.errors import ContractViolation

pytestmark = pytest.mark.skipif(not native_available(), reason="the extension is not built")

PAGES = 48


def build(kind: str, ps: int, lazy: bool, compiled: bool) -> Any:
    if kind == "mamba":
        a: Any = UnifiedMambaAllocator(PAGES * ps * 32 + 4 * 256, ps, state_bytes=256,
                                       lazy=lazy)
    elif kind == "tri":
        a = UnifiedMambaSWAAllocator(2 * PAGES * ps * 32 + 4 * 256, ps, state_bytes=256,
                                          lazy=lazy)
    else:
        a = UnifiedSWAAllocator(2 * PAGES * ps * 32, ps, lazy=lazy)
    a.compiled = compiled
    return a


def state(a: Any) -> tuple[Any, ...]:
    sides = tuple((s.v2p.tolist(), s.p2v.tolist(), sorted(np.asarray(s.holes).tolist()),
                   s.span()) for s in (a.full, getattr(a, "swa", a.full)))
    return sides, a.free_virtual.tolist(), a.available_size()


def form(ids: list[int], how: str) -> torch.Tensor:
    """``ids`` as an int64 tensor, an int32 one, or a strided view."""
    if how == "int32":
        return torch.tensor(ids, dtype=torch.int32)
    if how == "strided":
        return torch.tensor([x for i in ids for x in (i, -7)], dtype=torch.int64)[::2]
    return torch.tensor(ids, dtype=torch.int64)


@settings(max_examples=90, deadline=None)
@given(ps=st.sampled_from([1, 4]), lazy=st.booleans(),
       kind=st.sampled_from(["swa", "tri", "mamba"]),
       rows=st.lists(st.integers(1, 9), min_size=1, max_size=5), data=st.data())
def test_compiled_and_numpy_frees_agree(ps: int, lazy: bool, kind: str, rows: list[int],
                                        data: Any) -> None:
    pools = [build(kind, ps, lazy, compiled) for compiled in (True, False)]
    held: list[list[int]] = []
    for num_pages in rows:
        got = [a.alloc(num_pages * ps) for a in pools]
        assert got[0].tolist() == got[1].tolist()
        held.append(got[0].tolist())
    for _ in range(data.draw(st.integers(1, 4))):
        pick = data.draw(st.lists(st.sampled_from([i for r in held for i in r] + [-1, 0, 10**6]),
                                  max_size=24))
        name = data.draw(st.sampled_from(["free"] if kind == "mamba" else
                                         ["free", "free_swa", "free_full"]))
        how = data.draw(st.sampled_from(["int64", "int32", "strided"]))
        outcomes = []
        for a in pools:
            try:
                getattr(a, name)(form(pick, how))
                outcomes.append(None)
            except ContractViolation as err:
                outcomes.append(err.clause)
        assert outcomes[0] == outcomes[1], (name, pick)
        assert state(pools[0]) == state(pools[1]), (name, pick)
        for a in pools:
            a.check_invariants()


@given(ps=st.sampled_from([1, 2, 16]),
       ids=st.lists(st.integers(-40, 400), max_size=600))
def test_compiled_pages_are_the_pages(ps: int, ids: list[int]) -> None:
    got = compiled_pages(torch.tensor(ids, dtype=torch.int64), ps)
    assert got is not None
    pages, distinct = got
    want = sorted({i // ps for i in ids})
    if distinct:
        assert pages.tolist() == want
    else:
        assert sorted(set(pages.tolist())) == want and len(pages) > 0


def test_what_the_loops_do_not_read_goes_to_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    assert compiled_pages(torch.tensor([1, 2], dtype=torch.int32), 1) is None
    assert compiled_pages([1, 2], 1) is None
    monkeypatch.setenv("KVPOOL_NATIVE", "0")
    assert not UnifiedSWAAllocator(2 * PAGES * 32, 1).compiled
    monkeypatch.setenv("KVPOOL_NATIVE", "1")
    assert UnifiedSWAAllocator(2 * PAGES * 32, 1).compiled


def test_the_frees_take_the_compiled_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A free of an int64 tensor reads it through ``compiled_pages`` (a counting stand-in)."""
    import kvpool.impl.unified_frees as frees

    calls: list[int] = []

    def counting(free_index: Any, page_size: int) -> Any:
        calls.append(page_size)
        return compiled_pages(free_index, page_size)

    monkeypatch.setattr(frees, "compiled_pages", counting)
    a = UnifiedSWAAllocator(2 * PAGES * 4 * 32, 4)
    rows = [a.alloc(8) for _ in range(3)]
    a.free_swa(rows[0])
    a.free_full(rows[0])
    a.free(rows[1])
    assert calls == [4, 4, 4]
    a.free(rows[2].to(torch.int32))  # read by numpy: the same pages
    assert calls == [4, 4, 4, 4] and a.available_size() == state(build("swa", 4, False, False))[2]
    assert np.array_equal(a.full.v2p, np.full(len(a.full.v2p), -1))


@pytest.mark.parametrize("kind", ["swa", "tri", "mamba"])
@pytest.mark.parametrize("ps", [1, 4])
@pytest.mark.parametrize("lazy", [False, True])
def test_bad_ids_name_the_same_clause_either_way(kind: str, ps: int, lazy: bool) -> None:
    """An id named twice, a freed id, one out of range, unsorted rows: each free on a pool
    with the compiled path and one without gives the same clause (or none) and state."""
    pools = [build(kind, ps, lazy, compiled) for compiled in (True, False)]
    got = [[a.alloc(3 * ps).tolist() for _ in range(3)] for a in pools]
    assert got[0] == got[1]
    rows = got[0]
    for a in pools:
        a.free(torch.tensor(rows[2]))  # rows[2] is freed: its ids are not live
    cases = [[rows[0][0], rows[0][0]], rows[0] + rows[0][:1], rows[2][:2], [10**6], [-3],
             rows[1][::-1] + rows[0], rows[0][ps:] + rows[1][:1]]
    for ids in cases:
        outcomes = []
        for a in pools:
            try:
                a.free(torch.tensor(ids))
                outcomes.append(None)
            except ContractViolation as err:
                outcomes.append(err.clause)
        assert outcomes[0] == outcomes[1], ids
        assert state(pools[0]) == state(pools[1]), ids
        if ps == 1 and len(set(ids)) < len(ids) and kind == "mamba":
            assert outcomes[0] == "UMB-8", ids  # named twice
