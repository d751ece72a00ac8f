"""Printed repros are regression tests: small, asserting the contract's property, not pinning pages.

For a representative set of broken allocators (at least one per call kind: alloc, free, extend,
decode, group, segments, plus aliasing and clear), a contract-order run's repro fails on the
broken allocator and passes on two correct allocators in different orders: the spec-backed one
(lowest page first) and :class:`order_allocators.HighestFirst` (highest page first). Exact-order
repros run the smallest pool that still fails; the hybrid family's repros (exact order) fail on
each planted hybrid bug and pass on kvpool's SWA allocator.
"""

from __future__ import annotations

from typing import Any

import pytest
from broken_allocators import BROKEN, Broken
from broken_clauses import BROKEN_CLAUSES
from broken_hybrid import BROKEN_HYBRID, BrokenHybrid
from kvpool.oracle.engine.capabilities import capabilities_of
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config, Target
from kvpool.oracle.families.hybrid.runner import run_hybrid
from order_allocators import highest_first

MAX_REPRO_CHARS = 4000
BY_NAME = {b.cls.__name__: b for b in (*BROKEN, *BROKEN_CLAUSES)}
CONTRACT_SET = (  # call kind: broken allocators
    "SlotTwice", "UnalignedFloored",  # alloc
    "PagedFreeNoDedup", "LeakOnFree", "DoubleFreeAccepted",  # free
    "ExtendPart1OffByOne", "MutateBeforeNone",  # extend
    "DecodeNewPageWrong",  # decode
    "GroupEndTwice", "NestedBeginDrops", "DeferredNotCopied",  # group
    "BoundaryTwice", "BoundaryNever",  # segments
    "ViewMutatedLater", "ClearKeepsStaged",  # aliasing, clear
)


def _run_repro(source: str) -> BaseException | None:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<repro>", "exec"), namespace)
    try:
        namespace["test_kvpool_repro"]()
    except (Exception, pytest.fail.Exception) as err:  # an assert, a Divergence, a raise
        return err
    return None


def _failure(broken: Broken, order: str) -> Any:
    target = Target(broken.factory, capabilities_of(broken.factory), broken.path)
    config = Config(broken.page_size, broken.need_sort, "cpu", order)
    result = run_config(target, config, max_examples=200)
    assert result.failure is not None, f"{broken.name} not caught in {order} order"
    return result.failure


@pytest.mark.parametrize("name", CONTRACT_SET)
def test_contract_repro_fails_on_the_bug_and_passes_in_another_order(name: str) -> None:
    broken = BY_NAME[name]
    failure = _failure(broken, "contract")
    source = failure.pytest_source()
    assert len(source) <= MAX_REPRO_CHARS, source
    assert "!= [" not in source, source  # no "not this wrong answer" assert
    assert ".tolist() == [" not in source, source  # no slot list of the recorded allocator
    assert _run_repro(source) is not None, source
    own = f"from {broken.module} import {broken.name} as factory"
    for correct in (
        "from order_allocators import highest_first as factory",
        "from spec_torch import spec_paged as factory",
    ):
        fixed = source.replace(own, correct)
        assert fixed != source
        assert _run_repro(fixed) is None, fixed


def test_highest_first_is_correct_in_another_order() -> None:
    """The other-order allocator conforms by contract and does not follow the reference."""
    target = Target(highest_first, capabilities_of(highest_first), "order_allocators:highest_first")
    assert run_config(target, Config(4, False, "cpu", "contract"), max_examples=40).ok
    assert run_config(target, Config(4, True, "cpu", "contract"), max_examples=40).ok
    first = highest_first(size=16, page_size=4, need_sort=False).alloc(4)
    assert first.tolist() == [16, 17, 18, 19]


@pytest.mark.parametrize(("name", "pool"), [("SlotTwice", 4), ("DoubleFreeAccepted", 4)])
def test_exact_repro_uses_the_smallest_pool(name: str, pool: int) -> None:
    """The minimizer shrinks the pool too: one page is all these bugs need."""
    failure = _failure(BY_NAME[name], "exact")
    assert failure.trace.steps[0].args["size"] == pool, failure.report()
    assert len(failure.pytest_source()) <= MAX_REPRO_CHARS


@pytest.mark.parametrize("broken", BROKEN_HYBRID, ids=[b.cls.__name__ for b in BROKEN_HYBRID])
def test_hybrid_repro_fails_on_the_bug_and_passes_on_kvpool(broken: BrokenHybrid) -> None:
    """The hybrid family's repros: small pools, short, failing on the planted bug only."""
    failure = run_hybrid(broken.factory(), max_examples=60).failure
    assert failure is not None
    source = failure.pytest_source()
    assert len(source) <= MAX_REPRO_CHARS, source
    create = failure.trace.steps[0].args
    assert create["size"] <= 64 and create["size_swa"] <= 64, failure.report()
    own = f"from broken_hybrid import {broken.cls.__name__} as factory"
    assert own in source, source
    failing = source.replace(own, f"from hybrid_factories import {broken.cls.__name__} as factory")
    err = _run_repro(failing)
    # an assert, a rejection that did not happen or the target's own raise; not a repro that
    # cannot run (a constructor or a name it got wrong)
    assert err is not None and not isinstance(err, (TypeError, NameError, ImportError)), (
        err, source)
    fixed = source.replace(own, "from kvpool.oracle.families.hybrid.targets import kvpool_swa "
                           "as factory")
    assert _run_repro(fixed) is None, fixed
