"""Test the tester: the oracle catches every deliberately broken allocator, with a short trace.

Budget per broken allocator: at most ``BUDGET_EXAMPLES`` Hypothesis examples of at most
``STEPS`` calls (derandomized, so the run is the same every time) and ``SHRINK_SECONDS`` of
shrinking. The shrunk trace must have at most ``MAX_TRACE_CALLS`` calls after the constructor,
name one of the clauses listed for the bug, replay from its JSON form to the same clause, and
render as a pytest function that fails on the broken allocator and passes once the factory is
replaced by a correct one.
"""

from __future__ import annotations

from typing import Any

import pytest
from broken_allocators import BROKEN, Broken
from broken_causes import symptom_note
from broken_clauses import BROKEN_CLAUSES
from broken_impl import BROKEN_IMPL
from kvpool.oracle.engine.capabilities import capabilities_of
from kvpool.oracle.engine.replay import replay
from kvpool.oracle.engine.runner import DEFAULT_STEPS, run_config
from kvpool.oracle.engine.target import Config, Target
from kvpool.oracle.engine.trace import Trace

BUDGET_EXAMPLES = 200
STEPS = DEFAULT_STEPS
SHRINK_SECONDS = 3.0
MAX_TRACE_CALLS = 8


def _run_repro(source: str) -> BaseException | None:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<repro>", "exec"), namespace)
    try:
        namespace["test_kvpool_repro"]()
    except (Exception, pytest.fail.Exception) as err:  # an assert, or the target's own raise
        return err
    return None


def _assert_repro(source: str, broken: Broken) -> None:
    """The printed pytest function fails on the broken allocator and passes on a correct one."""
    assert _run_repro(source) is not None, source
    fixed = source.replace(
        f"from {broken.module} import {broken.name} as factory", broken.correct_import()
    )
    assert fixed != source
    assert _run_repro(fixed) is None, fixed


def _target(b: Broken) -> Target:
    return Target(b.factory, capabilities_of(b.factory), b.path)


ALL_BROKEN = (*BROKEN, *BROKEN_IMPL, *BROKEN_CLAUSES)


@pytest.mark.parametrize("broken", ALL_BROKEN, ids=[b.cls.__name__ for b in ALL_BROKEN])
def test_oracle_catches_broken_allocator(broken: Broken) -> None:
    """Every bug class (B1-B17 and contract breaches) is caught and reported by clause."""
    target = _target(broken)
    config = Config(broken.page_size, broken.need_sort, "cpu", broken.order)
    result = run_config(
        target,
        config,
        max_examples=BUDGET_EXAMPLES,
        step_count=STEPS,
        shrink_seconds=SHRINK_SECONDS,
    )
    assert result.error is None, result.error
    failure = result.failure
    assert failure is not None, f"{broken.cls.__name__} not caught in {BUDGET_EXAMPLES} examples"
    assert failure.clause in broken.clauses, symptom_note(broken) + failure.report()
    assert failure.trace.num_calls() <= MAX_TRACE_CALLS, failure.report()
    source = failure.pytest_source()
    assert f"[{failure.clause}]" in source
    _assert_repro(source, broken)
    again = replay(Trace.from_json(failure.trace.to_json()), target)
    assert again is not None and again.clause == failure.clause, failure.report()
