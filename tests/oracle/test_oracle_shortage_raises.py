"""A declared ``shortage_raises``: a raise stands for the None, and only for it.

The correct raising allocator conforms under its declaration and diverges (the None rule,
naming the TypeError) without it; each broken one of ``broken_shortage.py`` is caught by the
default run under the declaration, with a short trace and a repro that runs the shortage under
``pytest.raises``.
"""

from __future__ import annotations

import pytest
from broken_allocators import Broken
from broken_shortage import CAPS, SHORTAGE_BROKEN, shortageraises
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config, Target

CONFIG = Config(4, False, "cpu", "exact")
NONE_CLAUSES = ("ALLOC-3", "EXTEND-6", "DECODE-6")


def test_oracle_shortage_raise_conforms_only_when_declared() -> None:
    declared = Target(shortageraises, CAPS, "broken_shortage:shortageraises")
    result = run_config(declared, CONFIG, max_examples=80)
    assert result.ok, result.failure.report() if result.failure else result.error
    assert result.coverage["alloc.short_partial"] and result.coverage["extend.short_empty"]
    undeclared = Target(shortageraises, CAPS.replace(shortage_raises=()), declared.path)
    failure = run_config(undeclared, CONFIG, max_examples=40, shrink_seconds=2).failure
    assert failure is not None and failure.clause in NONE_CLAUSES, failure
    assert "TypeError" in failure.detail


@pytest.mark.parametrize("broken", SHORTAGE_BROKEN, ids=[b.cls.__name__ for b in SHORTAGE_BROKEN])
def test_oracle_relaxed_shortage_check_catches(broken: Broken) -> None:
    target = Target(broken.factory, CAPS, broken.path)
    result = run_config(target, CONFIG)
    failure = result.failure
    assert failure is not None, f"{broken.cls.__name__} not caught"
    assert failure.clause in broken.clauses, failure.report()
    assert failure.trace.num_calls() <= 8, failure.report()
    source = failure.pytest_source()
    assert "except TypeError:" in source  # the shortage, in the target's form
    with pytest.raises(AssertionError):
        _run(source)
    _run(source.replace(f"import {broken.name} as factory", "import shortageraises as factory"))


def _run(source: str) -> None:
    namespace: dict[str, object] = {}
    exec(compile(source, "<repro>", "exec"), namespace)
    namespace["test_kvpool_repro"]()  # type: ignore[operator]
