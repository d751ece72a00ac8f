"""The caller-error validators of ``kvpool.spec.rules``, on the edges a random run may miss.

Non-int slots and lengths of every kind (``FREE-1``, ``DECODE-2``), a batch whose later request
breaks a rule after one with an empty prefix (``EXTEND-3``: every request is checked), and an
empty segment's entry in ``check_segments`` (``SEG-6``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kvpool.spec import ContractViolation, rules
from kvpool.spec.segments import next_trim


def _status(owned: set[int]) -> Callable[[int], str]:
    return lambda page: rules.OWNED if page in owned else rules.FREE


def _clause(fn: Callable[[], object]) -> str:
    with pytest.raises(ContractViolation) as err:
        fn()
    return err.value.clause


@pytest.mark.parametrize("slot", [True, False, 9.0, 8.5, None, "9", [9]])
def test_check_slot_rejects_non_int_slots_FREE_1(slot: object) -> None:
    """A bool or float is not a slot, even when its value would be a valid one."""
    assert _clause(lambda: rules.check_slot(slot, 4, 4)) == "FREE-1"  # type: ignore[arg-type]


def test_check_slot_range_and_padding_page_FREE_1_FREE_2() -> None:
    ps, num_pages = 4, 3
    assert rules.check_slot(ps, ps, num_pages) == 1
    assert rules.check_slot((num_pages + 1) * ps - 1, ps, num_pages) == num_pages
    assert _clause(lambda: rules.check_slot((num_pages + 1) * ps, ps, num_pages)) == "FREE-1"
    assert _clause(lambda: rules.check_slot(-1, ps, num_pages)) == "FREE-1"
    assert _clause(lambda: rules.check_slot(ps - 1, ps, num_pages)) == "FREE-2"
    assert _clause(lambda: rules.check_slot(0, ps, num_pages)) == "FREE-2"


@pytest.mark.parametrize("clause", ["EXTEND", "DECODE"])
def test_check_extend_checks_requests_after_an_empty_prefix_EXTEND_3(clause: str) -> None:
    """Request 0 has prefix 0 (nothing to check on its last_loc); a bad last_loc of request 1
    (on a free page, or outside the pool) is still caught."""
    ps, owned = 4, {2}
    ok = rules.check_extend([0, 5], [3, 7], [-1, 8], page_size=ps, num_pages=4,
                            status_of=_status(owned), clause_prefix=clause)
    assert ok == [1, 0]
    for bad_loc in (12, 100):  # page 3 is free; 100 is outside the pool
        err = _clause(lambda loc=bad_loc: rules.check_extend(  # type: ignore[misc]
            [0, 5], [3, 7], [-1, loc], page_size=ps, num_pages=4, status_of=_status(owned),
            clause_prefix=clause))
        assert err == f"{clause}-3"


def test_check_extend_partial_page_continued_twice_EXTEND_8() -> None:
    """Two requests continuing one partial page, even with an empty-prefix request between."""
    status = _status({2})
    assert _clause(lambda: rules.check_extend(
        [1, 0, 2], [2, 1, 3], [8, -1, 9], page_size=4, num_pages=4, status_of=status)) == \
        "EXTEND-8"


@pytest.mark.parametrize("seq", [None, "3", 3.0, True, 0, -1])
def test_check_decode_rejects_bad_seq_lens_DECODE_2(seq: object) -> None:
    """Not an int >= 1: DECODE-2 (a ContractViolation, never a TypeError)."""
    assert _clause(lambda: rules.check_decode(
        [seq], [7], page_size=4, num_pages=4, status_of=_status({1}))) == "DECODE-2"  # type: ignore[list-item]


def test_check_decode_delegates_with_decode_clauses_DECODE_3() -> None:
    status = _status({1})
    assert rules.check_decode([6, 5], [4, 7], page_size=4, num_pages=4,
                              status_of=status) == [0, 1]
    assert _clause(lambda: rules.check_decode([6], [4, 7], page_size=4, num_pages=4,
                                              status_of=status)) == "DECODE-1"
    assert _clause(lambda: rules.check_decode([6], [9], page_size=4, num_pages=4,
                                              status_of=status)) == "DECODE-3"


def test_check_segments_keeps_an_empty_entry_for_an_empty_segment_SEG_6() -> None:
    """An empty segment is skipped but keeps its place: one entry per segment, in order, and it
    imposes no order on the segments around it."""
    ps, status = 2, _status({1, 2, 3, 4})
    out = rules.check_segments([([2, 3], 0), ([], 99), ([4, 5], 2), ([], 0)],
                               page_size=ps, num_pages=4, status_of=status)
    assert out == [[1], [], [2], []]
    assert rules.check_segments([([], 5)], page_size=ps, num_pages=4, status_of=status) == [[]]


@pytest.mark.parametrize(("free_index", "start_pos"),
                         [([5, 4], 0), ([8, 9], 1), ([4, 5, 6, 7, 9], 0)])
def test_check_segments_rejects_slots_off_their_in_page_offset_SEG_1(
        free_index: list[int], start_pos: int) -> None:
    """Slots on the right pages but at the wrong offsets within them do not follow a row layout
    (consistent page mapping alone is not enough)."""
    status = _status({1, 2, 3})
    assert _clause(lambda: rules.check_segments(
        [(free_index, start_pos)], page_size=4, num_pages=4, status_of=status)) == "SEG-1"


@pytest.mark.parametrize("prev_end", [None, 3, 6])
def test_next_trim_empty_segment_drops_nothing_SEG_6(prev_end: int | None) -> None:
    """An empty segment: nothing to drop, ``prev_end`` unchanged; a non-empty one after it is
    trimmed against the segment before."""
    assert next_trim(6, 0, prev_end, 4) == (0, prev_end)
    assert next_trim(6, 3, prev_end, 4) == (2 if prev_end == 6 else 0, 9)
