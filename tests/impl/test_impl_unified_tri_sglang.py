"""kvpool's tri-pool beside SGLang 0.5.23's ``UnifiedMambaSWATokenToKVPoolAllocator``.

Both built with the geometry of SGLang's tri-pool fixture (``build_tri_pool``; kvpool's by
``kvpool_unified_tri``) and driven by the same random call sequences (:mod:`unified_driver`, with
state slots taken and released on the state end as a request pool does): every result and
refusal, the five capacity views and the state end's two (available, schedulable), both
translations of every live token, every member's span, holes and bindings, the page copies
each issues (both stores' ``move_physical_pages`` wrapped) and the census agree after every
call; so do they under pressure (:func:`pressure`: allocations past ``available_size()``,
where the gate moves the float). The sequences avoid what SGLang departs from the contract on
(as ``test_impl_unified_sglang`` does: ascending frees, no ``alloc_decode`` at page size 1, no
free group at page size 1 under lazy compaction) and send no ``evict_to_free_tokens`` (the
tri-pool's takes no SWA demand). Skipped where SGLang is not installed.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch
from kvpool.oracle.families.unified.kvpool_target import kvpool_unified_tri
from kvpool.oracle.families.unified.peer_state import set_state_slots, state_of
from kvpool.oracle.families.unified.placement import MoveLog
from kvpool.oracle.peers.availability import require_installed
from unified_driver import Driver

VIEWS = ("available_size", "full_available_size", "swa_available_size",
         "schedulable_full_available_size", "schedulable_swa_available_size")


def pair(ps: int, lazy: bool, build: Any = kvpool_unified_tri) -> tuple[Any, Any]:
    """SGLang's tri-pool and kvpool's (``build``), the fixture's geometry."""
    require_installed("sglang")
    from kvpool.oracle.families.unified.targets import sglang_unified_tri

    return (sglang_unified_tri(total_bytes=0, page_size=ps, lazy=lazy),
            build(total_bytes=0, page_size=ps, lazy=lazy))


def state_views(a: Any) -> tuple[int, int]:
    """The state end's available and schedulable slots, read through ``mamba_allocator``."""
    end = a.mamba_allocator
    return int(end.available_size()), int(end.schedulable_available_size())


def views(a: Any, ids: list[int]) -> tuple[Any, ...]:
    x = torch.tensor(ids, dtype=torch.int64)
    rows = ((a.translate_kv_indices_for_transfer(x).tolist(),
             a.translate_loc_from_full_to_swa(x).tolist()) if ids else ([], []))
    return (*(int(getattr(a, v)()) for v in VIEWS), *state_views(a), *rows)


def run(seed: int, ps: int, lazy: bool, steps: int, build: Any = kvpool_unified_tri) -> None:
    """Both tri-pools under one random sequence; AssertionError at the first difference."""
    rng = random.Random(seed)
    theirs, ours = pair(ps, lazy, build)
    logs = [(MoveLog(a.get_kvcache().full_kv_pool), MoveLog(a.get_kvcache().swa_kv_pool))
            for a in (theirs, ours)]
    driver = Driver(rng, ps, None, [theirs, ours], sorted_frees=True, strict_segments=True)

    def state_step() -> list[Any]:
        count = rng.randrange(0, 4)
        return driver.each(None, lambda t: set_state_slots(t, count))

    driver.do_evict = state_step  # type: ignore[method-assign]
    if ps == 1:  # SGLang's alloc_decode binds no SWA page at page size 1 (decode_ps1)
        driver.do_decode = driver.do_translate  # type: ignore[method-assign]
    if ps == 1 and lazy:  # there its free_group_end appends the groups' ids unsorted
        driver.do_group = driver.do_translate  # type: ignore[method-assign]
    assert ours.mamba_slot_full_token_cost() == theirs.mamba_slot_full_token_cost()
    for i in range(steps):
        name, (_, want, got) = driver.step()
        where = f"seed {seed} step {i} {name}"
        assert got == want, f"{where}: kvpool {got!r} != SGLang {want!r}"
        ids = driver.live_ids()
        assert views(ours, ids) == views(theirs, ids), f"{where}: views differ"
        mine, sglang = state_of(ours), state_of(theirs)
        for member in ("state", "swa", "full"):
            a, b = mine.sides[member], sglang.sides[member]
            assert (a.span_low, a.span_high, a.holes, dict(a.bindings)) == (
                b.span_low, b.span_high, b.holes, dict(b.bindings)), f"{where}: {member} differs"
        assert mine.free_virtual == sglang.free_virtual, f"{where}: free ids differ"
        for side in (0, 1):
            assert logs[1][side].copies == logs[0][side].copies, f"{where}: page copies differ"
            logs[0][side].copies.clear()
            logs[1][side].copies.clear()
        assert ours.verify_byte_accounting() == [] == list(theirs.verify_byte_accounting())


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("ps", [1, 4, 16])
def test_tri_pool_against_sglang(ps: int, lazy: bool) -> None:
    for seed in range(4):
        run(seed, ps, lazy, 80)


def agree(pools: tuple[Any, Any], logs: list[tuple[MoveLog, MoveLog]], where: str) -> int:
    """Both pools' views, members and page copies since the last call agree; the SWA float's
    copies counted."""
    theirs, ours = pools
    assert views(ours, []) == views(theirs, []), f"{where}: views differ"
    mine, sglang = state_of(ours), state_of(theirs)
    for member in ("state", "swa", "full"):
        a, b = mine.sides[member], sglang.sides[member]
        assert (a.span_low, a.span_high, a.holes, dict(a.bindings)) == (
            b.span_low, b.span_high, b.holes, dict(b.bindings)), f"{where}: {member} differs"
    moved = len(logs[1][1].copies)
    for side in (0, 1):
        assert logs[1][side].copies == logs[0][side].copies, f"{where}: page copies differ"
        logs[0][side].copies.clear()
        logs[1][side].copies.clear()
    return moved


def pressure(seed: int, ps: int, lazy: bool, steps: int = 60) -> int:
    """Large allocs, frees, window slides of a row's first pages and state-slot counts, which
    drive the gate past ``available_size()`` (the float retreats: ``make_room``); both pools
    agree after every call. The SWA float's page copies made. Freed and slid ids go ascending:
    at page size 1 SGLang appends a free's pages to the holes in the order given (kvpool's
    ascending), and a take of every hole hands them out in that order."""
    rng, rows, moved = random.Random(seed), [], 0
    pools = pair(ps, lazy)
    logs = [(MoveLog(a.get_kvcache().full_kv_pool), MoveLog(a.get_kvcache().swa_kv_pool))
            for a in pools]
    for i in range(steps):
        pick = rng.random()
        if pick < 0.45:
            need = rng.randrange(1, 30) * ps
            got = [a.alloc(need) for a in pools]
            assert [g is None for g in got] == [got[0] is None] * 2, f"step {i}: alloc"
            if got[1] is not None:
                assert got[0].tolist() == got[1].tolist()
                rows.append(got[1])
        elif pick < 0.7 and rows:
            row = rows.pop(rng.randrange(len(rows))).sort().values  # ascending, as in run()
            for a in pools:
                a.free(row)
        elif pick < 0.9 and rows:
            row = rows[rng.randrange(len(rows))]
            head = row[: rng.randrange(1, len(row) // ps + 1) * ps].sort().values
            if set((head // ps).tolist()) <= set(state_of(pools[1]).sides["swa"].bindings):
                for a in pools:
                    a.free_swa(head)
        else:
            count = rng.randrange(0, 4)
            for a in pools:
                set_state_slots(a, count)
        moved += agree(pools, logs, f"seed {seed} step {i}")
    return moved


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("ps", [1, 4])
def test_tri_pool_against_sglang_under_pressure(ps: int, lazy: bool) -> None:
    assert sum(pressure(seed, ps, lazy) for seed in range(6)) > 0  # the float moved
