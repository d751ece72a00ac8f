"""Run one mamba-slot call on the target and on :class:`~kvpool.spec.mamba_slots.MambaSlotModel`,
then compare.

After every valid call: the result (None against slots, other slots, or not an int64 tensor),
then the census: the free list in order (``free_slots``) and ``available_size()`` /
``schedulable_available_size()`` (``MSLOT-2``). A difference in the result or the free list is
reported under the clause that decided the call's effect in the model (``model.rule``: ``MSLOT-3``
for a plain allocation, ``MSLOT-9`` inside a group, ``MSLOT-11`` for the first draw after a
``clear`` that closed a group, ...). A rejected call is the engine's (its clause, ``ERR-1``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from kvpool.spec.contract import Divergence
from kvpool.spec.mamba_slots import MambaSlotModel

from ...engine.core import Engine
from ...engine.trace import TraceStep
from ...reporting.pagemap import render
from .calls import MAMBA_SLOT_CALLS
from .coverage import events_of

Census = tuple[list[int], int, int]


def slot_map(size: int, free: list[int], group: list[int]) -> str:
    """One character per slot from slot 1, in the page map's legend: ``.`` free, ``d``
    pre-allocated to the open group, ``o`` held by the caller."""
    free_set, group_set = set(free), set(group)
    return "".join("." if s in free_set else "d" if s in group_set else "o"
                   for s in range(1, size + 1))


class MambaSlotExecutor(Engine):
    """A mamba-slot target and the spec, call by call (see the module docstring)."""

    family = "mamba_slot"
    calls = MAMBA_SLOT_CALLS
    model: MambaSlotModel | None
    _after_clear = False  # the call being compared came after a clear() that closed a group

    def create(self, size: int) -> None:
        """A fresh target and model of ``size`` slots. Raises OracleError when the factory
        fails."""
        step = self._begin({"size": size}, MambaSlotModel(size), size=size, device=self.device)
        self._checked(0, lambda: "", lambda: self._post(step))
        self.events["create"] += 1

    def create_from(self, args: Mapping[str, Any]) -> None:
        self.create(args["size"])

    def note(self, event: str) -> None:
        """Count a coverage event of the scheduler model."""
        self.events[event] += 1

    def _census(self) -> Census:
        x = self.target
        return ([int(s) for s in x.free_slots.reshape(-1).tolist()], int(x.available_size()),
                int(x.schedulable_available_size()))

    def _record_rejected_state(self, step: TraceStep, census: Any) -> None:
        step.available_after = census[1]

    def _valid(self, step: TraceStep) -> Any:
        model = self.model
        assert model is not None
        self._after_clear = model.cleared_group  # read before the spec's step changes it
        call, want, (got, _) = self._spec_then_target(step)
        if call.kind == "alloc":
            self._judge_ids(step, got, want, model.rule, refused_clause="MSLOT-4")
        return want

    def _post(self, step: TraceStep) -> None:
        model = self.model
        assert model is not None
        step.available_after = model.available_size()
        free, size, planner = self._census()
        want = model.free_slots
        if free != want:
            same = sorted(free) == sorted(want)
            raise Divergence(model.rule, f"after {step.call}: free list {free}, the spec's {want}"
                                         f"{' (first-in first-out)' if same else ''}")
        for name, value in (("available_size", size), ("schedulable_available_size", planner)):
            if value != len(want):
                raise Divergence("MSLOT-2", f"after {step.call}: {name}() {value}, the spec's "
                                            f"{len(want)} (the free slots)")

    def _snapshot(self) -> Any:
        m = self.model
        assert m is not None
        return m.size, list(m.free_slots), list(m.group or [])

    def _before_line(self, state: Any) -> Callable[[], str]:
        return lambda: slot_map(*state)

    def _maps(self, index: int, before: Callable[[], str]) -> tuple[str, str]:
        """The slot maps around step ``index``: the spec's before it, the spec's and the
        target's free list after it (one character per slot from slot 1)."""
        after_target = None
        try:
            listed = Counter(self._census()[0])
            size = self.model.size if self.model is not None else 0
            after_target = "".join(
                "#" if not listed[s] else "." if listed[s] == 1 else str(min(listed[s], 9))
                for s in range(1, size + 1))
        except Exception:  # a target that fails to show its free list: the spec's map only
            after_target = None
        return (render(f"before step {index}", before()),
                render(f"after step {index}", slot_map(*self._snapshot()), after_target))

    def _cause(self, step: TraceStep, clause: str, detail: str) -> tuple[str, str]:
        """A valid call that raised is reported under the clause that decided its effect in
        the model (``model.rule``: the group draw, a clear that closed a group, ...); a group
        begun after ``clear()`` closed one that raises found that group still open
        (``MSLOT-11``)."""
        if step.raised is not None and self.model is not None:
            kept = step.call == "alloc_group_begin" and self._after_clear
            return ("MSLOT-11" if kept else self.model.rule), detail
        return clause, detail

    def _final_asserts(self, index: int) -> list[str]:
        """The failing call's result (where it has one) and the spec's free list after it."""
        step = self.trace.steps[index]
        if step.raises is not None or self.model is None:
            return []
        call = self.calls[step.call]
        out = call.checks(step.args, step.expect, f"r{index}") if call.checks else []
        return [*out, f"assert a.free_slots.tolist() == {self.model.free_slots!r}  "
                      f"# [{self.trace.clause}]"]

    def _events_of(self, step: TraceStep, state: Any, result: Any) -> list[str]:
        return events_of(step, result)
