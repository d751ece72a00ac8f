"""kvpool's unified full + Mamba composite on its own (``UMB-1`` .. ``UMB-8``; no SGLang).

- bytes follow their virtual ids: every live token's row and every live state slot carries a
  signature written through ``translate_write_loc`` (the slot through its binding); after
  every call of a random sequence (:mod:`unified_mamba_driver`), under pressure too, each reads
  back through ``translate_kv_loc``, so every compaction moved the bytes with the ids;
- the geometry and the sizes of a fresh pool, and ``clear()`` back to it;
- caller errors are refused with ``ContractViolation("UMB-8")`` and change nothing;
- free groups defer, ``flush_deferred_full_frees`` runs them and keeps the group open;
- relief: an allocation short of room compacts the other end; a move gate stops it;
- the census is empty after every call and reports every planted fault.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import torch
from kvpool.impl import UnifiedMambaAllocator
from kvpool.spec.errors import ContractViolation
from unified_mamba_driver import MambaDriver


def snapshot(a: UnifiedMambaAllocator) -> tuple[Any, ...]:
    """Everything a refused call must leave as it was."""
    return (a.unified_state(), a.free_state.tolist(), a.available_size(),
            a.state_available_size(), a.size, a._group, a._segment_group)


class Signatures:
    """A distinct fp16 value in every live token's K row and every live slot's first byte."""

    def __init__(self, pool: UnifiedMambaAllocator) -> None:
        self.pool, self.tokens, self.slots = pool, dict[int, float](), dict[int, int]()
        self.next = 1.0

    def write(self, ids: list[int]) -> None:
        if not ids:
            return
        rows = self.pool.translate_write_loc(torch.tensor(ids))
        k = self.pool.get_kvcache().full_kv_pool.k_buffer[0]
        for t, r in zip(ids, rows.tolist()):
            self.tokens[t] = self.next
            k[r, 0, 0] = self.next
            self.next = self.next % 1000 + 1  # exact in fp16
        self.sync()

    def sync(self) -> None:
        """Forget freed tokens and slots, stamp new slots."""
        live = set(np.flatnonzero(self.pool.state.v2p >= 0).tolist())
        view = self.pool.get_kvcache().mamba_pool.pages_view
        for s in list(self.slots):
            if s not in live:
                del self.slots[s]
        for s in live - set(self.slots):
            self.slots[s] = (s * 7) % 250 + 1
            view[int(self.pool.state.v2p[s]), 0] = self.slots[s]

    def check(self, live_ids: list[int], where: str) -> None:
        self.tokens = {t: v for t, v in self.tokens.items() if t in set(live_ids)}
        if self.tokens:
            ids = list(self.tokens)
            rows = self.pool.translate_kv_loc(torch.tensor(ids))
            k = self.pool.get_kvcache().full_kv_pool.k_buffer[0]
            got = k[rows, 0, 0].tolist()
            assert got == [self.tokens[t] for t in ids], f"{where}: token bytes lost"
        view = self.pool.get_kvcache().mamba_pool.pages_view
        for s, v in self.slots.items():
            assert int(view[int(self.pool.state.v2p[s]), 0]) == v, f"{where}: slot bytes lost"


def drive(seed: int, ps: int, lazy: bool, steps: int, total_bytes: int, big: int) -> int:
    """One random sequence with signatures checked after every call; the page copies made."""
    a = UnifiedMambaAllocator(total_bytes, ps, lazy=lazy)
    copies: list[int] = [0]
    for kv in (a.get_kvcache().full_kv_pool, a.get_kvcache().mamba_pool):
        inner = kv.move_physical_pages

        def count(dst: Any, src: Any, *args: Any, _inner: Any = inner) -> Any:
            copies[0] += len(dst)
            return _inner(dst, src, *args)

        kv.move_physical_pages = count
    d = MambaDriver(random.Random(seed), ps, lazy, [a], big=big)
    sig = Signatures(a)
    for i in range(steps):
        before = set(d.live_ids())
        name, _ = d.step()
        where = f"seed {seed} step {i} {name}"
        a.check_invariants()
        sig.sync()
        sig.check(d.live_ids(), where)
        sig.write([t for t in d.live_ids() if t not in before])
    return copies[0]


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("ps", [1, 4, 16])
def test_bytes_follow_their_ids(ps: int, lazy: bool) -> None:
    moved = sum(drive(seed, ps, lazy, 60, 4408, 12) for seed in range(3))
    moved += sum(drive(50 + seed, ps, lazy, 60, 600 * ps + 1408, 8) for seed in range(3))
    assert moved > 0  # compaction moved pages: the check saw bytes travel


@pytest.mark.parametrize("ps", [1, 4, 16])
def test_fresh_geometry_and_clear(ps: int) -> None:
    """``UMB-1``: pages of each end, the sink floor, sizes; ``clear`` restores a fresh pool."""
    total = 4408
    a = UnifiedMambaAllocator(total, ps, lazy=True)
    floor = max(32 * ps, 176)
    full_slot = -(-floor // 32)  # the first full slot above the sink
    full_min, state_min = -(-full_slot // ps), -(-floor // 176)
    full_pages, state_slots = total // 32 // ps, total // 176
    state = a.unified_state()
    assert (state.sides["full"].min_page, state.sides["full"].num_pages) == (full_min,
                                                                               full_pages)
    assert (state.sides["state"].min_page, state.sides["state"].num_pages) == (state_min,
                                                                                 state_slots)
    assert (a.size_full, a.size_mamba) == (total // 32 - 1, state_slots - 1)
    gap = full_pages * 32 * ps - state_min * 176
    assert a.available_size() == min(gap // (32 * ps), full_pages - full_min) * ps
    assert a.state_available_size() == min(gap // 176, state_slots - state_min)
    assert a.size == a.available_size()
    assert list(state.free_virtual) == list(range(full_min, full_pages))
    fresh = snapshot(a)
    d = MambaDriver(random.Random(3), ps, True, [a])
    for _ in range(40):
        d.step()
    if a._group is None:
        a.free_group_begin()  # clear closes it
    d.gate_open[0] = True  # a gate stays installed across clear, as in SGLang
    a.clear()
    assert snapshot(a) == fresh


def test_a_buffer_without_room_above_the_sink_is_refused() -> None:
    with pytest.raises(ContractViolation, match="UMB-1"):
        UnifiedMambaAllocator(176, 1)


def refused(a: UnifiedMambaAllocator, call: Any) -> None:
    before = snapshot(a)
    with pytest.raises(ContractViolation, match="UMB-8"):
        call()
    assert snapshot(a) == before


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("ps", [1, 4])
def test_caller_errors_change_nothing(ps: int, lazy: bool) -> None:
    a = UnifiedMambaAllocator(4408, ps, lazy=lazy)
    row = a.alloc(3 * ps)
    other = a.alloc(2 * ps)
    slot = a.mamba_allocator.alloc(1)
    assert row is not None and other is not None and slot is not None
    a.free(other)
    t = torch.tensor
    refused(a, lambda: a.free(other))  # freed already
    if ps == 1:  # a larger page size deduplicates a free's pages
        refused(a, lambda: a.free(t([row[0].item(), row[0].item()])))  # named twice
    else:
        refused(a, lambda: a.free_segment(t([row[0].item()] * 2 * ps), start_pos=0))
    refused(a, lambda: a.free(t([10**6])))  # out of range
    refused(a, lambda: a.translate_kv_loc(other))
    refused(a, lambda: a.translate_kv_indices_for_transfer(t([-1])))
    refused(a, lambda: a.mamba_allocator.free(t([slot.item(), slot.item()])))
    refused(a, lambda: a.mamba_allocator.free(t([slot.item() + 1])))
    refused(a, lambda: a.alloc_extend(t([0]), t([0]), t([2]), t([2]), t([-1]), 3))
    if ps > 1:
        refused(a, lambda: a.alloc(ps + 1))
        refused(a, lambda: a.free_segment(row, start_pos=1))
    if not lazy:
        refused(a, lambda: a.set_disagg_move_gate(lambda: True))
    a.free_group_begin()
    refused(a, a.free_group_begin)
    a.free_segment(row, start_pos=0) if ps > 1 else a.free(row)
    refused(a, lambda: a.free(row[:1]))  # the group holds its page already
    a.free_group_end()
    a.mamba_allocator.free(slot)
    refused(a, lambda: a.mamba_allocator.free(slot))
    a.check_invariants()
    assert a.unified_state().sides["full"].bindings == {}


def test_an_unchecked_pool_translates_a_free_id_to_the_sink() -> None:
    a = UnifiedMambaAllocator(4408, 1, checked=False)
    row = a.alloc(2)
    assert row is not None
    a.free(row[:1])
    assert a.translate_kv_loc(torch.cat((row, torch.tensor([-1])))).tolist()[::2] == [0, 0]


@pytest.mark.parametrize("ps", [1, 4])
def test_groups_defer_until_their_end(ps: int) -> None:
    a = UnifiedMambaAllocator(4408, ps, lazy=True)
    rows = [a.alloc(2 * ps) for _ in range(3)]
    assert all(r is not None for r in rows)
    available = a.available_size()
    a.free_group_begin()
    a.free(rows[0])
    a.free_segment(rows[1], start_pos=0)
    assert a.available_size() == available  # deferred
    a.flush_deferred_full_frees()
    assert a.available_size() == available + 4 * ps  # lazy: holes count
    a.free(rows[2])  # the group is still open
    assert a.available_size() == available + 4 * ps
    a.free_group_end()
    assert a.available_size() == available + 6 * ps
    assert a.unified_state().sides["full"].bindings == {}
    first = sorted({t // ps for r in rows[:2] for t in r.tolist()})
    assert a.free_virtual[-6:].tolist() == first + sorted({t // ps for t in rows[2].tolist()})


@pytest.mark.parametrize("ps", [1, 4])
def test_relief_compacts_the_other_end_unless_a_gate_is_closed(ps: int) -> None:
    """Lazy: state holes block full's allocation until full's alloc compacts the state end
    (``UMB-3``); a closed gate keeps them (and the views stop crediting them)."""
    for gate_open in (True, False):
        a = UnifiedMambaAllocator(2000 + 8 * 176, ps, lazy=True)
        slots = a.mamba_allocator.alloc(6)
        assert slots is not None
        row = a.alloc(a.available_size())
        assert row is not None and a.available_size() == 0
        a.mamba_allocator.free(slots[:5])  # holes below the live top slot
        a.set_disagg_move_gate(lambda flag=gate_open: flag)
        st = a.unified_state().sides
        gap = st["full"].span_low * 32 * ps - st["state"].span_high * 176
        credit = (gap + (5 * 176 if gate_open else 0)) // (32 * ps) * ps
        assert a.available_size() == credit
        got = a.alloc(ps)
        assert (got is not None) == (credit >= ps)
        assert a.unified_state().sides["state"].holes == (() if gate_open else tuple(
            sorted(a.unified_state().sides["state"].holes)))
        if not gate_open:
            assert len(a.unified_state().sides["state"].holes) == 5
            assert a.flush_opportunistic() == 0  # no copy behind a closed gate
            assert len(a.unified_state().sides["state"].holes) == 5
        a.check_invariants()


def test_arithmetic() -> None:
    """``UMB-6``: the slot's token cost and the recheck bound."""
    a = UnifiedMambaAllocator(4408, 4)
    assert a.mamba_slot_full_token_cost() == -(-176 // 32)
    room = a.mamba_allocator.schedulable_available_size()
    assert a.full_tokens_before_mamba_recheck(room) == 0
    assert a.full_tokens_before_mamba_recheck(room + 3) == -(-(2 * 176 + 1) // 32)


@pytest.mark.parametrize("lazy", [False, True])
def test_census_reports_planted_faults(lazy: bool) -> None:
    for fault in ("stale_binding:full", "frontier_cross"):
        a = UnifiedMambaAllocator(4408, 4, lazy=lazy)
        assert a.alloc(12) is not None and a.mamba_allocator.alloc(2) is not None
        assert a.verify_byte_accounting() == []
        assert a.unified_plant(fault)
        assert a.verify_byte_accounting() != []
        with pytest.raises(AssertionError):
            a.check_invariants()
    assert not UnifiedMambaAllocator(4408, 4).unified_plant("stale_binding:swa")


@pytest.mark.parametrize("lazy", [False, True])
def test_a_host_copy_comes_back_where_its_ids_live_now(lazy: bool) -> None:
    """``get_cpu_copy`` / ``load_cpu_copy`` (a retraction's backup) follow the virtual ids
    across a compaction that moves their pages, the state slot's bytes too."""
    a = UnifiedMambaAllocator(4408, 4, lazy=lazy)
    below, row = a.alloc(8), a.alloc(8)
    slot = a.mamba_allocator.alloc(1)
    assert below is not None and row is not None and slot is not None
    k = a.get_kvcache().full_kv_pool.k_buffer[0]
    k[a.translate_write_loc(row), 0, 0] = torch.arange(1, 9, dtype=torch.float16)
    view = a.get_kvcache().mamba_pool.pages_view
    view[int(a.state.v2p[int(slot)])] = 5
    copy = a.get_cpu_copy(row, mamba_indices=slot)
    before = a.translate_kv_loc(row).tolist()
    a.free(below)  # eager: row moves onto below's pages now; lazy: on the flush
    a.flush_opportunistic()
    assert a.translate_kv_loc(row).tolist() != before
    k[a.translate_kv_loc(row), 0, 0] = 0  # lost, then restored from the host copy
    view[int(a.state.v2p[int(slot)])] = 0
    a.load_cpu_copy(copy, row, mamba_indices=slot)
    assert k[a.translate_kv_loc(row), 0, 0].tolist() == list(range(1, 9))
    assert view[int(a.state.v2p[int(slot)])].tolist() == [5] * 176


def test_translations_write_into_a_given_buffer() -> None:
    a = UnifiedMambaAllocator(4408, 4)
    row = a.alloc(8)
    assert row is not None
    out = torch.full((2, 4), -7, dtype=torch.int64)
    assert a.translate_write_loc(row, out=out) is out
    assert out.reshape(-1).tolist() == a.translate_kv_indices_for_transfer(row).tolist()


@pytest.mark.parametrize("lazy", [False, True])
def test_fresh_full_pages_read_zero(lazy: bool) -> None:
    """A page handed out again is zeroed (as SGLang zeroes full page envelopes), whether it
    comes past the frontier or from a hole."""
    a = UnifiedMambaAllocator(4408, 4, lazy=lazy)
    k = a.get_kvcache().full_kv_pool.k_buffer[0]
    for _ in range(2):
        rows = [a.alloc(8), a.alloc(8)]
        assert rows[0] is not None and rows[1] is not None
        for row in rows:
            k[a.translate_write_loc(row)] = 3
        a.free(rows[1])  # at the frontier: handed out again past it
        again = a.alloc(8)
        assert again is not None and k[a.translate_kv_loc(again)].abs().sum() == 0
        a.free(rows[0])  # below a live row: lazy, a hole handed out again
        again2 = a.alloc(8)
        assert again2 is not None and k[a.translate_kv_loc(again2)].abs().sum() == 0
        a.free(again)
        a.free(again2)


def test_census_reports_crossed_frontiers_with_healthy_ends() -> None:
    """``UMB-8``: the state end's span pushed into full's (holes filling it, so each end's own
    census is clean) is reported by the chain check."""
    a = UnifiedMambaAllocator(4408, 4, lazy=True)
    assert a.alloc(a.available_size()) is not None
    state, full = a.state, a.full
    cross = full.band()[0] // state.page_bytes + 1
    state.holes = np.arange(state.watermark, cross, dtype=np.int64)
    state.watermark = cross
    assert state.census() == [] and full.census() == []
    assert any("crosses" in line for line in a.verify_byte_accounting())


@pytest.mark.parametrize("lazy", [False, True])
def test_free_order_at_page_size_one(lazy: bool) -> None:
    """``UMB-2`` / ``UMB-5``: lazy at page size 1 the freed ids join the free lists in the order
    given, eager ascending (token and state frees alike)."""
    a = UnifiedMambaAllocator(4408, 1, lazy=lazy)
    row, slots = a.alloc(4), a.mamba_allocator.alloc(3)
    assert row is not None and slots is not None
    a.free(row.flip(0))
    a.mamba_allocator.free(slots.flip(0))
    want, want_slots = row.tolist(), slots.tolist()
    if lazy:
        want, want_slots = want[::-1], want_slots[::-1]
    assert a.free_virtual[-4:].tolist() == want
    assert a.free_state[-3:].tolist() == want_slots


def test_flush_opportunistic_compacts_both_ends() -> None:
    """Lazy: a hole below a live page on each end; one non-urgent flush moves one page on each
    (their bytes with them) and keeps both frontiers."""
    a = UnifiedMambaAllocator(4408, 4, lazy=True)
    rows, slots = [a.alloc(4), a.alloc(4)], a.mamba_allocator.alloc(2)
    assert rows[0] is not None and rows[1] is not None and slots is not None
    a.free(rows[0])
    a.mamba_allocator.free(slots[:1])
    spans = {n: (s.span_low, s.span_high) for n, s in a.unified_state().sides.items()}
    before = (a.translate_kv_loc(rows[1]).tolist(), int(a.state.v2p[int(slots[1])]))
    assert a.flush_opportunistic() == 2
    after = (a.translate_kv_loc(rows[1]).tolist(), int(a.state.v2p[int(slots[1])]))
    assert after[0] != before[0] and after[1] != before[1]
    assert {n: (s.span_low, s.span_high) for n, s in a.unified_state().sides.items()} == spans
    a.check_invariants()
