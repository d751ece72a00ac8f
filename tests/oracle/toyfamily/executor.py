"""Run one toy call on the target and on :class:`~toyfamily.spec.SlotModel`, then compare.

After every valid call: the result (``None`` against a list is ``SLOT-2``, another list
``SLOT-3``), then the census: the free list in order (other slots free: ``SLOT-1``; the same
slots in another order: ``SLOT-3``) and ``available_size()`` (``SLOT-1``). A rejected free is
the engine's (``SLOT-4``, ``ERR-1``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvpool.oracle.engine.core import Engine
from kvpool.oracle.engine.trace import TraceStep
from kvpool.spec.contract import Divergence

from .calls import TOY_CALLS
from .coverage import events_of
from .spec import SlotModel


class ToyExecutor(Engine):
    """A toy target and the spec, call by call (see the module docstring)."""

    family = "toy"
    calls = TOY_CALLS
    model: SlotModel | None

    def create(self, size: int) -> None:
        """A fresh target and model of ``size`` slots. Raises OracleError when the factory
        fails."""
        step = self._begin({"size": size}, SlotModel(size), size=size)
        self._checked(0, lambda: "", lambda: self._post(step))

    def create_from(self, args: Mapping[str, Any]) -> None:
        self.create(args["size"])

    def note(self, event: str) -> None:
        """Count a coverage event of the scheduler model."""
        self.events[event] += 1

    def _census(self) -> tuple[list[int], int]:
        return list(self.target.free_slots), int(self.target.available_size())

    def _record_rejected_state(self, step: TraceStep, census: Any) -> None:
        step.available_after = census[1]

    def _valid(self, step: TraceStep) -> Any:
        _, want, (got, _) = self._spec_then_target(step)
        if (got is None) != (want is None):
            raise Divergence("SLOT-2", f"{step.call} returned {got!r}, the spec says {want!r}")
        if got is not None and list(got) != want:
            raise Divergence("SLOT-3", f"{step.call} returned {got!r}, the spec says {want!r}")
        return want

    def _post(self, step: TraceStep) -> None:
        model = self.model
        assert model is not None
        step.available_after = model.available_size()
        (free, size), want = self._census(), (model.free_slots, model.available_size())
        if sorted(free) != sorted(want[0]):
            raise Divergence("SLOT-1", f"after {step.call}: free slots {free}, the spec's "
                                       f"{want[0]}")
        if free != want[0]:
            raise Divergence("SLOT-3", f"after {step.call}: free list {free}, the spec's "
                                       f"{want[0]} (first-in first-out)")
        if size != want[1]:
            raise Divergence("SLOT-1", f"after {step.call}: available_size() {size}, the "
                                       f"spec's {want[1]}")

    def _final_asserts(self, index: int) -> list[str]:
        step = self.trace.steps[index]
        """The failing call's result (where it has one) and the spec's free list after it."""
        step = self.trace.steps[index]
        if step.raises is not None or self.model is None or step.call == "create":
            return []
        call = self.calls[step.call]
        out = call.checks(step.args, step.expect, f"r{index}") if call.checks else []
        return [*out, f"assert a.free_slots == {self.model.free_slots!r}  # [{self.trace.clause}]"]

    def _events_of(self, step: TraceStep, state: Any, result: Any) -> list[str]:
        return events_of(step, result)
