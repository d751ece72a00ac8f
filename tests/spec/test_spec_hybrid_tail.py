"""``HybridModel.alloc_extend_swa_tail`` (SWA-20): SGLang's PD-decode pre-allocation -- the full
side extends the row, the SWA side gets fresh pages for the tail only; refusals and caller
errors change nothing."""

from __future__ import annotations

import pytest
from kvpool.spec import ContractViolation, HybridModel


def test_the_spec_pairs_the_tail_with_fresh_swa_pages_SWA_20() -> None:
    h = HybridModel(64, 32, 4)
    row = h.alloc_extend_swa_tail([0], [10], [-1], 10, 6)
    assert row == list(range(4, 14))  # full pages 1..3, the row as alloc_extend lays it out
    assert h.translate_loc_from_full_to_swa(row) == [0, 0, 0, 0, 4, 5, 6, 7, 8, 9]
    assert h.swa.free_pages[:1] == [3] and h.full.free_pages[:1] == [4]
    h.check_invariants()
    more = h.alloc_extend_swa_tail([10], [17], [row[-1]], 7, 1)  # prefix continues a page
    assert more == [14, 15, 16, 17, 18, 19, 20]
    assert h.translate_loc_from_full_to_swa(more) == [0] * 6 + [12]
    assert h.alloc_extend_swa_tail([0], [4], [-1], 4, 0) == [24, 25, 26, 27]  # no SWA side
    assert h.translate_loc_from_full_to_swa([24]) == [0]
    h.check_invariants()
    h.free_full(row[:4])  # the slots before the tail have no peer: free_full, not free
    h.free(row[4:])
    h.check_invariants()


@pytest.mark.parametrize(("prefix", "seq", "extend", "swa_tail_len"),
                         [(0, 10, 10, 5),    # the tail starts mid-page
                          (0, 10, 10, 11),   # longer than the extend
                          (0, 10, 10, -1)])  # negative
def test_the_spec_refuses_a_bad_tail_unchanged_SWA_20(prefix: int, seq: int, extend: int,
                                                       swa_tail_len: int) -> None:
    h = HybridModel(64, 32, 4)
    before = h.snapshot()
    with pytest.raises(ContractViolation) as err:
        h.alloc_extend_swa_tail([prefix], [seq], [-1], extend, swa_tail_len)
    assert err.value.clause == "SWA-20" and h.snapshot() == before
    with pytest.raises(ContractViolation, match="one request") as two:
        h.alloc_extend_swa_tail([0, 0], [4, 4], [-1, -1], 8, 4)
    assert two.value.clause == "SWA-20"
    with pytest.raises(NotImplementedError, match="SWA-20"):
        HybridModel(16, 16, 1).alloc_extend_swa_tail([0], [4], [-1], 4, 4)


def test_none_iff_a_side_is_short_and_nothing_changes_SWA_20() -> None:
    for size, size_swa, expect_none in ((64, 8, True), (8, 64, True), (64, 12, False)):
        h = HybridModel(size, size_swa, 4)
        before = h.snapshot()
        got = h.alloc_extend_swa_tail([0], [16], [-1], 16, 12)  # 4 full pages, 3 SWA pages
        assert (got is None) == expect_none
        if got is None:
            assert h.snapshot() == before


@pytest.mark.parametrize(("prefix", "seq", "extend", "tail", "pages"), [
    ([0], [8], 8, 8, 2), ([0], [8], 8, 0, 0), ([4], [9], 5, 5, 2), ([0], [9], 9, 1, 1),
    ([0], [9], 9, 9, 3), ([8], [8], 0, 0, 0)])
def test_check_swa_tail_accepts_a_tail_on_a_page_boundary_SWA_20(
        prefix: list[int], seq: list[int], extend: int, tail: int, pages: int) -> None:
    from kvpool.spec.hybrid_rules import check_swa_tail

    assert check_swa_tail(prefix, seq, extend, tail, 4) == pages


@pytest.mark.parametrize(("prefix", "seq", "extend", "tail"), [
    ([4], [9], 5, 6), ([0], [9], 9, 2), ([0], [9], 9, -1), ([0, 0], [4], 4, 4),
    ([0], [4, 4], 8, 4), ([], [], 0, 0)])
def test_check_swa_tail_refuses_SWA_20(prefix: list[int], seq: list[int], extend: int,
                                      tail: int) -> None:
    from kvpool.spec.hybrid_rules import check_swa_tail

    with pytest.raises(ContractViolation) as err:
        check_swa_tail(prefix, seq, extend, tail, 4)
    assert err.value.clause == "SWA-20"
