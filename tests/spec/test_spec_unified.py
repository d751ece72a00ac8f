"""The unified memory pools' model (``UNI-*``): concrete cases per clause, random runs whose
census stays empty, and broken states the census must name."""

from __future__ import annotations

import random

import pytest
from kvpool.spec import ContractViolation
from kvpool.spec import unified_layout as ul
from kvpool.spec.unified import UnifiedSWAModel


def model(lazy: bool = False, page_size: int = 1, total_bytes: int = 640) -> UnifiedSWAModel:
    return UnifiedSWAModel(total_bytes, page_size, 32, 32, lazy=lazy)


def test_pages_are_byte_ranges_of_one_buffer_UNI_1() -> None:
    """UNI-1: whole rows then whole pages; page p covers [p * pb, (p + 1) * pb)."""
    assert ul.num_pages(1000, 32, 4) == 7            # 31 rows, 7 whole pages of 4
    assert ul.page_byte_range(3, 128) == (384, 512)
    u = UnifiedSWAModel(1000, 4, 32, 16, lazy=False)
    assert (u.full.pages, u.swa.pages) == (7, 15)
    assert (u.full.page_bytes, u.swa.page_bytes) == (128, 64)


def test_reserved_sink_UNI_2() -> None:
    """UNI-2: the sink is page_size rows of the widest paged entry (or a state row); the first
    allocatable page of each sub-pool lies wholly above it; no room above it is refused."""
    assert ul.reserved_floor_bytes(32, 0, 4) == 128
    assert ul.reserved_floor_bytes(32, 500, 4) == 500
    assert ul.min_page_index(128, 32, 4) == 1 and ul.min_page_index(128, 16, 4) == 2
    assert ul.min_page_index(129, 32, 4) == 2
    u = UnifiedSWAModel(1024, 4, 32, 16, lazy=False)
    assert (u.floor_bytes, u.full.min_page, u.swa.min_page) == (128, 1, 2)
    assert u.swa.band()[0] == u.floor_bytes
    with pytest.raises(ContractViolation, match="UNI-2"):
        UnifiedSWAModel(128, 4, 32, 32, lazy=False)


def test_ends_grow_inward_and_never_cross_UNI_3() -> None:
    """UNI-3: swa grows up from the sink, full down from the top; their bands never meet."""
    u = model()
    assert u.swa.band() == (32, 32) and u.full.band() == (640, 640)
    u.alloc(9)                                           # the whole capacity
    assert u.swa.band() == (32, 320) and u.full.band() == (352, 640)
    assert u.swa.band()[1] <= u.full.band()[0] and u.alloc(1) is None
    assert ul.frontier_bytes(False, 5, 1, 10, 8) == (48, 80)
    u.swa.watermark = 12                                 # a broken frontier is named
    assert any("UNI-3" in p for p in u.census())


def test_float_middle_pools_keep_the_chain_ordered_UNI_3() -> None:
    """UNI-3: with a float middle pool every non-empty band clears the ones below it; a parked
    (empty) float is passed over; a float overlapping an end is a violation."""
    assert ul.bands_ordered([(32, 96), (96, 160), (320, 640)])
    assert ul.bands_ordered([(32, 96), (200, 200), (96, 640)])         # parked float
    assert not ul.bands_ordered([(32, 128), (96, 160), (320, 640)])    # float under the up end
    assert not ul.bands_ordered([(32, 96), (96, 400), (320, 640)])     # float over the down end


def test_tables_are_a_bijection_on_live_pages_UNI_4() -> None:
    """UNI-4: v2p and p2v inverse on live pages; a stale p2v entry is named."""
    u = model(page_size=4, total_bytes=2560)
    row = u.alloc(8)
    assert row == list(range(4, 12))
    for side in (u.full, u.swa):
        assert all(side.p2v[p] == v for v, p in side.v2p.items()) and len(side.p2v) == 2
    u.full.p2v[u.full.v2p[1]] = 2
    assert any("UNI-4" in p for p in u.census())


def test_holes_and_span_UNI_5() -> None:
    """UNI-5: eager leaves no hole; lazy keeps them, span == live + holes, reuse before extend."""
    eager, lazy = model(), model(lazy=True)
    for u in (eager, lazy):
        u.free(u.alloc(4)[:2])
    assert eager.full.holes == [] and eager.full.span_pages() == 2
    assert lazy.full.holes == [16, 17] and lazy.swa.holes == [1, 2]
    assert lazy.full.span_pages() == 4 == len(lazy.full.v2p) + len(lazy.full.holes)
    frontier = lazy.swa.watermark
    lazy.alloc(2)
    assert lazy.swa.holes == [] and lazy.swa.watermark == frontier   # holes reused first
    lazy.swa.holes.append(7)                                         # a hole counted twice
    assert any("UNI-5" in p for p in lazy.census())


def test_compaction_moves_only_vacated_survivors_UNI_6() -> None:
    """UNI-6: eager free of K pages retreats the frontier by K; only survivors in the vacated
    band move, to the kept band's holes, keeping their bytes; a lost move is named."""
    u = model()
    row = u.alloc(5)                                     # swa pages 1..5
    u.free([row[0], row[2]])                             # holes 1, 3; vacated band [4, 6)
    assert u.swa.moves == [(4, 1), (5, 3)] and u.swa.watermark == 4
    assert u.translate([row[3], row[4]], "swa") == [1, 3]
    assert all(u.swa.content[p] == v for v, p in u.swa.v2p.items())
    assert u.full.moves == [(16, 17)]                    # full: pages 15..19, vacated [15, 17)
    u.swa.content[1] = 99                                # the bytes did not follow the move
    assert any("UNI-6" in p for p in u.census())


def test_lazy_compaction_runs_when_only_the_compacted_fit_holds_UNI_6_UNI_8() -> None:
    """UNI-6, UNI-8: lazy compacts both sides exactly when the compacted fit is needed."""
    u = model(lazy=True)
    row = u.alloc(9)
    u.free_swa(row[:3])                                  # 3 SWA holes, no full hole
    assert u.alloc(1) == [10] and u.gap_bytes() == 0 and not u.swa.moves
    assert not u.fits(1, compacted=False) and u.fits(1, compacted=True)
    assert u.alloc(1) == [11] and u.swa.holes == [] and u.swa.moves
    assert u.census() == []


def test_capacity_from_bytes_UNI_7() -> None:
    """UNI-7: eager and lazy capacity are the largest page count that fits (brute force)."""
    rng = random.Random(7)
    for _ in range(3000):
        gap, pf, ps = rng.randint(0, 300), rng.randint(1, 9), rng.randint(1, 9)
        hf, hs, rf, rs = (rng.randint(0, 12) for _ in range(4))
        best = max(n for n in range(60) if ul.fits_pages(n, n, hf, hs, rf, rs, gap, pf, ps))
        assert ul.lazy_joint_pages(gap, pf, ps, hf, hs, rf, rs) == best
        best0 = max(n for n in range(60) if ul.fits_pages(n, n, 0, 0, rf, rs, gap, pf, ps))
        assert ul.eager_joint_pages(gap, pf, ps, rf, rs) == best0
    u = UnifiedSWAModel(2560, 4, 32, 16, lazy=False)     # 2 + 1 pages of bytes per token page
    assert u.available_size() == (2560 - 128) // (128 + 64) * 4


def test_alloc_succeeds_exactly_when_it_fits_UNI_8() -> None:
    """UNI-8: None exactly when the pages do not fit, state unchanged; extend/decode take new
    pages only where the paged rules need one."""
    u = model(page_size=4, total_bytes=2560)
    cap = u.available_size()
    assert u.alloc(cap + 4) is None and u.census() == [] and u.available_size() == cap
    row = u.alloc_extend([0, 0], [5, 3], [-1, -1])
    assert row == [4, 5, 6, 7, 8, 12, 13, 14]
    assert u.alloc_decode([6, 4], [8, 14]) == [9, 15]    # both continue their page
    assert u.alloc_decode([9], [11]) == [16]             # position 8 starts a page
    with pytest.raises(ContractViolation, match="UNI-8"):
        u.alloc(3)


def test_per_side_views_UNI_9() -> None:
    """UNI-9: a side's schedulable size credits the neighbour's compactable holes; the per-side
    views clamp it to the static cap minus the side's live tokens."""
    u = UnifiedSWAModel(640, 1, 32, 32, lazy=True, full_max_tokens=12, swa_max_tokens=12)
    row = u.alloc(6)
    u.free_swa(row[:4])                                  # 4 SWA holes
    gap_pages = u.gap_bytes() // 32
    assert u.schedulable_available_size("full") == min(gap_pages + 4, u.full.room())
    assert u.schedulable_available_size("swa") == min(gap_pages, u.swa.room()) + 4
    assert u.full_available_size() == min(12 - 6, u.schedulable_available_size("full"))
    assert u.swa_available_size() == min(12 - 2, u.schedulable_available_size("swa"))


def test_swa_binds_a_subset_of_the_full_ids_UNI_10() -> None:
    """UNI-10: free_swa keeps the ids and full pages; free returns ids ascending; ids stay
    partitioned."""
    u = model()
    row = u.alloc(4)
    u.free_swa(row[:2])
    assert set(u.swa.v2p) == {3, 4} and set(u.full.v2p) == {1, 2, 3, 4}
    u.free_swa(row[:3])                                  # released pages are skipped
    assert set(u.swa.v2p) == {4}
    u.free([4, 2])
    assert u.free_virtual[-2:] == [2, 4] and u.census() == []
    u.swa.bind([9], [7])                                 # SWA binds an id full does not hold
    assert any("UNI-10" in p for p in u.census())


def test_translation_and_freed_ids_UNI_11() -> None:
    """UNI-11: rows follow v2p and the in-page offset; a freed id has no row."""
    u = model(page_size=4, total_bytes=2560)
    row = u.alloc(8)
    assert u.translate(row) == [u.full.v2p[t // 4] * 4 + t % 4 for t in row]
    u.free_swa(row[:4])
    assert u.translate(row[:1], "swa") == [0]
    u.free(row[:4])
    with pytest.raises(ContractViolation, match="UNI-11"):
        u.translate(row[:1])
    before = (dict(u.full.v2p), list(u.free_virtual))
    with pytest.raises(ContractViolation, match="UNI-11"):
        u.free(row[:1])                                  # double free, nothing changed
    assert (u.full.v2p, u.free_virtual) == before


def test_clear_UNI_12() -> None:
    """UNI-12: clear is the empty state."""
    u, fresh = model(lazy=True), model(lazy=True)
    u.free(u.alloc(5)[1:3])
    u.clear()
    assert (u.full.v2p, u.swa.holes, u.free_virtual) == ({}, [], fresh.free_virtual)
    assert u.available_size() == fresh.available_size() and u.census() == []


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("page_size", [1, 4])
def test_census_stays_empty_on_random_runs_UNI_13(lazy: bool, page_size: int) -> None:
    """UNI-13: random alloc / extend / decode / free_swa / free keep the census empty and
    capacity consistent with the fit."""
    rng = random.Random(page_size * 2 + lazy)
    u = model(lazy=lazy, page_size=page_size, total_bytes=640 * page_size)
    rows: list[list[int]] = []
    for _ in range(400):
        op = rng.random()
        if op < 0.4:
            n = rng.randint(1, 3 * page_size)
            fit = u.fits(-(-n // page_size), compacted=lazy)
            row = u.alloc_extend([0], [n], [-1])
            assert (row is None) == (not fit)
            if row is not None:
                rows.append(row)
        elif op < 0.6 and rows:
            row = rng.choice(rows)
            got = u.alloc_decode([len(row) + 1], [row[-1]])
            if got is not None:
                row.extend(got)
        elif op < 0.75 and rows:
            row = rng.choice(rows)
            u.free_swa(row[: len(row) // page_size * page_size - page_size])
        elif rows:
            u.free(rows.pop(rng.randrange(len(rows))))
        assert u.census() == []
        assert u.available_size() // page_size == max(
            n for n in range(u.available_size() // page_size + 2) if u.fits(n, compacted=False))


def test_census_is_not_empty_on_broken_states_UNI_13() -> None:
    """UNI-13: each planted inconsistency is reported."""
    breaks = {
        "frontier": lambda u: setattr(u.full, "watermark", u.full.watermark - 1),
        "stale v2p": lambda u: u.full.v2p.__setitem__(1, 5),
        "lost id": lambda u: u.free_virtual.pop(),
        "sink": lambda u: u.swa.bind([9], [0]),
    }
    for name, brk in breaks.items():
        u = model()
        u.alloc(3)
        brk(u)
        assert u.census(), name
