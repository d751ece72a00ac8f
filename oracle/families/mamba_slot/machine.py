"""The mamba-slot scheduler model: requests take one state slot each (a batch of several),
finish (freeing their slots, batched and maybe reordered), and SGLang's ``match_prefix`` loop
pre-allocates a group (``alloc_group_begin(n)``), draws from it one request at a time
(``alloc(1)``) and ends it (the rest goes back); the pool is cleared now and then (inside a
group too, where the target declares ``clear_in_group``), and (checked targets) a call breaks
a caller rule. Declares the family's ``FAMILY``."""

from __future__ import annotations

import sys

from ...engine.draws import Draws
from ...engine.examples import record_example
from ...engine.families import Family
from ...engine.machines import FamilyMachine, bind
from ...engine.steps import ActionMachine, action
from ...engine.target import Config, Target
from .coverage import MAMBA_SLOT
from .executor import MambaSlotExecutor
from .targets import MambaSlotCapabilities


class MambaSlotMachine(FamilyMachine, ActionMachine):
    """Scheduler model over one mamba-slot configuration (bound by
    :func:`mamba_slot_machine_for`); each row is one batch's slots."""

    executor_class = MambaSlotExecutor
    ex: MambaSlotExecutor
    caps: MambaSlotCapabilities
    rows: list[list[int]]

    def __init__(self) -> None:
        super().__init__()
        self.ready = False
        self.group_open = False

    def start(self, data: Draws) -> None:
        """A fresh pool of 1-16 slots."""
        self.ex.create(data.integer(1, 16))
        self.ready = True

    def _alloc(self, need: int) -> list[int] | None:
        m = self.ex.model
        assert m is not None
        if self.group_open:
            self.ex.note("group.draw" if need == 1 and m.group else
                         "group.drained" if need == 1 else "group.other")
        out: list[int] | None = self.ex.call("alloc", need_size=need)
        if out:  # alloc(0) hands out nothing to free
            self.rows.append(out)
        return out

    @action()
    def arrive(self, data: Draws) -> None:
        """A batch of 1-4 requests, or of every free slot (``fill``), or one more (``short``)."""
        m = self.ex.model
        assert m is not None
        kind = data.choice(["some", "some", "one", "fill", "over"])
        need = {"fill": m.available_size(), "over": m.available_size() + 1, "one": 1}.get(
            kind, data.integer(1, 4))
        out = self._alloc(need)
        self.ex.note("short" if out is None else "arrive")
        if out and m.available_size() == 0:
            self.ex.note("fill")

    @action(lambda self: self.rows, rank=0)
    def finish(self, data: Draws) -> None:
        """One or two batches free their slots, as handed out or reordered."""
        slots = self.rows.pop(data.integer(0, len(self.rows) - 1))
        if self.rows and data.boolean():
            slots = slots + self.rows.pop(data.integer(0, len(self.rows) - 1))
        if len(slots) > 1 and data.boolean():
            slots = slots[::-1] if data.boolean() else slots[1:] + slots[:1]
            self.ex.note("finish.shuffled")
        if self.group_open:
            self.ex.note("group.free_inside")
        self.ex.call("free", slots=slots)
        self.ex.note("finish")

    @action(lambda self: self.caps.groups and not self.group_open, rank=0)
    def begin(self, data: Draws) -> None:
        """``alloc_group_begin(n)``: a few requests, none, or more than are free."""
        m = self.ex.model
        assert m is not None
        kind = data.choice(["some", "some", "some", "zero", "over"])
        n = {"zero": 0, "over": m.available_size() + 1}.get(kind, data.integer(1, 5))
        self.ex.call("alloc_group_begin", num_reqs=n)
        self.group_open = True
        self.ex.note("group.begin" if m.group else "group.short" if n else "group.begin")
        if m.group:
            self.ex.note("available.group")

    @action(lambda self: self.group_open)
    def draw(self, data: Draws) -> None:
        """Requests matched one at a time: 1-3 ``alloc(1)``."""
        for _ in range(data.integer(1, 3)):
            out = self._alloc(1)
            if out is None:
                self.ex.note("short")

    @action(lambda self: self.group_open)
    def end(self, data: Draws) -> None:
        """``alloc_group_end()``: the undrawn slots go back."""
        m = self.ex.model
        assert m is not None
        self.ex.note("group.end_rest" if m.group else "group.end_empty")
        self.ex.call("alloc_group_end")
        self.group_open = False

    @action(lambda self: self.caps.clear and (not self.group_open or self.caps.clear_in_group),
            rank=2)
    def clear(self, data: Draws) -> None:
        """``clear()``: every slot free (and an open group closed)."""
        m = self.ex.model
        assert m is not None
        if self.group_open and m.group:
            self.ex.note("life.clear_group")
        self.ex.call("clear")
        self.rows, self.group_open = [], False

    @action(lambda self: self.caps.checks("free"), rank=2)
    def bad_free(self, data: Draws) -> None:
        """A free of a slot not held: already free, slot 0, past the end, named twice, or
        pre-allocated to the open group."""
        m = self.ex.model
        assert m is not None
        kinds = ["group_slot"] if m.group else []
        kinds += ["slot_zero", "out_of_range"]
        kinds += ["double_free"] if m.free_slots else []
        kinds += ["twice_in_call"] if self.rows else []
        kind = data.choice(kinds)
        slots = {"slot_zero": [0], "out_of_range": [m.size + 1 + data.integer(0, 2)],
                 "double_free": [data.choice(m.free_slots or [0])],
                 "group_slot": [data.choice(m.group or [0])]}.get(kind)
        if slots is None:
            row = self.rows[data.integer(0, len(self.rows) - 1)]
            slots = [*row, row[data.integer(0, len(row) - 1)]]
        self.ex.note(f"bad.{kind}")
        self.ex.call_bad("free", slots=slots)

    @action(lambda self: self.caps.checks("alloc") or self.caps.checks("alloc_group_begin"),
            rank=2)
    def bad_count(self, data: Draws) -> None:
        """A negative count to ``alloc`` or ``alloc_group_begin``, or a nested group."""
        kinds = ["negative_alloc"] if self.caps.checks("alloc") else []
        if self.caps.groups and self.caps.checks("alloc_group_begin"):
            kinds += ["nested_group"] if self.group_open else ["negative_group"]
        if not kinds:
            return
        kind = data.choice(kinds)
        self.ex.note(f"bad.{kind}")
        if kind == "negative_alloc":
            self.ex.call_bad("alloc", need_size=-data.integer(1, 3))
        else:
            n = data.integer(1, 3) if kind == "nested_group" else -data.integer(1, 3)
            self.ex.call_bad("alloc_group_begin", num_reqs=n)

    def teardown(self) -> None:
        """End an open group, free every row (the pool must be whole again); record the
        example."""
        try:
            m = self.ex.model
            if m is not None and not self.ex.failed:
                if self.group_open:
                    self.ex.call("alloc_group_end")
                for row in self.rows:
                    self.ex.call("free", slots=row)
                assert m.available_size() == m.size
        finally:
            record_example(type(self), self.ex, sys.exc_info()[1])


def mamba_slot_machine_for(target: Target, config: Config) -> type[MambaSlotMachine]:
    """A machine class bound to one mamba-slot configuration."""
    return bind(MambaSlotMachine, f"MambaSlot_ps{config.page_size}", target, config)


FAMILY = Family("mamba_slot", MambaSlotExecutor, mamba_slot_machine_for, MAMBA_SLOT,
                MambaSlotCapabilities, "kvpool_mamba_slot_capabilities")
