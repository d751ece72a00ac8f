"""Paired slots paging in step (``SWA-3``, spec/window.py ``pages_agree``): explicit cases for
each way a pair can break the step, and agreement with the clause's set formulation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kvpool.spec.window import pages_agree


@pytest.mark.parametrize(("full", "swa", "agree"), [
    ([], [], True),                                 # nothing paired
    ([4, 5, 6], [8, 9, 10], True),                  # full page 1 -> SWA page 2, offsets kept
    ([4, 8, 9], [12, 4, 5], True),                  # pages 1, 2 -> 3, 1: any one-to-one map
    ([5], [6], False),                              # offsets 1 and 2 differ
    ([4, 5], [8, 13], False),                       # full page 1 split over SWA pages 2 and 3
    ([4, 9], [8, 9], False),                        # full pages 1 and 2 share SWA page 2
])
def test_pages_agree_cases_SWA_3(full: list[int], swa: list[int], agree: bool) -> None:
    assert pages_agree(full, swa, 4) is agree


@given(st.integers(1, 4).flatmap(lambda ps: st.tuples(
    st.just(ps), st.lists(st.tuples(st.integers(0, 15), st.integers(0, 15)), max_size=6))))
def test_pages_agree_is_same_offsets_and_a_page_bijection_SWA_3(
        case: tuple[int, list[tuple[int, int]]]) -> None:
    ps, pairs = case
    full, swa = [f for f, _ in pairs], [s for _, s in pairs]
    page_pairs = {(f // ps, s // ps) for f, s in pairs}
    expected = (all(f % ps == s % ps for f, s in pairs)
                and len(page_pairs) == len({f // ps for f in full}) == len({s // ps for s in swa}))
    assert pages_agree(full, swa, ps) is expected
