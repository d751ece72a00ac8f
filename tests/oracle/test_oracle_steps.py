"""The state machines' cheap draws (``engine.draws``) and one-rule steps (``engine.steps``)."""

from __future__ import annotations

import gc
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kvpool.oracle.engine.draws import Draws
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.steps import (
    ActionMachine,
    action,
    actions_of,
    fewer_collections,
    run_machine,
)
from kvpool.oracle.engine.target import Config
from kvpool.oracle.entry.plan import plan

QUICK = settings(
    max_examples=30,
    database=None,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)

# (strategy, whether a value is one it can produce)
SHAPES: list[tuple[st.SearchStrategy[Any], Any]] = [
    (st.integers(3, 9), lambda v: 3 <= v <= 9),
    (st.integers(0, 10_000), lambda v: 0 <= v <= 10_000),  # wide: Hypothesis's own draw
    (st.booleans(), lambda v: v in (True, False)),
    (st.just(7), lambda v: v == 7),
    (st.sampled_from(["a", "b", "c"]), lambda v: v in "abc"),
    (st.sampled_from(range(4, 40, 4)), lambda v: v in range(4, 40, 4)),
    (
        st.one_of(st.just(1), st.integers(2, 4), st.sampled_from([9])),
        lambda v: v in (1, 2, 3, 4, 9),
    ),
    (st.lists(st.integers(0, 3), max_size=3, unique=True), lambda v: len(set(v)) == len(v) <= 3),
    (st.integers(0, 5).map(lambda v: -v), lambda v: -5 <= v <= 0),
    (st.permutations([1, 2, 3]), lambda v: sorted(v) == [1, 2, 3]),
]


@QUICK
@given(st.data())
def test_draws_give_values_of_the_strategy(data: st.DataObject) -> None:
    draws = Draws(data)
    for strategy, ok in SHAPES:
        value = draws.draw(strategy)
        assert ok(value), (strategy, value)
    assert 2 <= draws.integer(2, 5) <= 5
    assert draws.choice("xyz") in "xyz"
    assert draws.boolean(0.0) is False
    assert draws.boolean(1.0) is True


def test_fewer_collections_restores_the_thresholds() -> None:
    before = gc.get_threshold()
    with fewer_collections(12_345):
        assert gc.get_threshold()[0] == 12_345
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("left through an exception")
    assert gc.get_threshold() == before


class Counting(ActionMachine):
    """Actions that record what ran; ``only_when_even`` is eligible at even totals only."""

    log: ClassVar[list[list[str]]] = []

    def __init__(self) -> None:
        super().__init__()
        self.ready = False
        self.total = 0
        self.ran: list[str] = []
        Counting.log.append(self.ran)

    def start(self, data: Draws) -> None:
        self.ran.append("start")
        self.ready = True

    @action()
    def add(self, data: Draws) -> None:
        self.ran.append("add")
        self.total += data.integer(1, 3)

    @action(lambda self: self.total % 2 == 0)
    def only_when_even(self, data: Draws) -> None:
        assert self.total % 2 == 0, "ran while its precondition was false"
        self.ran.append("only_when_even")
        self.total += 1


def test_run_machine_starts_each_example_and_runs_eligible_actions() -> None:
    Counting.log = []
    run_machine(Counting, settings(QUICK, stateful_step_count=6))
    assert [a.name for a in actions_of(Counting)] == ["add", "only_when_even"]
    examples = [ran for ran in Counting.log if ran]
    assert examples, "no example ran"
    for ran in examples:
        assert ran[0] == "start" and "start" not in ran[1:]
        assert len(ran) <= 6  # the start counts as one step
    assert any("only_when_even" in ran for ran in examples)
    assert any("add" in ran for ran in examples)


def test_a_derandomized_run_repeats_its_calls() -> None:
    target = plan("kvpool.oracle.families.single.targets:kvpool_paged")[0].target
    config = Config(page_size=4, need_sort=False)
    first = run_config(target, config, max_examples=8)
    again = run_config(target, config, max_examples=8)
    assert first.ok and first.calls > 0
    assert (first.step_hash, first.calls) == (again.step_hash, again.calls)
    other = run_config(target, Config(page_size=4, need_sort=True), max_examples=8)
    assert other.step_hash != first.step_hash  # each machine class has its own stream
