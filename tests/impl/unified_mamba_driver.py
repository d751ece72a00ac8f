"""Random call sequences for a unified full + Mamba composite, sent to several at once.

:class:`MambaDriver` keeps what a scheduler and a request pool would hold (each request's
virtual token ids, the live state slot ids), picks a random call the state allows, sends it to
every target (kvpool's ``UnifiedMambaAllocator``, SGLang's ``UnifiedMambaTokenToKVPoolAllocator``)
and returns the results as plain lists. The state end is driven as SGLang's request pool drives
it: ``mamba_allocator.alloc(1)`` / ``.free(slots)`` and ``prepare_mamba_allocation(n)``. Token
tensors go as int64, int32 or strided views at random; freed ids in a random order.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from unified_driver import as_list, form

Row = list[int]


@dataclass
class MambaDriver:
    """Drives ``targets`` (composites with SGLang's API) with one random sequence."""

    rng: random.Random
    page_size: int
    lazy: bool
    targets: list[Any]
    rows: list[Row] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)
    in_group: bool = False
    gate_open: list[bool] = field(default_factory=lambda: [True])
    gated: bool = False
    big: int = 12  # pages an alloc asks for at most
    decodes: bool = True  # alloc_decode among the calls

    def each(self, call: Callable[[Any], Any]) -> list[Any]:
        return [as_list(call(t)) for t in self.targets]

    pressure: bool = False  # mostly takes, frees of whole rows and slots; no idle flush

    def step(self) -> tuple[str, list[Any]]:
        """One random call; returns its name and every target's result."""
        if self.pressure:
            return self._pressure_step()
        choices = ["alloc", "alloc", "extend", "extend", "state_alloc", "state_alloc", "prepare",
                   "translate"]
        if self.decodes:
            choices.append("decode")
        if self.rows:
            choices += ["free", "free", "free", "tail", "segment"]
        if self.rows:
            choices.append("group")
        if self.slots:
            choices += ["state_free", "state_free"]
        if self.lazy:
            choices += ["flush", "gate"]
        if self.in_group:
            choices += ["deferred"]
        if self.rng.random() < 0.02:
            choices.append("clear")
        name = self.rng.choice(choices)
        return name, getattr(self, "do_" + name)()

    def _pressure_step(self) -> tuple[str, list[Any]]:
        """Takes past the views (full's and the state end's), interleaved with frees that
        leave holes on both ends: every shortfall then runs relief."""
        choices = ["alloc", "alloc", "alloc", "extend", "state_alloc", "state_alloc",
                   "state_alloc", "prepare"]
        if self.rows:
            choices += ["free", "free", "tail"]
        if self.slots:
            choices += ["state_free", "state_free"]
        if self.lazy and self.rng.random() < 0.05:
            choices.append("gate")
        name = self.rng.choice(choices)
        return name, getattr(self, "do_" + name)()

    # -- allocations --

    def do_alloc(self) -> list[Any]:
        need = self.rng.randrange(0, self.big + 1) * self.page_size
        out = self.each(lambda t: t.alloc(need))
        if out[0] is not None and out[0]:
            self.rows.append(out[0])
        return out

    def do_extend(self) -> list[Any]:
        rng, ps = self.rng, self.page_size
        picks = list(dict.fromkeys(rng.randrange(-1, len(self.rows))
                                   for _ in range(rng.randrange(1, 4))))
        rows = [self.rows[i] if i >= 0 else [] for i in picks]
        prefix = [len(r) for r in rows]
        seq = [p + rng.randrange(0, 3 * ps + 2) for p in prefix]
        last = [r[-1] if r else -1 for r in rows]
        num = sum(seq) - sum(prefix)
        out = self.each(lambda t: t.alloc_extend(
            torch.tensor(prefix), torch.tensor(prefix), torch.tensor(seq), torch.tensor(seq),
            form(last, rng), num))
        if out[0] is not None:
            self._grow(picks, [s - p for p, s in zip(prefix, seq)], out[0])
        return out

    def _grow(self, picks: list[int], counts: list[int], tokens: list[int]) -> None:
        at = 0
        for i, n in zip(picks, counts):
            new, at = tokens[at:at + n], at + n
            if i >= 0:
                self.rows[i] = self.rows[i] + new
            elif new:
                self.rows.append(new)

    def do_decode(self) -> list[Any]:
        live = [i for i, r in enumerate(self.rows) if r]
        picks = self.rng.sample(live, min(len(live), self.rng.randrange(1, 6)))
        if not picks:
            return self.do_translate()
        seq = [len(self.rows[i]) + 1 for i in picks]
        last = [self.rows[i][-1] for i in picks]
        out = self.each(lambda t: t.alloc_decode(torch.tensor(seq), torch.tensor(seq),
                                                 form(last, self.rng)))
        if out[0] is not None:
            self._grow(picks, [1] * len(picks), out[0])
        return out

    # -- token releases --

    def _shuffled(self, ids: list[int]) -> list[int]:
        ids = list(ids)
        self.rng.shuffle(ids)
        return ids

    def do_free(self) -> list[Any]:
        row = self.rows.pop(self.rng.randrange(len(self.rows)))
        ids = self._shuffled(row)
        return self.each(lambda t: t.free(form(ids, self.rng)))

    def do_tail(self) -> list[Any]:
        """Free a row's last pages (cut at a page boundary), the row keeps the rest."""
        i = self.rng.randrange(len(self.rows))
        row, ps = self.rows[i], self.page_size
        cut = self.rng.randrange(0, (len(row) - 1) // ps + 1) * ps
        self.rows[i], tail = row[:cut], self._shuffled(row[cut:])
        if not self.rows[i]:
            self.rows.pop(i)
        return self.each(lambda t: t.free(form(tail, self.rng)))

    def do_segment(self) -> list[Any]:
        row = self.rows.pop(self.rng.randrange(len(self.rows)))
        return self.each(lambda t: t.free_segment(torch.tensor(row), start_pos=0))

    def do_group(self) -> list[Any]:
        name = "free_group_end" if self.in_group else "free_group_begin"
        self.in_group = not self.in_group
        return self.each(lambda t: getattr(t, name)())

    def do_deferred(self) -> list[Any]:
        return self.each(lambda t: t.flush_deferred_full_frees())

    # -- the state end --

    def do_state_alloc(self) -> list[Any]:
        count = self.rng.choice([1, 1, 1, 2, 3])
        out = self.each(lambda t: t.mamba_allocator.alloc(count))
        if out[0] is not None:
            self.slots += out[0]
        return out

    def do_state_free(self) -> list[Any]:
        picked = self.rng.sample(self.slots, self.rng.randrange(1, min(3, len(self.slots)) + 1))
        self.slots = [s for s in self.slots if s not in picked]
        return self.each(lambda t: t.mamba_allocator.free(torch.tensor(picked)))

    def do_prepare(self) -> list[Any]:
        count = self.rng.randrange(1, 6)
        return self.each(lambda t: t.prepare_mamba_allocation(count))

    # -- hooks --

    def do_flush(self) -> list[Any]:
        return self.each(lambda t: t.flush_opportunistic())

    def do_gate(self) -> list[Any]:
        """Install a move gate once (lazy), then flip it."""
        if not self.gated:
            self.gated = True
            flag = self.gate_open
            return self.each(lambda t: t.set_disagg_move_gate(lambda: flag[0]))
        self.gate_open[0] = not self.gate_open[0]
        return [None] * len(self.targets)

    def do_translate(self) -> list[Any]:
        ids = self.live_ids()
        if not ids:
            return [[]] * len(self.targets)
        sample = self.rng.sample(ids, min(len(ids), 16))
        return self.each(lambda t: t.translate_kv_loc(form(sample, self.rng)))

    def do_clear(self) -> list[Any]:
        self.rows.clear()
        self.slots.clear()
        self.in_group = False
        return self.each(lambda t: t.clear())

    def live_ids(self) -> list[int]:
        """Every token id a request holds."""
        return [t for row in self.rows for t in row]
