"""``SubPoolState`` / ``UnifiedState``: the unified composite's introspection snapshot -- its
defaults (eager compaction, holes drainable), the drainable-hole count and immutability."""

from __future__ import annotations

import dataclasses

import pytest
from kvpool.spec.unified_state import SubPoolState, UnifiedState


def _sub(**changes: object) -> SubPoolState:
    return SubPoolState(**{"name": "swa", "grow": "float", "page_bytes": 64, "num_pages": 8,
                           "min_page": 1, "span_low": 2, "span_high": 7, **changes})


def test_a_sub_pool_defaults_to_eager_compaction_with_drainable_holes() -> None:
    sub = _sub()
    assert sub.lazy is False and sub.drains is True
    assert sub.holes == () and sub.held_back == () and sub.live_pages == 0
    assert list(sub.span_pages) == [2, 3, 4, 5, 6]


@pytest.mark.parametrize(("holes", "held_back", "drainable"), [
    ((), (), 0),
    ((3, 5), (), 2),
    ((3, 5, 6), (5,), 2),
    ((3, 5), (3, 5), 0),
    ((3,), (4, 6), 1),  # a held-back page that is not a hole takes nothing away
])
def test_drainable_holes_are_the_holes_not_held_back(holes: tuple[int, ...],
                                                      held_back: tuple[int, ...],
                                                      drainable: int) -> None:
    assert _sub(holes=holes, held_back=held_back, lazy=True).drainable_holes == drainable


def test_snapshots_are_immutable() -> None:
    sub = _sub(bindings={1: 3})
    state = UnifiedState(page_size=4, total_bytes=512, sides={"swa": sub}, free_virtual=(2, 3),
                         full_static_tokens=16, swa_static_tokens=8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sub.lazy = True  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.page_size = 8  # type: ignore[misc]
    assert sub.live_pages == 1
