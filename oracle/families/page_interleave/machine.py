"""The page-interleave scheduler model: a prefill node's batches open new chains (rotation
base drawn by the allocator, or named by the caller as a HiCache copy does), extend chains
from their phase, place chains with ``alloc_cyclic``; requests finish (their slots freed, in
any order, some slots of a page or all) or drop their tail pages; frees are grouped; the pool is
merged (need_sort) and cleared now and then; (checked targets) a call breaks a caller rule.
Declares the family's ``FAMILY``."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from ...engine.draws import Draws
from ...engine.examples import record_example
from ...engine.families import Family
from ...engine.machines import FamilyMachine, bind
from ...engine.steps import ActionMachine, action
from ...engine.target import Config, Target
from .coverage import PAGE_INTERLEAVE
from .executor import PageInterleaveExecutor
from .targets import PageInterleaveCapabilities


@dataclass
class Chain:
    """One request's pages in position order, its rotation base and its slots."""

    base: int
    pages: list[int] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)


class PageInterleaveMachine(FamilyMachine, ActionMachine):
    """Scheduler model over one page-interleave configuration (bound by
    :func:`page_interleave_machine_for`); each row is one chain."""

    executor_class = PageInterleaveExecutor
    ex: PageInterleaveExecutor
    caps: PageInterleaveCapabilities
    rows: list[Chain]

    def __init__(self) -> None:
        super().__init__()
        self.ready = False
        self.group_open = False
        self.n = 2

    def start(self, data: Draws) -> None:
        """A fresh pool: one of the declared shard sizes, 1-6 pages per rank."""
        self.n = data.choice(list(self.caps.shard_sizes))
        self.ex.create(data.integer(1, 6) * self.ps + data.integer(0, self.ps - 1), self.n)
        self.ready = True

    def _record(self, bases: list[int], requests: list[list[int]], slots: list[int],
                chains: list[Chain | None]) -> None:
        at = 0
        for base, (prefix, seq), chain in zip(bases, requests, chains):
            part, at = slots[at:at + seq - prefix], at + seq - prefix
            if chain is None:
                chain = Chain(base)
                self.rows.append(chain)
            chain.pages += list(dict.fromkeys(s // self.ps for s in part))
            chain.slots += part

    def _tokens(self, data: Draws) -> int:
        m = self.ex.model
        assert m is not None
        kind = data.choice(["some", "some", "some", "big", "over"])
        if kind == "over":
            return int((m.pages_per_rank * self.n + 1) * self.ps)
        top = 2 * self.n if kind == "some" else max(2 * self.n, m.pages_per_rank * self.n)
        return int(data.integer(1, top * self.ps))

    @action()
    def arrive(self, data: Draws) -> None:
        """A batch of 1-3 requests: new chains (most with the base left to the allocator),
        maybe an extension of a held chain among them."""
        requests, bases, chains = [], [], []
        for _ in range(data.integer(1, 3)):
            chain = None
            if self.rows and data.boolean(0.3):
                chain = self.rows[data.integer(0, len(self.rows) - 1)]
                if chain in chains:
                    chain = None
            prefix = len(chain.pages) * self.ps if chain is not None else 0
            base = chain.base if chain is not None else (
                data.integer(0, self.n - 1) if data.boolean(0.2) else None)
            requests.append([prefix, prefix + self._tokens(data)])
            bases.append(base)
            chains.append(chain)
        out = self.ex.call("alloc_extend", requests=requests, bases=bases)
        if out["slots"] is not None:
            self._record(out["bases"], requests, out["slots"], chains)

    @action(rank=2)
    def cyclic(self, data: Draws) -> None:
        """``alloc_cyclic(c, n)``: one chain at a fixed rotation (a HiCache copy)."""
        start, need = data.integer(0, self.n - 1), self._tokens(data)
        out = self.ex.call("alloc_cyclic", start_class=start, need_size=need)
        if out["slots"] is not None:
            self._record([start], [[0, need]], out["slots"], [None])

    @action(lambda self: self.rows, rank=0)
    def finish(self, data: Draws) -> None:
        """One or two chains freed: every slot, in order or reversed, or one slot per page."""
        chain = self.rows.pop(data.integer(0, len(self.rows) - 1))
        slots = list(chain.slots)
        if self.rows and data.boolean(0.3):
            slots += self.rows.pop(data.integer(0, len(self.rows) - 1)).slots
        kind = data.choice(["all", "reversed", "page_heads"])
        if kind == "reversed":
            slots.reverse()
        elif kind == "page_heads":
            slots = list({s // self.ps: s for s in slots}.values())
        self.ex.call("free", slots=slots)

    @action(lambda self: any(len(c.pages) > 1 for c in self.rows))
    def drop_tail(self, data: Draws) -> None:
        """A chain keeps its first pages and frees the rest (its next extension continues
        the phase from the pages kept)."""
        chain = data.choice([c for c in self.rows if len(c.pages) > 1])
        keep = data.integer(1, len(chain.pages) - 1)
        dropped = set(chain.pages[keep:])
        slots = [s for s in chain.slots if s // self.ps in dropped]
        chain.pages = chain.pages[:keep]
        chain.slots = [s for s in chain.slots if s // self.ps not in dropped]
        self.ex.call("free", slots=slots)
        self.ex.note("free.tail")

    @action(lambda self: self.caps.groups and not self.group_open, rank=2)
    def begin(self, data: Draws) -> None:
        """``free_group_begin()``."""
        self.ex.call("free_group_begin")
        self.group_open = True

    @action(lambda self: self.group_open)
    def end(self, data: Draws) -> None:
        """``free_group_end()``: the group's pages freed as one free."""
        self.ex.call("free_group_end")
        self.group_open = False

    @action(lambda self: self.caps.merge, rank=2)
    def merge(self, data: Draws) -> None:
        """``merge_and_sort_free()``."""
        self.ex.call("merge_and_sort_free")

    @action(lambda self: self.caps.clear, rank=2)
    def clear(self, data: Draws) -> None:
        """``clear()``: every page free, an open group dropped."""
        self.ex.call("clear")
        self.rows, self.group_open = [], False

    @action(lambda self: self.caps.checks("free"), rank=2)
    def bad_free(self, data: Draws) -> None:
        """A free of a page not held: free already, reserved, past the pool, or freed in the
        open group."""
        m = self.ex.model
        assert m is not None
        kinds = ["reserved_page", "out_of_range"]
        kinds += ["double_free"] if m.all_free_pages() else []
        kinds += ["group_twice"] * 3 if m.pending or (self.group_open and self.rows) else []
        kind = data.choice(kinds)
        if kind == "group_twice" and not m.pending:  # free a chain inside the group first
            self.ex.call("free", slots=self.rows.pop(data.integer(0, len(self.rows) - 1)).slots)
        page = {"reserved_page": data.integer(0, self.n - 1),
                "out_of_range": (m.pages_per_rank + 1) * self.n + data.integer(0, 2),
                "double_free": data.choice(m.all_free_pages() or [0]),
                "group_twice": data.choice(sorted(m.pending or {0}))}[kind]
        self.ex.call_bad("free", slots=[page * self.ps])
        self.ex.note(f"bad.{kind}")

    @action(lambda self: self.caps.checks("alloc_extend") or (
        self.group_open and self.caps.checks("free_group_begin")), rank=2)
    def bad_call(self, data: Draws) -> None:
        """An extension from a prefix that is not page-aligned or that opens no page, or a
        nested free group."""
        kinds = ["no_new_page"] if self.caps.checks("alloc_extend") else []
        kinds += ["unaligned_prefix"] if self.ps > 1 and kinds else []
        kinds += ["nested_group"] if self.group_open and self.caps.checks(
            "free_group_begin") else []
        kind = data.choice(kinds)
        if kind == "nested_group":
            self.ex.call_bad("free_group_begin")
        else:
            prefix = self.ps * data.integer(0, 2) + (1 if kind == "unaligned_prefix" else 0)
            seq = prefix + self.ps if kind == "unaligned_prefix" else prefix
            self.ex.call_bad("alloc_extend", requests=[[prefix, seq]], bases=[None])
        self.ex.note(f"bad.{kind}")

    def teardown(self) -> None:
        """End an open group, free every chain (every page must be free again); record the
        example."""
        try:
            m = self.ex.model
            if m is not None and not self.ex.failed:
                if self.group_open:
                    self.ex.call("free_group_end")
                for chain in self.rows:
                    if chain.slots:
                        self.ex.call("free", slots=chain.slots)
                assert m.aggregate_free_size() == m.pages_per_rank * m.shard_size * self.ps
        finally:
            record_example(type(self), self.ex, sys.exc_info()[1])


def page_interleave_machine_for(target: Target, config: Config) -> type[PageInterleaveMachine]:
    """A machine class bound to one page-interleave configuration."""
    return bind(PageInterleaveMachine, f"PageInterleave_ps{config.page_size}", target, config)


FAMILY = Family("page_interleave", PageInterleaveExecutor, page_interleave_machine_for,
                PAGE_INTERLEAVE, PageInterleaveCapabilities,
                "kvpool_page_interleave_capabilities")
