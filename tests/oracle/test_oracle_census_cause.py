"""Causes of free-list bugs: a census mismatch right after a free or a merge is reported under
that call's rule (FREE-4, SORT-3), the census clause named as the symptom
(``kvpool.oracle.families.single.causes``), and each such failure's repro is checked."""

from __future__ import annotations

import pytest
from broken_allocators import Broken
from broken_census import CENSUS_BROKEN
from kvpool.oracle.engine.capabilities import capabilities_of
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config, Target
from kvpool.oracle.families.single.causes import attribute_change, explain, short_after_merge
from test_oracle_causes import Step

PS = 4


@pytest.mark.parametrize("order", ["exact", "contract"])
@pytest.mark.parametrize("broken", CENSUS_BROKEN, ids=[b.cls.__name__ for b in CENSUS_BROKEN])
def test_free_list_bug_is_reported_under_its_cause(broken: Broken, order: str) -> None:
    """The planted coalescing / merge bug is reported under FREE-4 / SORT-3 with the census or
    shortage clause it showed as, and its repro fails on it and passes on kvpool's own."""
    target = Target(broken.factory, capabilities_of(broken.factory), broken.path)
    result = run_config(target, Config(broken.page_size, broken.need_sort, "cpu", order),
                        max_examples=200)
    failure = result.failure
    assert failure is not None, result.error
    assert (failure.clause,) == broken.clauses, failure.report()
    assert "(the cause; the symptom: [" in failure.detail, failure.detail
    symptom = failure.detail.split("the symptom: [")[1].split("]")[0]
    assert symptom != failure.clause and symptom.split("-")[0] in ("INV", "EXTEND", "ALLOC",
                                                                   "DECODE"), symptom
    assert failure.repro_check().status == "confirmed", failure.repro_check().line


def test_a_free_that_changes_a_neighbour_is_its_release_rule() -> None:
    """Page 2 freed, page 1 (untouched) listed free too: FREE-4; in an open group GROUP-5; a
    segment free's SEG-5; the same difference after a call that releases nothing: no cause."""
    args = {"free_index": [8, 9, 10, 11]}
    got = attribute_change("free", args, page_size=PS, extra=[1], lacking=[], group_open=False)
    assert got is not None and got[0] == "FREE-4" and "[2]" in got[1] and "[1]" in got[1], got
    grouped = attribute_change("free", args, page_size=PS, extra=[1], lacking=[],
                               group_open=True)
    assert grouped is not None and grouped[0] == "GROUP-5"
    segs = {"segments": [[[8, 9], 0]]}
    seg = attribute_change("free_segments", segs, page_size=PS, extra=[], lacking=[3],
                           group_open=False)
    assert seg is not None and seg[0] == "SEG-5"
    assert attribute_change("translate_kv_indices_for_transfer", {"kv_indices": [8]},
                            page_size=PS, extra=[1], lacking=[], group_open=False) is None
    assert attribute_change("free", args, page_size=PS, extra=[], lacking=[],
                            group_open=False) is None  # only available_size() off


def test_a_merge_that_loses_a_staged_page_is_sort_3() -> None:
    """An explicit merge: any difference; inside an allocation: only pages it merged."""
    merge = attribute_change("merge_and_sort_free", {}, page_size=PS, extra=[], lacking=[3],
                             group_open=False, merged=[2, 3])
    assert merge is not None and merge[0] == "SORT-3" and "[2, 3]" in merge[1], merge
    inside = attribute_change("alloc", {"need_size": 4}, page_size=PS, extra=[], lacking=[3],
                              group_open=False, merged=[2, 3])
    assert inside is not None and inside[0] == "SORT-3" and "inside alloc" in inside[1]
    assert attribute_change("alloc", {"need_size": 4}, page_size=PS, extra=[], lacking=[5],
                            group_open=False, merged=[2, 3]) is None


def test_explain_orders_the_causes() -> None:
    """A merge's pages before the shortage rule; INV-3 (page 0 listed) before a free's change;
    clear() empties the staged list without a merge (LIFE-1)."""
    common = {"page_size": PS, "num_pages": 8, "group_open": False, "available_delta": 0,
              "handed_out": ()}
    short = explain([Step("alloc", {"need_size": 8})], extra=[], lacking=[3], shortage=True,
                    merged=[3], **common)
    assert short is not None and short[0] == "SORT-3", short
    padding = explain([Step("free", {"free_index": [8]})], extra=[0], lacking=[],
                      shortage=False, merged=(), **common)
    assert padding is not None and padding[0] == "INV-3", padding
    cleared = explain([Step("clear")], extra=[], lacking=[3], shortage=False, merged=[3],
                      **common)
    assert cleared is not None and cleared[0] == "LIFE-1", cleared


def test_a_short_allocation_after_a_lossy_merge_is_sort_3() -> None:
    detail = "returned None although 1 page was needed and 1 is free or staged"
    got = short_after_merge("alloc_extend", "EXTEND-6", detail, [1, 2], [2])
    assert got is not None and got[0] == "SORT-3" and "[1]" in got[1], got
    assert f"[EXTEND-6] {detail}" in got[1]
    assert short_after_merge("alloc_extend", "EXTEND-6", detail, [1, 2], [1, 2]) is None
    assert short_after_merge("alloc_extend", "EXTEND-5", detail, [1, 2], []) is None
