"""Correct allocators pass; a correct allocator with another order passes only contract mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import spec_torch
from broken_allocators import fifopaged, leakonfree
from kvpool.oracle.engine.capabilities import PAGED
from kvpool.oracle.engine.replay import replay
from kvpool.oracle.engine.runner import run_config, run_for
from kvpool.oracle.engine.target import Config, Target
from kvpool.oracle.engine.trace import Trace
from kvpool.oracle.families.single.targets import configs_for, expand, load_target

EXAMPLES = 25


@pytest.mark.parametrize(
    "factory", [spec_torch.spec_token, spec_torch.spec_paged], ids=["token", "paged"]
)
def test_oracle_spec_adapter_conforms(factory: Callable[..., Any]) -> None:
    """The spec-backed adapter is correct by construction: no divergence in any configuration."""
    target = load_target(factory)
    for config in configs_for(target.caps):
        result = run_config(target, config, max_examples=EXAMPLES)
        assert result.ok, result.failure.report() if result.failure else result.error
        assert result.calls > EXAMPLES  # the machine really ran calls


def test_oracle_fifo_order_passes_contract_fails_exact() -> None:
    """FIFO paged reuse is a correct allocator in another order (contract ok, exact not)."""
    target = Target(fifopaged, PAGED, "broken_allocators:fifopaged")
    contract = run_config(target, Config(4, False, "cpu", "contract"), max_examples=60)
    assert contract.ok, contract.failure.report() if contract.failure else contract.error
    exact = run_config(target, Config(4, False, "cpu", "exact"), max_examples=60, shrink_seconds=3)
    assert exact.failure is not None
    assert exact.failure.clause in ("ALLOC-5", "EXTEND-7", "DECODE-7", "FREE-5"), (
        exact.failure.report()
    )
    # the exact-mode trace replays without divergence on the reference-order adapter
    reference = load_target(spec_torch.spec_paged)
    assert replay(exact.failure.trace, reference) is None


@pytest.mark.parametrize("path", expand("kvpool") + expand("kvpool-unchecked"))
def test_oracle_kvpool_impl_conforms(path: str) -> None:
    """kvpool.impl's allocators, checked and unchecked, follow the spec call for call."""
    target = load_target(path)
    for config in configs_for(target.caps):
        result = run_config(target, config, max_examples=EXAMPLES)
        assert result.ok, result.failure.report() if result.failure else result.error


def test_oracle_contract_trace_replays_on_another_order() -> None:
    """A contract-mode trace replays on an allocator that picks other pages (slots renamed)."""
    leaky = Target(leakonfree, PAGED, "broken_allocators:leakonfree")
    found = run_config(
        leaky, Config(4, False, "cpu", "contract"), max_examples=200, shrink_seconds=2
    )
    assert found.failure is not None and found.failure.clause == "FREE-4"
    trace = Trace.from_json(found.failure.trace.to_json())
    fifo = Target(fifopaged, PAGED, "broken_allocators:fifopaged")
    assert replay(trace, fifo, order="contract") is None
    again = replay(trace, leaky, order="contract")
    assert again is not None and again.clause == found.failure.clause


@pytest.mark.slow
@pytest.mark.parametrize("path", expand("kvpool"))
def test_oracle_kvpool_impl_soak(path: str) -> None:
    """Two minutes per target of fresh seeds in both comparison modes."""
    target = load_target(path)
    for order in ("exact", "contract"):
        for config in configs_for(target.caps, order=order):
            result = run_for(target, config, seconds=120 / 8, seed=1)
            assert result.ok, result.failure.report() if result.failure else result.error
