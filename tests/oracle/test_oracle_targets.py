"""Correct allocators pass; a correct allocator with another order passes only contract mode."""

from __future__ import annotations

import pytest
import spec_torch
from broken_allocators import fifopaged
from kvpool.oracle.capabilities import PAGED
from kvpool.oracle.replay import replay
from kvpool.oracle.runner import Config, Target, configs_for, run_config
from kvpool.oracle.targets import expand, load_target

EXAMPLES = 25


@pytest.mark.parametrize(
    "factory", [spec_torch.spec_token, spec_torch.spec_paged], ids=["token", "paged"]
)
def test_oracle_spec_adapter_conforms(factory: object) -> None:
    """The spec-backed adapter is correct by construction: no divergence in any configuration."""
    target = load_target(factory)  # type: ignore[arg-type]
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


@pytest.mark.parametrize("path", expand("kvpool"))
def test_oracle_kvpool_impl_conforms(path: str) -> None:
    """kvpool.impl's checked allocators follow the spec call for call (exact order)."""
    target = load_target(path)
    for config in configs_for(target.caps):
        result = run_config(target, config, max_examples=EXAMPLES)
        assert result.ok, result.failure.report() if result.failure else result.error
