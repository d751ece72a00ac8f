"""The hybrid sliding-window model (``SWA-*``): concrete cases per clause, and random runs that
keep the mapping invariants."""

from __future__ import annotations

import random

import pytest
from kvpool.spec import ContractViolation, HybridModel, HybridResizeConfig
from kvpool.spec.window import released_frontier, slide_end


def hybrid(ps: int = 4, size: int = 64, size_swa: int = 32, **kw: bool) -> HybridModel:
    return HybridModel(size, size_swa, ps, **kw)


def test_state_and_sizes_SWA_1_SWA_5() -> None:
    """SWA-1, SWA-5: two pools, nothing paired; available is the smaller side."""
    h = hybrid()
    assert (h.full.num_pages, h.swa.num_pages, h.mapping) == (16, 8, {})
    sizes = (h.size, h.available_size(), h.full_available_size(), h.swa_available_size())
    assert sizes == (32, 32, 64, 32)
    assert h.peer_of(-1) == -1 and h.peer_of(5) == 0


def test_alloc_pairs_in_order_SWA_6() -> None:
    """SWA-6: ps=1 pairs slot by slot; None iff one side is short; ps>1 refuses alloc()."""
    h = HybridModel(8, 4, 1)
    assert h.alloc(3) == [1, 2, 3] and h.mapping == {1: 1, 2: 2, 3: 3}
    before = h.snapshot()
    assert h.alloc(2) is None and h.snapshot() == before   # SWA side has 1 slot left
    assert h.alloc(1) == [4] and h.mapping[4] == 4         # exactly what the SWA side has
    assert h.swa_available_size() == 0 and h.alloc(0) == []
    with pytest.raises(NotImplementedError, match="SWA-6"):
        hybrid().alloc(4)


def test_alloc_extend_pages_in_step_SWA_7_SWA_3() -> None:
    """SWA-7, SWA-3: the same positions on both sides, same offsets, pairs set."""
    h = hybrid()
    full = h.alloc_extend([0, 0], [6, 3], [-1, -1])
    assert full == [4, 5, 6, 7, 8, 9, 12, 13, 14]
    assert [h.peer_of(f) for f in full] == [4, 5, 6, 7, 8, 9, 12, 13, 14]
    grown = h.alloc_extend([6], [10], [full[5]])          # continues page 2 on both sides
    assert grown == [10, 11, 16, 17] and [h.peer_of(f) for f in grown] == [10, 11, 16, 17]
    h.check_invariants()


def test_alloc_extend_none_when_one_side_short_SWA_7() -> None:
    """SWA-7: the SWA side decides None alone; nothing moves on either side."""
    h = hybrid(size_swa=8)                                   # 2 SWA pages
    before = h.snapshot()
    assert h.alloc_extend([0], [12], [-1]) is None and h.snapshot() == before
    with pytest.raises(NotImplementedError, match="SWA-7"):
        HybridModel(8, 8, 1).alloc_extend([0], [1], [-1])


def test_swa_last_loc_needs_a_live_peer_SWA_8() -> None:
    """SWA-8: continuing a partial page whose SWA peer is released is refused; an aligned
    prefix reads no last_loc."""
    h = hybrid()
    row = h.alloc_extend([0], [6], [-1])
    h.free_swa(row[:6])                                        # both pages lose their peers
    before = h.snapshot()
    with pytest.raises(ContractViolation, match="SWA-8"):
        h.alloc_extend([6], [7], [row[5]])
    assert h.snapshot() == before
    row2 = h.alloc_extend([0], [4], [-1])
    h.free_swa(row2)
    assert len(h.alloc_extend([4], [6], [row2[3]]) or []) == 2   # aligned prefix: allowed


def test_alloc_decode_atomic_SWA_9() -> None:
    """SWA-9: a decode that the SWA side refuses leaves both sides unchanged (B14); one that
    stays on its page needs no page on either side."""
    h = hybrid(size_swa=8)
    row = h.alloc_extend([0], [7], [-1])                       # SWA pool now empty
    assert row is not None
    got = h.alloc_decode([8], [row[-1]])                       # position 7: same page
    assert got == [row[-1] + 1] and h.peer_of(got[0]) == h.peer_of(row[-1]) + 1
    before = h.snapshot()
    assert h.alloc_decode([9], [got[0]]) is None and h.snapshot() == before
    with pytest.raises(NotImplementedError, match="SWA-9"):
        HybridModel(8, 8, 1).alloc_decode([2], [1])


def test_free_swa_clears_whole_full_pages_SWA_10() -> None:
    """SWA-10: at ps>1 the whole full page loses its peers (B9); pages prepended sorted."""
    h = hybrid()
    row = h.alloc_extend([0], [10], [-1])                      # pages 1, 2, 3 on both sides
    h.free_swa(row[:5])                                         # positions 0..4: pages 1 and 2
    assert h.swa.free_pages[:3] == [1, 2, 4]
    assert [h.peer_of(f) for f in row] == [0] * 8 + [12, 13]
    assert released_frontier(5, 4) == 8 and slide_end(10, 4, 4) == 4
    h.check_invariants()


def test_free_swa_token_order_and_group_SWA_10_SWA_15() -> None:
    """SWA-10, SWA-15: ps=1 appends peers in order; in a group pairs clear at once and the
    SWA slots come back at the end, page ids first."""
    h = HybridModel(8, 8, 1)
    row = h.alloc(4)
    assert row is not None
    h.free_group_begin()
    h.free_swa([row[2], row[0]])
    assert h.peer_of(row[0]) == 0 and h.swa.free_pages == [5, 6, 7, 8]
    h.free_full([row[0], row[2]])
    h.free_group_end()
    assert h.swa.free_pages == [5, 6, 7, 8, 3, 1] and h.full.free_pages == [5, 6, 7, 8, 1, 3]
    h.check_invariants()


def test_double_swa_release_refused_SWA_11() -> None:
    """SWA-11: a second SWA release, or a slot named twice at ps=1, is a caller error."""
    for ps in (1, 4):
        h = HybridModel(64, 32, ps)
        row = h.alloc(4) if ps == 1 else h.alloc_extend([0], [4], [-1])
        assert row is not None
        h.free_swa(row[:1])
        before = h.snapshot()
        for name in ("free_swa", "free", "free_swa_segment"):
            with pytest.raises(ContractViolation, match="SWA-11"):
                if name == "free_swa_segment":
                    h.free_swa_segment(row[:1], start_pos=0)
                else:
                    getattr(h, name)(row[:1])
            assert h.snapshot() == before
    h = HybridModel(8, 8, 1)
    row = h.alloc(2)
    assert row is not None
    with pytest.raises(ContractViolation, match="SWA-11"):
        h.free_swa([row[0], row[0]])


def test_free_full_needs_released_peers_SWA_12_SWA_13() -> None:
    """SWA-12, SWA-13: free_full of a live pair is refused; free = free_swa + free_full."""
    h, twin = hybrid(), hybrid()
    for m in (h, twin):
        m.alloc_extend([0], [8], [-1])
    row = [4, 5, 6, 7, 8, 9, 10, 11]
    with pytest.raises(ContractViolation, match="SWA-12"):
        h.free_full(row)
    h.free(row)
    twin.free_swa(row)
    twin.free_full(row)
    assert h.snapshot() == twin.snapshot()
    assert h.available_size() == 32


def test_segments_row_order_and_trim_SWA_14() -> None:
    """SWA-14: SWA pages of a segment in row order (no sort); a shared page once on both
    sides; the full side alone once the peers are gone."""
    h = hybrid()
    r1, _, r3 = (h.alloc_extend([0], [4], [-1]) for _ in range(3))   # pages 1, 2, 3
    assert r1 is not None and r3 is not None
    h.free(r1)
    r3 = r3 + (h.alloc_extend([4], [8], [r3[-1]]) or [])      # row pages 3, 1
    h.free_swa_segment(r3, start_pos=0)
    assert h.swa.free_pages[:3] == [3, 1, 4]                   # row order, prepended
    h2 = hybrid()
    row = h2.alloc_extend([0], [8], [-1])
    assert row is not None
    h2.free_segments([(row[:6], 0), (row[6:], 6)])             # page 2 shared: freed once
    assert sorted(h2.swa.free_pages) == list(range(1, 9))
    h2.check_invariants()
    h3 = hybrid()
    row = h3.alloc_extend([0], [8], [-1])
    assert row is not None
    h3.free_swa_segment(row[:4], start_pos=0)
    with pytest.raises(ContractViolation, match="SWA-12"):
        h3.free_full_segments([(row[:4], 0), (row[4:], 4)])
    h3.free_full_segment(row[:4], start_pos=0)
    h3.free_segment(row[4:], start_pos=4)
    assert h3.available_size() == 32
    h3.check_invariants()


def test_translate_SWA_16() -> None:
    """SWA-16: mapped values, 0 for released, -1 for -1; a free full slot is refused."""
    h = hybrid()
    row = h.alloc_extend([0], [8], [-1])
    h.free_swa(row[:4])
    assert h.translate_loc_from_full_to_swa([-1, row[0], row[5]]) == [-1, 0, 9]
    with pytest.raises(ContractViolation, match="SWA-16"):
        h.translate_loc_from_full_to_swa([60])


def test_capacity_hooks_two_shortfalls_SWA_17() -> None:
    """SWA-17: one eviction request with both shortfalls, none when both fit."""
    asked: list[tuple[int, int]] = []

    class Cache:
        def evict(self, num_tokens: int, swa_num_tokens: int) -> None:
            asked.append((num_tokens, swa_num_tokens))

    h = hybrid()
    h.alloc_extend([0], [24], [-1])                            # full 40 left, SWA 8 left
    assert not h.check_decode_capacity(num_tokens=16, tree_cache=Cache())
    assert h.check_decode_capacity(num_tokens=8, tree_cache=Cache())
    assert asked == [(0, 8)]


def test_resize_and_clear_SWA_18() -> None:
    """SWA-18: resize reads both sizes; clear releases every pair."""
    h = hybrid()
    h.alloc_extend([0], [8], [-1])
    h.resize(HybridResizeConfig(full_max_total_num_tokens=32, swa_max_total_num_tokens=16))
    assert (h.full.num_pages, h.swa.num_pages, h.mapping, h.available_size()) == (8, 4, {}, 16)


@pytest.mark.parametrize("ps", [1, 4])
def test_census_reports_broken_mapping_SWA_2_SWA_3_SWA_4_SWA_19(ps: int) -> None:
    """SWA-2..4, SWA-19: the census names a stale pair, a shared peer and a leaked SWA page."""
    h = HybridModel(64, 32, ps)
    row = h.alloc(8) if ps == 1 else h.alloc_extend([0], [8], [-1])
    assert row is not None and not h.verify_byte_accounting()
    stale = h.copy()
    stale.swa._release([stale.mapping[row[0]] // ps])          # released without clearing
    assert any(p.startswith("SWA-2") for p in stale.verify_byte_accounting())
    shared = h.copy()
    shared.mapping[row[1]] = shared.mapping[row[0]]
    assert any(p.startswith("SWA-3") for p in shared.verify_byte_accounting())
    leak = h.copy()
    for f in row[: max(ps, 1)]:
        del leak.mapping[f]
    assert any(p.startswith("SWA-4") for p in leak.verify_byte_accounting())


@pytest.mark.parametrize("ps", [1, 2, 4])
def test_random_runs_keep_the_invariants_SWA_2_SWA_4(ps: int) -> None:
    """SWA-2..4 after every step of random valid traffic (grow, slide, finish, groups)."""
    rng = random.Random(ps)
    h = HybridModel(96, 48, ps, need_sort=ps == 2)
    rows: list[tuple[list[int], int]] = []                     # (row, SWA released frontier)
    for _ in range(300):
        op = rng.random()
        if op < 0.35 or not rows:
            n = rng.randint(1, 9)
            got = h.alloc(n) if ps == 1 else h.alloc_extend([0], [n], [-1])
            if got is not None:
                rows.append((got, 0))
        elif op < 0.6:
            i = rng.randrange(len(rows))
            row, front = rows[i]
            pre = len(row)
            if ps > 1 and (pre % ps == 0 or front < pre):
                got = h.alloc_decode([pre + 1], [row[-1]])
                if got is not None:
                    rows[i] = (row + got, front)
        elif op < 0.8:
            i = rng.randrange(len(rows))
            row, front = rows[i]
            end = slide_end(len(row), rng.randint(1, 6), ps)
            if end > front:
                h.free_swa(row[front:end])
                rows[i] = (row, end)
        else:
            row, front = rows.pop(rng.randrange(len(rows)))
            grouped = rng.random() < 0.5
            if grouped:
                h.free_group_begin()
            h.free_full(row[:front])
            h.free(row[front:])
            if grouped:
                h.free_group_end()
        h.check_invariants()


def test_segments_skip_an_empty_segment_SWA_14() -> None:
    """SWA-14: an empty segment frees nothing and the segments after it still free both sides."""
    h = hybrid()
    row = h.alloc_extend([0], [8], [-1])
    assert row is not None
    h.free_segments([([], 0), (row, 0)])
    assert (h.mapping, h.available_size()) == ({}, 32)
    h.check_invariants()


def test_swa_segment_off_the_row_layout_is_refused_SEG_1() -> None:
    """SEG-1: SWA-side slots that cannot be positions start_pos... of a row are refused
    before anything changes."""
    h = hybrid()
    row = h.alloc_extend([0], [8], [-1])
    assert row is not None
    before = h.snapshot()
    with pytest.raises(ContractViolation, match="SEG-1"):
        h.free_swa_segment(row[:4], start_pos=1)                # offsets 0.. for positions 1..
    assert h.snapshot() == before
