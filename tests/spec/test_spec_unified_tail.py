"""``UnifiedSWAModel.alloc_extend_swa_tail`` (UNI-8): a decode node's prealloc binds the full side
of every new page and the SWA side of the new pages holding the window tail only; the fit
counts those SWA pages only; a tail longer than the extension is a caller error."""

from __future__ import annotations

import pytest
from kvpool.spec import ContractViolation
from kvpool.spec.unified import UnifiedSWAModel


@pytest.mark.parametrize("lazy", [False, True])
def test_only_the_tail_pages_get_an_swa_page_UNI_8(lazy: bool) -> None:
    m = UnifiedSWAModel(32 * 4 * 16, 4, 32, 32, lazy=lazy)
    for tail, swa_pages in ((0, 0), (1, 1), (2, 1), (3, 2), (10, 3)):
        row = m.alloc_extend_swa_tail(0, 10, -1, tail)  # 3 pages: positions 0-3, 4-7, 8-9
        assert row is not None and len(row) == 10
        pages = [row[0] // 4, row[4] // 4, row[8] // 4]
        assert [v in m.swa.v2p for v in pages] == [False] * (3 - swa_pages) + [True] * swa_pages
        unbound = [t for t in row if t // 4 not in m.swa.v2p]  # they read as the sink
        assert len(unbound) == min(10, 4 * (3 - swa_pages))
        assert m.translate(unbound, "swa") == [0] * len(unbound)
        m.free(row)
        assert m.census() == []


def test_the_fit_counts_the_tail_pages_only_UNI_8() -> None:
    m = UnifiedSWAModel(32 * 11, 1, 32, 32, lazy=False)  # 10 rows shared by both sides
    assert m.alloc_extend(  # 6 full + 6 SWA rows do not fit
        [0], [6], [-1]) is None
    row = m.alloc_extend_swa_tail(0, 6, -1, 2)  # 6 full + 2 SWA rows do
    assert row is not None and len(m.swa.v2p) == 2 and m.available_size() == 1
    with pytest.raises(ContractViolation, match="UNI-8"):
        m.alloc_extend_swa_tail(0, 2, -1, 3)
