"""The unified family's hole bookkeeping check (``oracle/families/unified/holes.py``, UNI-5) on
a stand-in sub-pool with SGLang 0.5.23's ``MultiEndedAllocator`` fields, without SGLang: a
healthy lazy span passes, and each planted bookkeeping fault (a hole named twice, a hole outside
the span or on a live page, a span that is not live + holes) is named; ``span_and_holes`` reads
what the executor compares with the spec model's ``EndPool``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
from kvpool.oracle.families.unified.holes import (
    hole_problems,
    model_breach,
    own_breach,
    span_and_holes,
    span_pages,
)
from kvpool.spec.unified import UnifiedSWAModel


def _sub(model_pool: Any, direction: str) -> SimpleNamespace:
    """A sub-pool stand-in holding ``model_pool``'s (``EndPool``) tables, frontier and holes."""
    v2p = torch.full((model_pool.pages + 1,), -1, dtype=torch.int64)
    p2v = torch.full((model_pool.pages + 1,), -1, dtype=torch.int64)
    v2p[0] = p2v[0] = 0
    for v, p in model_pool.v2p.items():
        v2p[v], p2v[p] = p, v
    return SimpleNamespace(
        sub_pool_name=model_pool.name, grow_direction=direction, min_page_index=model_pool.min_page,
        num_pages=model_pool.pages, watermark_physical=model_pool.watermark,
        virtual_to_physical=v2p, physical_to_virtual=p2v,
        _free_phys_pages=torch.tensor(model_pool.holes, dtype=torch.int64),
        _pending_reuse_pages_cpu=set())


def _lazy_state() -> tuple[UnifiedSWAModel, SimpleNamespace]:
    m = UnifiedSWAModel(32 * 4 * 20, 4, 32, 32, lazy=True)
    rows = [m.alloc(8), m.alloc(4), m.alloc(4)]
    assert all(r is not None for r in rows)
    m.free(rows[1])
    target = SimpleNamespace(full_attn_allocator=_sub(m.full, "down"),
                             swa_attn_allocator=_sub(m.swa, "up"))
    return m, target


def test_a_healthy_lazy_span_passes_and_matches_the_model_UNI_5() -> None:
    m, target = _lazy_state()
    full = target.full_attn_allocator
    assert list(span_pages(full)) == list(range(m.full.watermark + 1, m.full.pages))
    assert span_and_holes(full) == (m.full.span_pages(), len(m.full.holes)) == (4, 1)
    assert hole_problems(full) == [] and hole_problems(target.swa_attn_allocator) == []
    assert own_breach(target) is None and model_breach(target, m) is None


def test_planted_hole_bookkeeping_faults_are_named_UNI_5() -> None:
    m, target = _lazy_state()
    full = target.full_attn_allocator
    hole = int(full._free_phys_pages[0])
    full._free_phys_pages = torch.tensor([hole, hole])  # a hole counted twice
    assert any("counted twice" in p for p in hole_problems(full))
    full._free_phys_pages = torch.tensor([], dtype=torch.int64)  # a release that left no hole
    assert hole_problems(full) == ["[full] span 4 pages != live 3 + holes 0"]
    found = own_breach(target)
    assert found is not None and "hole_problems(a.full_attn_allocator)" in found[1][-1]
    full._free_phys_pages = torch.tensor([m.full.watermark])  # a hole past the frontier
    assert any("outside the span" in p for p in hole_problems(full))
    live = next(iter(m.full.p2v))
    full._free_phys_pages = torch.tensor([live])  # a live page also listed as a hole
    assert any("on live pages" in p for p in hole_problems(full))


def test_a_span_the_model_does_not_hold_is_named_UNI_5() -> None:
    m, target = _lazy_state()
    m.full.flush()  # the model compacts, the target keeps its hole
    found = model_breach(target, m)
    assert found is not None
    assert found[0] == "full sub-pool: span 4 pages with 1 hole, the spec says 3 with 0"
    assert found[1][-1] == "assert span_and_holes(a.full_attn_allocator) == (3, 0)  # UNI-5"
