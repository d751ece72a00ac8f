"""Cheap draws for the oracle's state machines.

A conformance run draws several values per allocator call (batch sizes, token counts, which
request, which mode). Through ``st.data().draw(strategy)`` each draw costs tens of
microseconds of Hypothesis bookkeeping (argument spans, the global-``random`` guard, the
strategy's validation, a span per strategy), more than the call it parametrises.
:class:`Draws` is the ``st.data()`` object of a rule with the same ``draw(strategy)`` interface
and the same choices underneath, drawn directly as choices of the test case:

- ``integer(lo, hi)``, ``boolean()``, ``choice(seq)``: one integer or boolean choice each;
- ``bounded(lo, hi)``, ``sample(seq)``: ``draw(st.integers(lo, hi))`` and
  ``draw(st.sampled_from(seq))`` with the same choices, without building a strategy per draw;
- ``draw(strategy)``: bounded ``st.integers`` (ranges up to 128 values), ``st.booleans()``,
  ``st.just``, ``st.sampled_from`` and ``st.one_of`` of those are drawn as the choices their
  Hypothesis ``do_draw`` makes; any other strategy (``lists``, ``permutations``, mapped or
  filtered strategies, wider integer ranges with their boundary weights) goes through
  Hypothesis's own ``draw`` unchanged.

Shrinking still works on these choices (integers shrink toward the low end, booleans to False),
and a failing example replays from its choices like any other. Only Hypothesis's per-argument
notes (``Draw 1: ...``) are not printed, which the oracle never shows (it reports its own trace).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from hypothesis import strategies as st

T = TypeVar("T")

_MAX_FAST_RANGE = 127  # wider ranges: Hypothesis weights the bounds (IntegersStrategy.do_draw)

_STEP_LABEL = 0x6B76706F6F6C5354  # the spans of state-machine steps (any fixed label)

try:  # the buffer limit and span calls of Hypothesis's state machines (renamed in 6.12x)
    from hypothesis.internal.conjecture.engine import BUFFER_SIZE as _BUFFER_SIZE
except ImportError:  # pragma: no cover
    _BUFFER_SIZE = 8 * 1024


def _span_start(cd: Any, label: int) -> None:
    start = getattr(cd, "start_span", None) or cd.start_example
    start(label)


def _span_stop(cd: Any) -> None:
    stop = getattr(cd, "stop_span", None) or cd.stop_example
    stop()


# Each pooled constraints dict by its bounds / probability (the same dicts Hypothesis pools).
_INTEGER: dict[tuple[int, int], Any] = {}
_BOOLEAN: dict[float, Any] = {}
try:  # ConjectureData's internal draw of one choice, with its pooled constraints
    from hypothesis.internal.conjecture.data import ConjectureData

    _DIRECT = callable(getattr(ConjectureData, "_draw", None)) and callable(
        getattr(ConjectureData, "_pooled_constraints", None)
    )
except ImportError:  # pragma: no cover
    _DIRECT = False

try:  # the strategy classes whose draws are single choices (Hypothesis internals)
    from hypothesis.strategies._internal.lazy import LazyStrategy
    from hypothesis.strategies._internal.misc import BooleansStrategy, JustStrategy
    from hypothesis.strategies._internal.numbers import IntegersStrategy
    from hypothesis.strategies._internal.strategies import OneOfStrategy, SampledFromStrategy

    _KNOWN = True
except ImportError:  # pragma: no cover - another Hypothesis layout: every draw is generic
    _KNOWN = False


class Draws(st.DataObject):
    """A rule's ``data`` with cheap draws (see the module docstring).

    Built from the ``DataObject`` Hypothesis hands a rule; usable wherever that one is.
    """

    def __init__(self, data: st.DataObject) -> None:
        super().__init__(data.conjecture_data)
        self._cd = data.conjecture_data
        # ConjectureData.draw_integer / draw_boolean build and pool a constraints dict per draw;
        # with the internal ``_draw`` at hand, one pooled dict per bound or probability serves
        direct = _DIRECT and not getattr(self._cd.provider, "avoid_realization", True)
        self._draw_choice: Any = self._cd._draw if direct else None

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]`` (one choice; shrinks toward ``lo``, or 0 if inside)."""
        if self._draw_choice is None:
            return int(self._cd.draw_integer(lo, hi))
        key = (lo, hi)
        constraints = _INTEGER.get(key)
        if constraints is None:
            constraints = _INTEGER[key] = self._cd._pooled_constraints(
                "integer", {"min_value": lo, "max_value": hi, "weights": None, "shrink_towards": 0}
            )
        return int(self._draw_choice("integer", constraints, observe=True, forced=None))

    def boolean(self, p: float = 0.5, forced: bool | None = None) -> bool:
        """True with probability ``p`` (one choice; shrinks to False); ``forced``: that value,
        recorded as a forced choice (``0 < p < 1``)."""
        if self._draw_choice is None:
            return bool(self._cd.draw_boolean(p, forced=forced))
        constraints = _BOOLEAN.get(p)
        if constraints is None:
            constraints = _BOOLEAN[p] = self._cd._pooled_constraints("boolean", {"p": p})
        return bool(self._draw_choice("boolean", constraints, observe=True, forced=forced))

    def choice(self, values: Sequence[T]) -> T:
        """One of ``values`` (non-empty; shrinks toward the first)."""
        return values[self.integer(0, len(values) - 1)]

    def bounded(self, lo: int, hi: int) -> int:
        """``draw(st.integers(lo, hi))`` without building the strategy: the same choices (one
        integer choice up to 128 values, Hypothesis's own weighted draw for wider ranges)."""
        if hi - lo > _MAX_FAST_RANGE:
            return int(self._cd.draw(st.integers(lo, hi)))
        return self.integer(lo, hi)

    def sample(self, values: Sequence[T]) -> T:
        """``draw(st.sampled_from(values))`` without building the strategy (``values``
        non-empty): no choice for one value, else one integer choice of the index."""
        if len(values) == 1:
            return values[0]
        return values[self.integer(0, len(values) - 1)]

    def begin_step(self) -> None:
        """Open the span of one state-machine step (the shrinker drops steps by spans)."""
        _span_start(self._cd, _STEP_LABEL)

    def end_step(self) -> None:
        """Close the span :meth:`begin_step` opened."""
        _span_stop(self._cd)

    def stop(self, steps_run: int, max_steps: int) -> bool:
        """Whether the example ends before step ``steps_run + 1``: never before the first,
        always after ``max_steps`` or when the example's choices near Hypothesis's limit, else
        with probability 2**-16 (one choice, as Hypothesis's state machines draw it)."""
        must_stop: bool | None = None
        if steps_run >= max_steps or self._cd.length > 0.8 * _BUFFER_SIZE:
            must_stop = True
        elif steps_run == 0:
            must_stop = False
        return self.boolean(2**-16, forced=must_stop)

    def draw(self, strategy: st.SearchStrategy[T], label: Any = None) -> T:
        """A value of ``strategy``: by its choices directly where it is one of the simple
        strategies above, else by Hypothesis's own ``draw``."""
        if _KNOWN:
            done, value = self._fast(strategy)
            if done:
                return value  # type: ignore[no-any-return]
        return self._cd.draw(strategy)

    def _fast(self, strategy: Any) -> tuple[bool, Any]:
        """``(True, value)`` when ``strategy`` is drawn here, else ``(False, None)``."""
        if type(strategy) is LazyStrategy:
            if strategy._transformations:
                return False, None
            strategy = strategy.wrapped_strategy
        kind = type(strategy)
        if kind is IntegersStrategy:
            lo, hi = strategy.start, strategy.end
            if lo is None or hi is None or hi - lo > _MAX_FAST_RANGE:
                return False, None
            return True, self.integer(lo, hi)
        if kind is BooleansStrategy:
            return True, self.boolean()
        if kind is JustStrategy or kind is SampledFromStrategy:
            if strategy._transformations:
                return False, None
            elements = strategy.elements
            if len(elements) == 1:
                return True, elements[0]
            return True, elements[self.integer(0, len(elements) - 1)]
        if kind is OneOfStrategy:
            branches = strategy.element_strategies  # flattened, the empty ones left out
            if not branches:
                return False, None
            branch = branches[self.integer(0, len(branches) - 1)]
            return True, self.draw(branch)
        return False, None
