"""The oracle's state machines: each step one action, chosen by cheap draws.

Hypothesis's rule machinery (``RuleBasedStateMachine``) costs, for every step, a precondition
pass, a filtered ``sampled_from`` draw of the rule, a fixed-dictionary draw of its arguments and
a span for each, and for an ``initialize`` rule new strategies every example: more than most of
the oracle's actions cost themselves. An :class:`ActionMachine` marks its actions with
:func:`action` (the precondition as the argument), and :func:`run_machine` runs it as one
Hypothesis test. A step then:

- in a fresh example: calls the machine's ``start`` (the constructor call and its warm start);
- otherwise: runs one action among those whose precondition holds (``eligible``), drawn as
  Hypothesis draws a rule (an index among all actions, redrawn up to three times while it
  names one not eligible or switched off, then one among the eligible ones);
- swarm testing as Hypothesis's rules have it (feature flags): per example a probability
  ``p`` is drawn, and each action is switched off with probability ``p``, decided the first
  time it is eligible; when every eligible action is off, any eligible one may run.

An action receives the step's :class:`~kvpool.oracle.engine.draws.Draws` as ``data``. The
number of steps per example (``stateful_step_count``) counts ``start`` as one, as Hypothesis
counts an ``initialize`` rule.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.internal.reflection import function_digest

from .draws import Draws
from .report import OracleError

F = TypeVar("F", bound=Callable[..., Any])
_PRE = "_kvpool_action_pre"  # the attribute that marks an action (its precondition)
_RANK = "_kvpool_action_rank"  # its place in the order (see ``actions_of``)


def action(pre: Callable[[Any], object] = lambda machine: True, rank: int = 1) -> Callable[[F], F]:
    """Mark a method ``(self, data)`` as an action, eligible while ``pre(self)`` is true.

    ``rank`` orders the actions (then their names): the choice of an action is an index, and
    Hypothesis draws the low indices most often (and shrinks toward them), so the actions that
    change least come first, as Hypothesis orders rules by how many arguments they draw."""

    def mark(fn: F) -> F:
        setattr(fn, _PRE, pre)
        setattr(fn, _RANK, rank)
        return fn

    return mark


@dataclass(frozen=True)
class Action:
    """One action of a machine: its method, its precondition and its rank."""

    name: str
    run: Callable[..., Any]
    pre: Callable[[Any], object]
    rank: int = 1


def actions_of(cls: type) -> tuple[Action, ...]:
    """The actions of ``cls`` (its own and inherited), by rank and name (a stable order)."""
    found: dict[str, Action] = {}
    for klass in reversed(cls.__mro__):
        for name, fn in vars(klass).items():
            pre = getattr(fn, _PRE, None)
            if pre is not None:
                found[name] = Action(name, fn, pre, getattr(fn, _RANK, 1))
    return tuple(sorted(found.values(), key=lambda a: (a.rank, a.name)))


class Swarm:
    """This example's switched-off actions (see the module docstring)."""

    def __init__(self, data: Draws) -> None:
        self.p_off = data.integer(0, 254) / 255
        self.on: dict[str, bool] = {}

    def enabled(self, name: str, data: Draws) -> bool:
        """Whether action ``name`` may run in this example (drawn at its first question)."""
        on = self.on.get(name)
        if on is None:
            on = self.on[name] = not data.boolean(self.p_off)
        return on


class ActionMachine:
    """A state machine whose steps run ``start`` and then one action each, and ``teardown``
    at the end of every example (:func:`run_machine`)."""

    ready: bool
    _actions: tuple[Action, ...] | None = None  # per class, collected at its first step

    def start(self, data: Draws) -> None:
        """Build the target (and set ``ready``): the first step of every example."""
        raise NotImplementedError

    def teardown(self) -> None:
        """The end of an example, however it ended (nothing by default)."""

    def act(self, data: Draws) -> None:
        """One step: ``start``, or one eligible action (see the module docstring)."""
        if not self.ready:
            self.swarm = Swarm(data)
            self.start(data)
            return
        cls = type(self)
        if cls._actions is None:
            cls._actions = actions_of(cls)
        self._pick(cls._actions, data).run(self, data=data)

    def _pick(self, actions: tuple[Action, ...], data: Draws) -> Action:
        """An eligible action, switched on where one is, drawn as Hypothesis draws a rule: up
        to three draws among all actions, then one among the eligible ones."""
        for _ in range(3):
            candidate = actions[data.integer(0, len(actions) - 1)]
            if candidate.pre(self) and self.swarm.enabled(candidate.name, data):
                return candidate
        eligible = [a for a in actions if a.pre(self)]
        if not eligible:
            raise OracleError(f"{type(self).__name__}: no action is possible in this state")
        on = [a for a in eligible if self.swarm.enabled(a.name, data)]
        return data.choice(on or eligible)


def run_machine(cls: type[ActionMachine], run_settings: settings) -> None:
    """Run ``cls`` as one Hypothesis test: each example is ``stateful_step_count`` steps at
    most, the first ``start``, then ``teardown`` whatever ended it.

    Steps are drawn as ``run_state_machine_as_test`` draws those of a one-rule machine (each
    step a span ending in a stop choice, so that shrinking can drop steps and end examples
    early), without its per-step rule selection; the same machine class gets the same seed.
    """
    max_steps = run_settings.stateful_step_count

    @run_settings
    @given(st.data())
    def run(data: st.DataObject) -> None:
        draws = Draws(data)
        machine = cls()
        try:
            steps_run = 0
            while True:
                draws.begin_step()
                if draws.stop(steps_run, max_steps):
                    break
                steps_run += 1
                machine.act(draws)
                draws.end_step()
        finally:
            machine.teardown()

    inner: Any = run.hypothesis.inner_test  # type: ignore[attr-defined]
    inner._hypothesis_internal_add_digest = function_digest(cls)  # the seed of this class
    use_seed = getattr(cls, "_hypothesis_internal_use_seed", None)
    run._hypothesis_internal_use_seed = use_seed  # type: ignore[attr-defined]
    with fewer_collections():
        run()


@contextlib.contextmanager
def fewer_collections(young: int = 50_000) -> Iterator[None]:
    """Collect the cyclic garbage collector's youngest generation every ``young`` allocations
    (Python's default: 700) while a run's examples execute: a run allocates many short-lived
    lists and few cycles, and the collections cost a few percent of its time. The thresholds
    in force before are restored afterwards."""
    saved = gc.get_threshold()
    gc.set_threshold(young, *saved[1:])
    try:
        yield
    finally:
        gc.set_threshold(*saved)
