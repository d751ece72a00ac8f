"""One-line conformance tests for any test module.

``test_conformance = kvpool.oracle.conformance_test("module:factory")`` defines a pytest test,
parametrized over the target's configuration matrix, that fails with the oracle's report (the
shrunk trace as a pytest function, page maps, clause) when the target diverges, and skips with a
reason when the target's peer library is not importable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..engine.capabilities import Capabilities
from ..engine.runner import DEFAULT_EXAMPLES, DEFAULT_STEPS, run_config
from ..engine.target import Config
from ..families.single.targets import configs_for


def conformance_test(
    target: str | Callable[..., Any],
    *,
    caps: Capabilities | None = None,
    order: str | None = None,
    page_sizes: list[int] | None = None,
    need_sort: list[bool] | None = None,
    device: str = "cpu",
    examples: int = DEFAULT_EXAMPLES,
    steps: int = DEFAULT_STEPS,
    seed: int | None = None,
) -> Callable[..., None]:
    """A pytest test function running the oracle on ``target`` (see the module docstring)."""
    import pytest

    from ..engine.target import TargetError
    from ..families.single.inference import FactoryError
    from ..families.single.targets import load_target, probe
    from .plan import UsageError, apply_options

    try:
        loaded = load_target(target, caps, device=device)
        if caps is None:
            apply_options(loaded, declare=None, page_sizes=page_sizes, need_sort=need_sort)
    except (TargetError, FactoryError, UsageError) as err:
        message = str(err)

        def test_conformance_import() -> None:
            pytest.fail(f"kvpool.oracle: {message}", pytrace=False)

        return test_conformance_import
    configs = list(
        configs_for(
            loaded.caps, order=order, page_sizes=page_sizes, need_sort=need_sort, device=device
        )
    )

    @pytest.mark.parametrize("kvpool_config", configs, ids=[_config_id(c) for c in configs])
    def test_conformance(kvpool_config: Config) -> None:
        try:
            probe(loaded)
        except TargetError as err:
            pytest.skip(f"kvpool.oracle: {err}")
        result = run_config(
            loaded, kvpool_config, max_examples=examples, seed=seed, step_count=steps
        )
        if result.failure is not None:
            pytest.fail(result.failure.report(), pytrace=False)
        if result.error is not None:
            pytest.fail(f"kvpool.oracle: {loaded.path}: {result.error}", pytrace=False)
        if not result.ok:
            pytest.fail(f"kvpool.oracle: {loaded.path}: no call ran, nothing was tested")

    return test_conformance


def _config_id(c: Config) -> str:
    return f"ps{c.page_size}-{'sorted' if c.need_sort else 'unsorted'}-{c.order}"
