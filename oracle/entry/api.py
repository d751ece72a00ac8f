"""One-line conformance tests for any test module, for any allocator family.

``test_conformance = kvpool.oracle.conformance_test("module:factory")`` defines a pytest test,
parametrized over the target's configuration matrix, that fails with the oracle's report (the
shrunk trace as a pytest function, page maps, clause) when the target diverges. ``family=``
names the allocator family the target belongs to (``"single"`` by default; every family of the
registry, :mod:`kvpool.oracle.engine.registry`, e.g. ``"hybrid"`` or ``"unified"``), and the
target may be one of that family's aliases::

    test_swa = kvpool.oracle.conformance_test("kvpool-swa", family="hybrid", examples=20)

The target is resolved as the command line and the pytest plugin resolve it
(:func:`kvpool.oracle.entry.plan.plan`, the family's own planner where it has one), when the
test module is collected. A target whose peer library is not installed (``PeerNotInstalled``
while resolving it) gives a test that skips by the availability rule
(:func:`kvpool.oracle.peers.availability.may_skip`: outside CI only; under ``CI`` it fails);
any other failure to resolve it gives a test that fails with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..engine.capabilities import Capabilities
from ..engine.registry import DEFAULT_FAMILY
from ..engine.target import Config, Target


def conformance_test(
    target: str | Callable[..., Any],
    *,
    family: str = DEFAULT_FAMILY,
    caps: Capabilities | None = None,
    order: str | None = None,
    page_sizes: list[int] | None = None,
    need_sort: list[bool] | None = None,
    device: str = "cpu",
    examples: int | None = None,
    steps: int | None = None,
    seed: int | None = None,
) -> Callable[..., None]:
    """A pytest test function running the oracle on ``target`` (see the module docstring).

    ``target``: a factory object, a ``module:factory`` path or an alias of ``family`` (an alias
    of several factories, or a comma list, runs each; the test ids then name the target).
    ``family``: a registered allocator family (default ``"single"``). ``caps``: the capabilities
    in force, in place of the factory's declaration (the family's capabilities class:
    :class:`~kvpool.oracle.engine.capabilities.Capabilities` for ``single``, ``HybridCapabilities``
    / ``UnifiedCapabilities`` for the others). ``order`` (``exact`` / ``contract``; the single
    family only, the others compare in the exact order), ``page_sizes`` and ``need_sort`` select
    configurations (on an undeclared factory they declare). ``examples`` / ``steps``: per
    configuration; default: the family's budget. ``seed``: None runs derandomized.

    The returned test is parametrized over the configurations (ids ``ps4-unsorted-exact``); it
    fails with the oracle's report on a divergence, an oracle error or a run that made no call.
    Where the target cannot be resolved (an unknown family or target, a factory that does not
    build, a bad option) the test fails with the reason; where its peer is not installed it
    skips (outside CI).
    """
    import pytest

    from ..engine.families import family as family_of
    from ..peers.availability import may_skip
    from .plan import UsageError, plan

    try:
        planned = plan(target, order=order, page_sizes=page_sizes, need_sort=need_sort,
                       device=device, family=family, caps=caps)
    except UsageError as err:
        message = f"kvpool.oracle: {err}" + (f"\n{err.trace}" if err.trace else "")
        skip = may_skip(err)

        def test_conformance_unresolved() -> None:
            if skip:
                pytest.skip(f"{message} (a peer is not installed here)")
            pytest.fail(message, pytrace=False)

        return test_conformance_unresolved
    fam = family_of(family)
    cases = [(p.target, c) for p in planned for c in p.configs]
    several = len(planned) > 1
    ids = [f"{t.path}-{_config_id(c)}" if several else _config_id(c) for t, c in cases]

    @pytest.mark.parametrize("kvpool_case", cases, ids=ids)
    def test_conformance(kvpool_case: tuple[Target, Config]) -> None:
        from ..engine.runner import run_config

        loaded, config = kvpool_case
        result = run_config(
            loaded, config, max_examples=examples or fam.default_examples, seed=seed,
            step_count=steps or fam.default_steps,
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
