"""The unified family's hole bookkeeping check (``oracle/families/unified/holes.py``, UNI-5) on
introspection snapshots (``kvpool.spec.unified_state.SubPoolState``) built from the spec model's
own pools, without SGLang: a healthy lazy span passes, and each planted bookkeeping fault (a
hole named twice, a hole outside the span or on a live page, a span that is not live + holes)
is named; ``span_and_holes`` reads what the executor compares with the spec model's
``EndPool``."""

from __future__ import annotations

import dataclasses
from typing import Any

from kvpool.oracle.families.unified.holes import (
    hole_problems,
    model_breach,
    own_breach,
    span_and_holes,
    span_pages,
)
from kvpool.spec.unified import UnifiedSWAModel
from kvpool.spec.unified_state import SubPoolState, UnifiedState


def _sub(pool: Any) -> SubPoolState:
    """The snapshot of one model ``EndPool``: its span from its watermark, holes, bindings."""
    low, high = ((pool.min_page, pool.watermark) if pool.grows_up
                 else (pool.watermark + 1, pool.pages))
    return SubPoolState(pool.name, "up" if pool.grows_up else "down", pool.page_bytes,
                        pool.pages, pool.min_page, low, high, tuple(sorted(pool.holes)),
                        dict(pool.v2p), lazy=pool.lazy)


def _state(m: UnifiedSWAModel, **full: Any) -> UnifiedState:
    """``m``'s snapshot, its full side's fields replaced by ``full``."""
    sides = {"full": dataclasses.replace(_sub(m.full), **full), "swa": _sub(m.swa)}
    return UnifiedState(m.page_size, m.total_bytes, sides, tuple(m.free_virtual), 0, 0)


def _lazy_model() -> UnifiedSWAModel:
    m = UnifiedSWAModel(32 * 4 * 20, 4, 32, 32, lazy=True)
    rows = [m.alloc(8), m.alloc(4), m.alloc(4)]
    assert all(r is not None for r in rows)
    m.free(rows[1])
    return m


def test_a_healthy_lazy_span_passes_and_matches_the_model_UNI_5() -> None:
    m = _lazy_model()
    state = _state(m)
    full = state.sides["full"]
    assert list(span_pages(full)) == list(range(m.full.watermark + 1, m.full.pages))
    assert span_and_holes(full) == (m.full.span_pages(), len(m.full.holes)) == (4, 1)
    assert hole_problems(full) == [] and hole_problems(state.sides["swa"]) == []
    assert own_breach(state) is None and model_breach(state, m) is None


def test_planted_hole_bookkeeping_faults_are_named_UNI_5() -> None:
    m = _lazy_model()
    hole = m.full.holes[0]
    assert any("counted twice" in p for p in hole_problems(_state(m, holes=(hole, hole)).sides[
        "full"]))
    left = _state(m, holes=())  # a release that left no hole
    assert hole_problems(left.sides["full"]) == ["[full] span 4 pages != live 3 + holes 0"]
    found = own_breach(left)
    assert found is not None
    assert found[1][-1] == "assert not hole_problems(state_of(a).sides['full'])  # UNI-5"
    assert any("state_of" in line for line in found[1][:-1])  # the repro imports it
    past = _state(m, holes=(m.full.watermark,))  # a hole past the frontier
    assert any("outside the span" in p for p in hole_problems(past.sides["full"]))
    live = next(iter(m.full.p2v))
    on_live = _state(m, holes=(live,))  # a live page also listed as a hole
    assert any("on live pages" in p for p in hole_problems(on_live.sides["full"]))


def test_a_span_the_model_does_not_hold_is_named_UNI_5() -> None:
    m = _lazy_model()
    state = _state(m)
    m.full.flush()  # the model compacts, the target keeps its hole
    found = model_breach(state, m)
    assert found is not None
    assert found[0] == "full sub-pool: span 4 pages with 1 hole, the spec says 3 with 0"
    assert found[1][-1] == "assert span_and_holes(state_of(a).sides['full']) == (3, 0)  # UNI-5"
