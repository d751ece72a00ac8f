"""Real peers through the oracle (``peers``): SGLang 0.5.23's allocators, vLLM 0.33.0's
BlockPool and kvcached 0.1.6's Elastic allocators.

vLLM's ``BlockPool`` runs through its adapter (``kvpool.oracle.peers.adapters``); kvcached through
``kvpool.oracle.peers.kvcached_import`` (its source from ``KVPOOL_KVCACHED_SRC``: the tests skip
without it; CI downloads the sdist). A peer that is installed but fails to import (or a shim
bug) fails its tests; under CI (``CI`` set) a missing peer fails them too. Each peer must
conform to every rule its capability declaration keeps; the declaration is derived from the
divergence registry (``kvpool.oracle.peers.divergences``). Each registry entry is checked the
other way too: switching its rule back on makes the oracle report a divergence with the
registered clause, so the registry records exactly what differs.
"""

from __future__ import annotations

import pytest
from kvpool.oracle.engine.capabilities import PAGED, TOKEN
from kvpool.oracle.engine.report import OracleFailure
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config, Target, TargetError
from kvpool.oracle.families.single.executor import Executor
from kvpool.oracle.families.single.targets import KVCACHED_BASE, configs_for, load_target, probe
from kvpool.oracle.peers.adapters import VLLM_BASE
from kvpool.oracle.peers.divergences import REGISTRY, KnownDivergence, divergences_for
from kvpool.oracle.peers.peer_import import may_skip
from kvpool.oracle.peers.sequences import shows_here

pytestmark = pytest.mark.peers

TARGETS = {
    "sglang-token": "kvpool.oracle.families.single.targets:sglang_token",
    "sglang-paged": "kvpool.oracle.families.single.targets:sglang_paged",
    "vllm": "kvpool.oracle.families.single.targets:vllm_block_pool",
    "kvcached-token": "kvpool.oracle.families.single.targets:kvcached_token",
    "kvcached-paged": "kvpool.oracle.families.single.targets:kvcached_paged",
}
FULL = {
    "sglang-token": TOKEN,
    "sglang-paged": PAGED.replace(page_sizes=(1, 4, 16)),
    "vllm": VLLM_BASE.replace(checked=True, reference_order=True),
    **{
        name: base.replace(checked=True, reference_order=True)
        for name, base in KVCACHED_BASE.items()
    },
}
EXAMPLES = 40


def _loaded(name: str):  # type: ignore[no-untyped-def]
    target = load_target(TARGETS[name])
    try:
        probe(target)
    except TargetError as err:
        if not may_skip(err):  # installed but broken (or a shim bug), or under CI: a failure
            raise
        pytest.skip(f"the peer is not installed here ({err}); CI installs it")
    return target


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_oracle_peer_conforms_to_declared_rules(name: str) -> None:
    """Everything the registry does not exclude conforms (SGLang: in its exact order)."""
    target = _loaded(name)
    assert set(target.caps.divergences) == {d.id for d in divergences_for(name)}
    for config in configs_for(target.caps):
        result = run_config(target, config, max_examples=EXAMPLES)
        assert result.ok, result.failure.report() if result.failure else result.error


def _cases() -> list[tuple[str, KnownDivergence]]:
    return [
        (name, d)
        for d in REGISTRY
        for name in sorted(TARGETS)
        if d.applies_to(name) and getattr(FULL[name], d.excludes[0]) != d.excludes[1]
    ]


@pytest.mark.parametrize(("name", "div"), _cases(), ids=[f"{n}-{d.id}" for n, d in _cases()])
def test_oracle_registry_entry_is_a_real_divergence(name: str, div: KnownDivergence) -> None:
    """Re-enabling one excluded rule makes the oracle find the registered divergence."""
    target = _loaded(name)
    field, _ = div.excludes
    full_value = getattr(FULL[name], field)
    target.caps = target.caps.replace(**{field: full_value})
    clauses = {
        c for d in divergences_for(name) if d.excludes[0] == field for c in d.reported_clauses()
    }
    configs = list(configs_for(target.caps))
    if field == "page_sizes":  # only the re-enabled page sizes
        configs = [c for c in configs if c.page_size not in div.excludes[1]]
    found = None
    for config in configs:
        result = run_config(
            target,
            Config(config.page_size, config.need_sort, "cpu", config.order),
            max_examples=300,
            shrink_seconds=2,
        )
        if result.failure is not None:
            found = result.failure
            break
    if not shows_here(div.id):  # e.g. SGLang's runtime is loaded: its hooks work and conform
        assert found is None, found.report()
        return
    assert found is not None, f"{div.id}: no divergence found with {field}={full_value!r}"
    if div.id.endswith("-UNCHECKED"):  # any caller error: accepted, or an AssertionError instead
        assert "accepted the call" in found.detail or "instead of ContractViolation" in found.detail
    else:
        assert found.clause in clauses, found.report()


def test_oracle_kvcached_token_shortage_raises_type_error() -> None:
    """KVC-SHORT-RAISES on its minimal trace, create(size=8), alloc(9): under the declaration
    the TypeError stands for the None (and the state must be the spec's); without it the same
    call is an ALLOC-3 divergence naming the TypeError (patches.py@0.1.6 lines 378-380)."""
    target = _loaded("kvcached-token")
    assert target.caps.shortage_raises == (TypeError,)
    (config,) = configs_for(target.caps)
    ex = Executor(target, config)
    ex.create(8)
    assert ex.call("alloc", need_size=9) is None
    assert ex.trace.steps[-1].short_raised == "builtins.TypeError"
    assert ex.call("alloc", need_size=8) is not None  # nothing was taken by the shortage
    undeclared = Target(target.factory, target.caps.replace(shortage_raises=()), target.path)
    ex = Executor(undeclared, config)
    ex.create(8)
    with pytest.raises(OracleFailure) as err:
        ex.call("alloc", need_size=9)
    assert err.value.failure.clause == "ALLOC-3"
    assert "TypeError" in err.value.failure.detail
