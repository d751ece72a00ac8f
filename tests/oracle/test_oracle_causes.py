"""Causes first: a census mismatch (INV-*) right after a call whose own rule explains it is
reported under that rule, the census clause named as the symptom."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvpool.oracle.families.single.attribution import (
    attribute,
    attribute_group_end,
    raise_cause,
)

PS = 4  # page size: page p holds slots 4p .. 4p+3


@dataclass
class Step:
    call: str
    args: dict[str, Any] = field(default_factory=dict)
    clobber: bool = False
    raised: str | None = None


# two segments touching on page 2: slots 6..9 (pages 1, 2) and 10..13 (pages 2, 3)
SEGMENTS = {"segments": [[[6, 7, 8, 9], 2], [[10, 11, 12, 13], 6]]}


def test_boundary_page_counted_twice_by_free_segments_is_seg_5() -> None:
    """The free list is right (a set), only available_size() counts the boundary page twice."""
    got = attribute("free_segments", SEGMENTS, page_size=PS, extra=[], lacking=[],
                    group_open=False, available_delta=PS)
    assert got is not None and got[0] == "SEG-5", got
    assert "[2] more than once" in got[1]


def test_boundary_page_listed_twice_or_never_is_seg_5() -> None:
    twice = attribute("free_segments", SEGMENTS, page_size=PS, extra=[2], lacking=[],
                      group_open=False)
    never = attribute("free_segments", SEGMENTS, page_size=PS, extra=[], lacking=[2],
                      group_open=False)
    assert twice is not None and twice[0] == "SEG-5" and "more than once" in twice[1]
    assert never is not None and never[0] == "SEG-5" and "never" in never[1]


def test_mismatch_on_pages_the_call_did_not_touch_stays_a_census_failure() -> None:
    assert attribute("free_segments", SEGMENTS, page_size=PS, extra=[7], lacking=[],
                     group_open=False) is None
    assert attribute("free", {"free_index": [4]}, page_size=PS, extra=[], lacking=[],
                     group_open=False, available_delta=2 * PS) is None  # 2 pages, 1 touched
    assert attribute("alloc", {"need_size": 4}, page_size=PS, extra=[1], lacking=[],
                     group_open=False) is None


def test_group_that_did_not_copy_its_inputs_is_group_3() -> None:
    """The caller wrote zeros into the tensor it passed; the group end released page 0."""
    steps = [Step("free_group_begin"), Step("free", {"free_index": [4, 5, 6, 7]}, clobber=True),
             Step("free_group_end")]
    got = attribute_group_end(steps, page_size=PS, extra=[0], lacking=[1])
    assert got is not None and got[0] == "GROUP-3", got
    raised = [*steps[:-1], Step("free_group_end", raised="ContractViolation: page 0")]
    assert raise_cause(raised, "GROUP-4", "raised")[0] == "GROUP-3"
    # a deferred free's own bug (its last page kept) is that free's rule, not GROUP-3
    kept = attribute_group_end(steps, page_size=PS, extra=[], lacking=[1])
    assert kept is not None and kept[0] == "FREE-4", kept


def test_group_end_explained_by_a_deferred_segment_free_is_seg_5() -> None:
    steps = [Step("free_group_begin"), Step("free_segments", SEGMENTS, clobber=True),
             Step("free_group_end")]
    got = attribute_group_end(steps, page_size=PS, extra=[2], lacking=[])
    assert got is not None and got[0] == "SEG-5", got
    counted = attribute_group_end(steps, page_size=PS, extra=[], lacking=[], available_delta=PS)
    assert counted is not None and counted[0] == "SEG-5", counted


def test_page_named_by_two_frees_of_a_group_released_twice_is_group_6() -> None:
    steps = [Step("free_group_begin"), Step("free", {"free_index": [4, 5]}),
             Step("free", {"free_index": [6, 7]}), Step("free_group_end")]
    got = attribute_group_end(steps, page_size=PS, extra=[1], lacking=[])
    assert got is not None and got[0] == "GROUP-6", got


def test_second_group_end_that_changes_the_pages_is_group_2() -> None:
    steps = [Step("free_group_begin"), Step("free", {"free_index": [4]}), Step("free_group_end"),
             Step("free_group_end")]
    got = attribute_group_end(steps, page_size=PS, extra=[1], lacking=[])
    assert got is not None and got[0] == "GROUP-2", got
    assert attribute_group_end(steps[:3], page_size=PS, extra=[9], lacking=[]) is None
    idle = [*steps[:3], Step("free_group_end", raised="ContractViolation: [FREE-3] page 1")]
    assert raise_cause(idle, "GROUP-4", "raised")[0] == "GROUP-2"


def test_allocation_whose_page_stays_free_is_its_result_rule() -> None:
    got = attribute("alloc", {"need_size": 8}, page_size=PS, extra=[3], lacking=[],
                    group_open=False, handed_out=[8, 9, 10, 11, 12, 13, 14, 15])
    assert got is not None and got[0] == "ALLOC-4", got
    assert attribute("alloc", {"need_size": 8}, page_size=PS, extra=[5], lacking=[],
                     group_open=False, handed_out=[8, 9, 10, 11, 12, 13, 14, 15]) is None


def test_census_wrong_right_after_clear_or_resize_is_life_1_or_2() -> None:
    for call, clause in (("clear", "LIFE-1"), ("resize", "LIFE-2")):
        got = attribute(call, {}, page_size=PS, extra=[], lacking=[7], group_open=False)
        assert got is not None and got[0] == clause, got


def test_free_of_nothing_that_raises_is_free_6() -> None:
    empty = Step("free", {"free_index": []}, raised="IndexError: index 0")
    assert raise_cause([empty], "FREE-4", "free raised")[0] == "FREE-6"
    some = Step("free", {"free_index": [4]}, raised="IndexError: x")
    assert raise_cause([some], "FREE-4", "free raised") == ("FREE-4", "free raised")
    segs = Step("free_segments", {"segments": [[[], 0], [[], 3]]}, raised="ValueError: x")
    assert raise_cause([segs], "SEG-5", "raised")[0] == "SEG-6"
    named = Step("free_segments", {"segments": [[[4, 5], 1], [[], 3]]},
                 raised="ContractViolation: [FREE-3] double free: page 1 is already free")
    assert raise_cause([named], "SEG-5", "raised")[0] == "SEG-5"  # its own rule, not SEG-6


def test_page_freed_by_the_cache_and_a_free_of_one_group_released_twice_is_group_6() -> None:
    """The tree cache's eviction frees entries through ``free()`` inside the group."""
    steps = [Step("free_group_begin"),
             Step("evict_to_free_tokens", {"entries": [[4, 5, 6], [8]], "num_tokens": 25}),
             Step("free", {"free_index": [4, 20]}, clobber=True), Step("free_group_end")]
    got = attribute_group_end(steps, page_size=PS, extra=[1], lacking=[])
    assert got is not None and got[0] == "GROUP-6", got


def test_allocation_short_yet_changing_the_pages_is_its_shortage_rule() -> None:
    args = {"prefix_lens": [0], "seq_lens": [4], "last_loc": [-1], "extend_num_tokens": 4}
    got = attribute("alloc_extend", args, page_size=PS, extra=[], lacking=[3],
                    group_open=False, available_delta=-PS, shortage=True)
    assert got is not None and got[0] == "EXTEND-6", got
    assert attribute("alloc_extend", args, page_size=PS, extra=[], lacking=[3],
                     group_open=False, available_delta=-PS, shortage=False) is None
