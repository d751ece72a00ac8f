"""Test the tester: the oracle catches every deliberately broken allocator, with a short trace.

Budget per broken allocator: at most ``BUDGET_EXAMPLES`` Hypothesis examples of at most
``STEPS`` calls (derandomized, so the run is the same every time) and ``SHRINK_SECONDS`` of
shrinking. The shrunk trace must have at most ``MAX_TRACE_CALLS`` calls after the constructor,
name one of the clauses listed for the bug, replay from its JSON form to the same clause, and
render as a pytest function that compiles.
"""

from __future__ import annotations

import pytest
from broken_allocators import BROKEN, Broken
from kvpool.oracle.replay import replay
from kvpool.oracle.runner import Config, Target, run_config
from kvpool.oracle.trace import Trace

BUDGET_EXAMPLES = 200
STEPS = 30
SHRINK_SECONDS = 3.0
MAX_TRACE_CALLS = 12


def _target(b: Broken) -> Target:
    return Target(b.factory, b.factory.kvpool_capabilities, f"broken_allocators:{b.name}")


@pytest.mark.parametrize("broken", BROKEN, ids=[b.cls.__name__ for b in BROKEN])
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
    assert failure.clause in broken.clauses, failure.report()
    assert failure.trace.num_calls() <= MAX_TRACE_CALLS, failure.report()
    source = failure.pytest_source()
    compile(source, "<repro>", "exec")
    assert f"[{failure.clause}]" in source
    again = replay(Trace.from_json(failure.trace.to_json()), target)
    assert again is not None and again.clause == failure.clause, failure.report()
