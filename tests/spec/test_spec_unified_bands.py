"""``unified_layout.bands_ordered`` (UNI-3): sub-pool byte bands in chain order are disjoint and
ordered; an empty band (a parked float pool) is passed over, not the end of the chain."""

from __future__ import annotations

import pytest
from kvpool.spec.unified_layout import bands_ordered, lazy_joint_pages


@pytest.mark.parametrize(("bands", "ordered"), [
    ([(0, 4), (4, 8)], True),             # the first band may start at byte 0
    ([(0, 4), (3, 8)], False),            # overlapping
    ([(4, 8), (5, 5), (2, 6)], False),    # an empty band in between does not end the walk
    ([(4, 8), (5, 5), (8, 9)], True),
    ([(0, 0), (0, 2)], True),
])
def test_bands_are_ordered_past_empty_bands_UNI_3(bands: list[tuple[int, int]],
                                                  ordered: bool) -> None:
    assert bands_ordered(bands) is ordered


def test_lazy_joint_pages_with_equal_holes_drain_both_then_extend_UNI_7() -> None:
    # 2 holes each: both drain 2, then both extend by whole joint pages of the gap
    assert lazy_joint_pages(30, 4, 2, 2, 2, 16, 16) == 2 + 30 // 6
