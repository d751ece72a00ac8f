"""kvpool's unified full + SWA pool against the spec model, call for call (``UNI-1`` .. ``UNI-13``).

Random call sequences (:mod:`unified_driver`: alloc, extend, decode, the SWA-tail prealloc,
frees, window slides, segment frees, free groups, evictions, clear), eager and lazy, page sizes
1, 4 and 16: the results, refusals, the three capacity views, both translations of every live
token (row for row under eager compaction, by what must hold under lazy), the census and
``unified_state()`` equal the model's after every call. A broken variant fails the check.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kvpool.impl.unified_swa import UnifiedSWAAllocator
from kvpool.oracle.families.unified.executor import live_tokens
from kvpool.oracle.families.unified.placement import placement_problems
from kvpool.spec.unified import UnifiedSWAModel
from unified_driver import Driver

ENTRY = 32


def build(total_bytes: int, ps: int, lazy: bool, cls: type = UnifiedSWAAllocator,
          cap_pages: int = 100) -> tuple[Any, UnifiedSWAModel]:
    cap = cap_pages * ps
    target = cls(total_bytes, ps, lazy=lazy, full_max_total_num_tokens=cap,
                 swa_max_total_num_tokens=cap)
    model = UnifiedSWAModel(total_bytes, ps, ENTRY, ENTRY, lazy=lazy, full_max_tokens=cap,
                            swa_max_tokens=cap)
    return target, model


def compare(target: Any, model: UnifiedSWAModel, where: str) -> None:
    """Everything the contract fixes after a call (module docstring)."""
    got = (target.available_size(), target.full_available_size(), target.swa_available_size())
    want = (model.available_size(), model.full_available_size(), model.swa_available_size())
    assert got == want, f"{where}: capacity views {got} != spec {want}"
    ids = live_tokens(model)
    import torch

    x = torch.tensor(ids, dtype=torch.int64)
    full, swa = (target.translate_kv_indices_for_transfer(x).tolist(),
                 target.translate_loc_from_full_to_swa(x).tolist())
    if not model.lazy:
        assert full == model.translate(ids), f"{where}: full rows differ"
        assert swa == model.translate(ids, "swa"), f"{where}: SWA rows differ"
    assert placement_problems(model, ids, full, swa) == [], where
    assert target.verify_byte_accounting() == [], where
    state = target.unified_state()
    assert list(state.free_virtual) == model.free_virtual, f"{where}: free ids differ"
    for name, pool in (("full", model.full), ("swa", model.swa)):
        side = state.sides[name]
        assert len(side.span_pages) == pool.span_pages(), f"{where}: {name} span"
        assert len(side.holes) == len(pool.holes), f"{where}: {name} holes"
        assert set(side.bindings) == set(pool.v2p), f"{where}: {name} live pages"
        if not model.lazy:
            assert dict(side.bindings) == pool.v2p, f"{where}: {name} bindings"


def run(seed: int, ps: int, lazy: bool, steps: int, cls: type = UnifiedSWAAllocator) -> None:
    """A random sequence of ``steps`` calls on ``cls`` beside the model; AssertionError at the
    first difference."""
    rng = random.Random(seed)
    total_bytes = rng.choice([24, 40, 64, 128]) * ps * ENTRY
    target, model = build(total_bytes, ps, lazy, cls)
    driver = Driver(rng, ps, model, [target])
    compare(target, model, "create")
    for i in range(steps):
        name, (want, got) = driver.step()
        where = f"seed {seed} step {i} {name}"
        if isinstance(want, np.ndarray):
            want = want.tolist()
        assert got == want, f"{where}: {got!r} != spec {want!r}"
        compare(target, model, where)


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("ps", [1, 4, 16])
@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_against_the_spec_model(seed: int, ps: int, lazy: bool) -> None:
    run(seed, ps, lazy, 60)


class WrongEagerCapacity(UnifiedSWAAllocator):
    """Counts only the full side's page bytes in the eager joint view."""

    def available_size(self) -> int:
        if self.lazy:
            return super().available_size()
        gap = self._gap_bytes()
        pages = min(gap // self.full.page_bytes, self.full.room(), self.swa.room(),
                    len(self.free_virtual))
        return pages * self.page_size


class LazyHolesForgotten(UnifiedSWAAllocator):
    """Drops the holes of a lazy free from its bookkeeping (the span keeps them)."""

    def free(self, free_index: Any) -> None:
        super().free(free_index)
        self.swa.holes = self.swa.holes[:0]


@pytest.mark.parametrize("cls,lazy", [(WrongEagerCapacity, False), (LazyHolesForgotten, True)])
def test_a_broken_variant_fails(cls: type, lazy: bool) -> None:
    with pytest.raises(AssertionError):
        for seed in range(20):
            run(seed, 4, lazy, 60, cls)


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("ps", [1, 16])
def test_check_decode_capacity_is_the_models_gate(ps: int, lazy: bool) -> None:
    """``check_decode_capacity``: the eviction hook (nothing evictable here), then
    ``available_size() >= num_tokens``, as the model's gate and views give it."""
    from kvpool.oracle.families.unified.cache import evict_spec
    from kvpool.oracle.families.unified.calls import ZeroCache

    rng = random.Random(ps)
    target, model = build(40 * ps * ENTRY, ps, lazy)
    driver = Driver(rng, ps, model, [target])
    for _ in range(40):
        driver.step()
        if driver.in_group:  # the hook runs an open group's frees first (SGLang's too)
            continue
        num = rng.randrange(0, 12) * ps
        evict_spec(model, num)
        want = model.available_size() >= num
        assert target.check_decode_capacity(num_tokens=num, tree_cache=ZeroCache()) == want
        compare(target, model, "check_decode_capacity")
