"""The toy family's scheduler model: requests take slots, finish (freeing them, maybe in
another order), the pool is cleared now and then, and (checked targets) a free names a slot
not held. Declares the family's ``FAMILY``."""

from __future__ import annotations

import sys

from kvpool.oracle.engine.draws import Draws
from kvpool.oracle.engine.examples import record_example
from kvpool.oracle.engine.families import Family
from kvpool.oracle.engine.machines import FamilyMachine, bind
from kvpool.oracle.engine.steps import ActionMachine, action
from kvpool.oracle.engine.target import Config, Target

from .coverage import TOY
from .executor import ToyExecutor
from .targets import ToyCapabilities


class ToyMachine(FamilyMachine, ActionMachine):
    """Scheduler model over one toy configuration (bound by :func:`toy_machine_for`); each
    row is one request's slots."""

    executor_class = ToyExecutor
    ex: ToyExecutor
    caps: ToyCapabilities
    rows: list[list[int]]

    def __init__(self) -> None:
        super().__init__()
        self.ready = False

    def start(self, data: Draws) -> None:
        """A fresh pool of 1-12 slots."""
        self.ex.create(data.integer(1, 12))
        self.ready = True

    @action()
    def arrive(self, data: Draws) -> None:
        """A request of 1-4 slots, or of every free slot (``fill``), or one more (``short``)."""
        m = self.ex.model
        assert m is not None
        kind = data.choice(["some", "some", "fill", "over"])
        need = {"fill": m.available_size(), "over": m.available_size() + 1}.get(
            kind, data.integer(1, 4))
        out = self.ex.call("alloc", need_size=need)
        self.ex.note("short" if out is None else "arrive")
        if out is not None:
            if out and m.available_size() == 0:
                self.ex.note("fill")
            self.rows.append(out)

    @action(lambda self: self.rows, rank=0)
    def finish(self, data: Draws) -> None:
        """A request frees its slots, reversed (mostly) or as handed out."""
        row = self.rows.pop(data.integer(0, len(self.rows) - 1))
        if len(row) > 1 and not data.boolean():
            row = row[::-1]
            self.ex.note("finish.shuffled")
        self.ex.call("free", slots=row)
        self.ex.note("finish")

    @action(lambda self: self.caps.clear, rank=2)
    def clear(self, data: Draws) -> None:
        self.ex.call("clear")
        self.rows = []

    @action(lambda self: self.caps.checks("free"), rank=2)
    def bad_free(self, data: Draws) -> None:
        """A free of a slot already free (``double_free``) or out of range (``never_held``)."""
        m = self.ex.model
        assert m is not None
        if m.free_slots and data.boolean():
            self.ex.note("bad.double_free")
            self.ex.call_bad("free", slots=[data.choice(m.free_slots)])
        else:
            self.ex.note("bad.never_held")
            self.ex.call_bad("free", slots=[m.size + data.integer(0, 2)])

    def teardown(self) -> None:
        """Free every request (the pool must be whole again); record the example."""
        try:
            if self.ex.model is not None and not self.ex.failed:
                for row in self.rows:
                    self.ex.call("free", slots=row)
                assert self.ex.model.available_size() == self.ex.model.size
        finally:
            record_example(type(self), self.ex, sys.exc_info()[1])


def toy_machine_for(target: Target, config: Config) -> type[ToyMachine]:
    """A machine class bound to one toy configuration."""
    return bind(ToyMachine, f"Toy_ps{config.page_size}", target, config)


FAMILY = Family("toy", ToyExecutor, toy_machine_for, TOY, ToyCapabilities, "toy_capabilities")
