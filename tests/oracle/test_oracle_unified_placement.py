"""The unified family's placement judge (``oracle/families/unified/placement.py``) on
``UnifiedSWAModel`` states, without SGLang: the model's own translations pass, and each planted
fault of a lazy target's placement is named with its clause (UNI-2, UNI-3, UNI-4, UNI-10,
UNI-11); page moves are accepted only along the copies an allocator issued (UNI-6)."""

from __future__ import annotations

from typing import Any

import torch
from kvpool.oracle.families.unified.executor import live_tokens
from kvpool.oracle.families.unified.placement import MoveLog, placement_problems
from kvpool.spec.unified import UnifiedSWAModel


def _state(lazy: bool, ps: int = 4) -> tuple[UnifiedSWAModel, list[int], list[int], list[int]]:
    """A model with live pages, holes (lazy) or moved pages (eager), one released SWA page."""
    m = UnifiedSWAModel(32 * ps * 24, ps, 32, 32, lazy=lazy)
    rows = [m.alloc(2 * ps), m.alloc(3 * ps), m.alloc(ps)]
    assert all(r is not None for r in rows)
    m.free(rows[0])
    m.free_swa(rows[1][:ps])
    ids = live_tokens(m)
    return m, ids, m.translate(ids), m.translate(ids, "swa")


def _clauses(m: UnifiedSWAModel, ids: list[int], full: list[int], swa: list[int]) -> set[str]:
    return {clause for clause, _ in placement_problems(m, ids, full, swa)}


def test_the_models_own_placement_passes_both_modes() -> None:
    for lazy in (False, True):
        m, ids, full, swa = _state(lazy)
        assert 0 in swa  # the released SWA page reads as the sink
        assert placement_problems(m, ids, full, swa) == []


def test_planted_placement_faults_are_named_UNI_2_3_4_10_11() -> None:
    m, ids, full, swa = _state(lazy=True)
    ps = m.page_size
    bound = next(i for i, t in enumerate(ids) if t // ps in m.swa.v2p)
    released = next(i for i, t in enumerate(ids) if t // ps not in m.swa.v2p)
    sink = [r % ps for r in full[:ps]] + full[ps:]  # the first live page read from page 0
    assert "UNI-2" in _clauses(m, ids, sink, swa)
    shared = full[ps:2 * ps] + full[ps:]  # the first two live pages on one physical page
    assert "UNI-4" in _clauses(m, ids, shared, swa)
    shifted = [full[0] + 1, *full[1:]]  # a token off its in-page offset
    assert "UNI-11" in _clauses(m, ids, shifted, swa)
    leaked = list(swa)
    leaked[released] = swa[bound]  # a released SWA page still reading live rows
    assert "UNI-10" in _clauses(m, ids, full, leaked)
    first = bound - bound % ps  # the bound SWA page moved onto a live full page's bytes
    overlap = list(swa)
    overlap[first:first + ps] = full[:ps]
    assert "UNI-3" in _clauses(m, ids, full, overlap)


class _Pool:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    def move_physical_pages(self, dst: torch.Tensor, src: torch.Tensor, ps: int) -> None:
        self.calls.append((dst.tolist(), src.tolist(), ps))


def test_moves_only_along_issued_copies_UNI_6() -> None:
    pool = _Pool()
    log = MoveLog(pool)
    pool.move_physical_pages(torch.tensor([3]), torch.tensor([9]), 4)  # 9 -> 3
    pool.move_physical_pages(torch.tensor([2]), torch.tensor([3]), 4)  # then 3 -> 2
    assert pool.calls == [([3], [9], 4), ([2], [3], 4)]  # the pool still does the copy
    assert log.unexplained({7: 9, 8: 5}, {7: 2, 8: 5}) == []  # along the chain
    assert log.copies == []  # forgotten after each judgement
    wrong = log.unexplained({7: 9}, {7: 4})
    assert wrong == ["virtual page 7 went from page 9 to 4 without a copy"]
