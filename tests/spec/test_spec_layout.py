"""Pure index arithmetic (spec/layout.py, spec/segments.py) on SGLang's own numbers, plus small
exhaustive cross-checks against brute force."""

from __future__ import annotations

import random
from itertools import combinations

import pytest
from kvpool.spec import (
    ceil_div,
    decode_needs_page,
    extend_parts,
    extend_row,
    last_loc_aligned,
    merge_bound,
    num_new_pages,
    page_slots,
    rep_offsets,
    segment_pages,
    segments_pages,
    touched_pages,
    trim_boundary,
)
from kvpool.spec.segments import segment_layout_ok


def test_extend_row_sglang_example_EXTEND_5() -> None:
    """test_num1_and_num2_and_num3: ps 4, prefix 2, seq 11, last_loc 1, free pages 3, 4."""
    assert num_new_pages(2, 11, 4) == 2
    assert extend_parts(2, 11, 4) == (2, 4, 3)
    assert extend_row(2, 11, 1, [3, 4], 4) == [2, 3, 12, 13, 14, 15, 16, 17, 18]


@pytest.mark.parametrize(
    ("prefix_len", "seq_len", "last_loc", "new_pages", "expected", "parts"),
    [
        (2, 3, 1, [], [2], (1, 0, 0)),                               # part 1 only
        (4, 8, 3, [3], [12, 13, 14, 15], (0, 4, 0)),                 # part 2 only
        (4, 6, 3, [3], [12, 13], (0, 0, 2)),                         # part 3 only
        (2, 8, 1, [3], [2, 3, 12, 13, 14, 15], (2, 4, 0)),           # 1 + 2
        (2, 6, 1, [3], [2, 3, 12, 13], (2, 0, 2)),                   # 1 + 3
        (4, 10, 3, [3, 4], [12, 13, 14, 15, 16, 17], (0, 4, 2)),     # 2 + 3
        (2, 2, 1, [], [], (0, 0, 0)),                                # zero extend
        (0, 5, -1, [3, 4], [12, 13, 14, 15, 16], (0, 4, 1)),         # from an empty prefix
    ],
)
def test_extend_row_parts_EXTEND_5(prefix_len: int, seq_len: int, last_loc: int,
                                   new_pages: list[int], expected: list[int],
                                   parts: tuple[int, int, int]) -> None:
    assert num_new_pages(prefix_len, seq_len, 4) == len(new_pages)
    assert extend_parts(prefix_len, seq_len, 4) == parts
    assert extend_row(prefix_len, seq_len, last_loc, new_pages, 4) == expected


def test_extend_row_gpu_examples_EXTEND_7() -> None:
    """test_allocator_gpu: exact unaligned outputs and two unaligned requests."""
    assert extend_row(2, 11, 1, [1, 2], 4) == [2, 3, 4, 5, 6, 7, 8, 9, 10]
    # pre=[1,3], seq=[6,7], last_loc=[4,10], free pages 3, 4: one new page each, batch order
    assert extend_row(1, 6, 4, [3], 4) + extend_row(3, 7, 10, [4], 4) == [
        5, 6, 7, 12, 13, 11, 16, 17, 18]


@pytest.mark.parametrize(("seq_len", "last_loc", "new_pages", "expected"), [
    (4, 2, [], [3]),      # test_alloc_decode_within_page_no_new_page_consumed
    (5, 3, [7], [28]),    # crossing a page boundary: page * ps
    (8, 14, [], [15]),
    (9, 23, [9], [36]),
])
def test_decode_as_extend_by_one_DECODE_5(seq_len: int, last_loc: int, new_pages: list[int],
                                          expected: list[int]) -> None:
    assert decode_needs_page(seq_len, 4) == bool(new_pages)
    assert num_new_pages(seq_len - 1, seq_len, 4) == len(new_pages)
    assert extend_row(seq_len - 1, seq_len, last_loc, new_pages, 4) == expected


def test_decode_needs_page_general_formula_DECODE_4() -> None:
    """ps 1: every decode step opens a page (SGLang's seq % ps == 1 count says 0)."""
    assert all(decode_needs_page(seq, 1) for seq in range(1, 20))
    assert [seq for seq in range(1, 20) if decode_needs_page(seq, 4)] == [1, 5, 9, 13, 17]


def test_layout_small_functions() -> None:
    assert [ceil_div(a, 4) for a in range(10)] == [0, 1, 1, 1, 1, 2, 2, 2, 2, 3]
    assert merge_bound(11, 2, 4) == 11 // 4 + 2 + 1
    assert page_slots([3, 1], 2) == [6, 7, 2, 3]
    assert page_slots([], 4) == []
    assert last_loc_aligned(0, -1, 4) and not last_loc_aligned(0, 3, 4)
    assert last_loc_aligned(2, 5, 4) and not last_loc_aligned(2, 6, 4)
    assert not last_loc_aligned(4, -1, 4) and last_loc_aligned(4, 7, 4)
    assert last_loc_aligned(3, 9, 1) and not last_loc_aligned(3, -1, 1)


@pytest.mark.parametrize("ps", [1, 2, 3, 4, 8])
def test_extend_exhaustive_against_positions_EXTEND_4_EXTEND_5(ps: int) -> None:
    """For every prefix <= seq <= 3 ps + 1: the new pages are the logical pages the new
    positions reach beyond the prefix's; parts add up; the row layout holds."""
    for seq_len in range(3 * ps + 2):
        for prefix_len in range(seq_len + 1):
            logical = {p // ps for p in range(prefix_len, seq_len)} - {
                p // ps for p in range(prefix_len)}
            count = num_new_pages(prefix_len, seq_len, ps)
            assert count == len(logical)
            assert merge_bound(seq_len - prefix_len, 1, ps) >= count
            assert sum(extend_parts(prefix_len, seq_len, ps)) == seq_len - prefix_len
            last_loc = -1 if prefix_len == 0 else 100 * ps + (prefix_len - 1) % ps
            new_pages = [200 + 3 * k for k in range(count)]
            row = extend_row(prefix_len, seq_len, last_loc, new_pages, ps)
            assert len(row) == seq_len - prefix_len
            assert segment_layout_ok(row, prefix_len, ps)
            assert {s // ps for s in row} - {100} == set(new_pages)


# -- segments -------------------------------------------------------------------------------------

def _random_row(num_tokens: int, ps: int, rng: random.Random) -> list[int]:
    """A row of ``num_tokens`` positions on distinct random pages (row layout, MODEL-4)."""
    pages = rng.sample(range(1, 10 * (num_tokens // ps + 2)), ceil_div(num_tokens, ps))
    return [pages[p // ps] * ps + p % ps for p in range(num_tokens)]


@pytest.mark.parametrize("ps", [1, 2, 3, 4, 16])
def test_segment_pages_every_subrange_SEG_2(ps: int) -> None:
    """test_paged_free_segment: every (start, end) of rows of length 1, ps, ps+1, 3ps-1 equals
    the distinct pages of the slots (a torch.unique reference), listed in row order."""
    rng = random.Random(ps)
    for length in sorted({1, ps, ps + 1, 3 * ps - 1}):
        for _ in range(3):
            row = _random_row(length, ps, rng)
            for start in range(length + 1):
                for end in range(start, length + 1):
                    seg = row[start:end]
                    pages = segment_pages(seg, start, ps)
                    in_row_order = list(dict.fromkeys(s // ps for s in seg))
                    assert pages == in_row_order, (row, start, end)
                    assert len(rep_offsets(end - start, start, ps)) == len(pages)
                    assert list(touched_pages(end - start, start, ps)) == sorted(
                        {p // ps for p in range(start, end)})


def test_rep_offsets_shapes_SEG_2() -> None:
    assert rep_offsets(0, 5, 4) == []
    assert rep_offsets(9, 0, 4) == [0, 4, 8]
    assert rep_offsets(9, 2, 4) == [0, 2, 6]
    assert rep_offsets(1, 3, 4) == [0]
    assert rep_offsets(5, 0, 1) == [0, 1, 2, 3, 4]


def test_segments_pages_sglang_boundary_examples_SEG_5() -> None:
    row = list(range(4, 16))  # positions 0..11 on pages 1, 2, 3
    assert segments_pages([(row[0:6], 0), (row[6:11], 6)], 4) == [1, 2, 3]
    assert segments_pages([(row[0:5], 0), (row[7:11], 7)], 4) == [1, 2, 3]
    assert segments_pages([(row[0:5], 0), (row[5:7], 5)], 4) == [1, 2]       # inside: nothing
    assert segments_pages([(row[0:4], 0), (row[4:11], 4)], 4) == [1, 2, 3]   # aligned: untrimmed
    assert segments_pages([(row[0:6], 0), ([], 6), (row[6:11], 6)], 4) == [1, 2, 3]  # SEG-6


def test_trim_boundary_SEG_5() -> None:
    assert trim_boundary(6, 5, None, 4) == 0
    assert trim_boundary(6, 5, 6, 4) == 2
    assert trim_boundary(7, 4, 5, 4) == 1
    assert trim_boundary(5, 2, 5, 4) == 2   # wholly inside the shared page
    assert trim_boundary(8, 3, 7, 4) == 0
    assert trim_boundary(4, 7, 4, 4) == 0


def _random_segments(row: list[int], rng: random.Random) -> list[tuple[list[int], int]]:
    """Ascending disjoint (possibly touching, possibly empty) segments of ``row``."""
    cuts = sorted(rng.randint(0, len(row)) for _ in range(2 * rng.randint(1, 4)))
    return [(row[a:b], a) for a, b in zip(cuts[::2], cuts[1::2])]


@pytest.mark.parametrize("ps", [1, 2, 3, 4, 8])
def test_segments_pages_release_each_touched_page_once_SEG_5(ps: int) -> None:
    """Random ascending disjoint segment lists: the pages released are exactly the pages the
    segments' slots lie on (brute-force set), each once."""
    rng = random.Random(1000 + ps)
    for _ in range(300):
        row = _random_row(rng.randint(1, 5 * ps), ps, rng)
        segments = _random_segments(row, rng)
        pages = segments_pages(segments, ps)
        brute = {s // ps for seg, _ in segments for s in seg}
        assert len(pages) == len(set(pages)), (segments, pages)
        assert set(pages) == brute, (segments, pages)


@pytest.mark.parametrize("ps", [2, 4])
def test_segments_pages_exhaustive_pairs_SEG_5(ps: int) -> None:
    """Every pair of ascending disjoint segments of a 3-page row."""
    row = _random_row(3 * ps, ps, random.Random(ps))
    points = range(3 * ps + 1)
    for a, b, c, d in combinations(points, 4):
        for first, second in (((a, b), (c, d)), ((a, b), (b, d)), ((a, c), (c, d))):
            segments = [(row[first[0]:first[1]], first[0]), (row[second[0]:second[1]], second[0])]
            pages = segments_pages(segments, ps)
            brute = {s // ps for seg, _ in segments for s in seg}
            assert sorted(pages) == sorted(brute), segments


def test_segment_layout_ok_MODEL_4() -> None:
    assert segment_layout_ok([6, 7, 12, 13], 2, 4)
    assert not segment_layout_ok([7, 8], 2, 4)          # offset mismatch
    assert not segment_layout_ok([6, 7, 4, 5], 2, 4)    # logical 1 back on page 1
    assert not segment_layout_ok([6, 7, 12, 17], 2, 4)  # logical 1 split over pages 3, 4
    assert segment_layout_ok([], 3, 4)
    assert not segment_layout_ok([5, 5], 0, 1)           # one page for two positions
