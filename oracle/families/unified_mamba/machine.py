"""The unified full + Mamba scheduler model: the state machine that drives a composite.

A run builds a small buffer (8-30 full pages beside the builder's state slots; page sizes 1, 4
and 16), eager or lazy. Requests arrive (``alloc_extend`` from an empty prefix, or ``alloc`` of
whole pages; one time in three one request that takes all ``available_size()`` promises), grow
by chunks from their prefix, decode (``alloc_decode`` at page size > 1, ``alloc`` at 1) and
finish (``free`` in any order, ``free_segment``, or several inside a free group). Requests of a
hybrid Mamba model take state slots as SGLang's request pool does
(``prepare_mamba_allocation(n)`` then ``mamba_allocator.alloc(n)``, sometimes inside an open free
group) and release them. Under lazy compaction the idle-time ``flush_opportunistic()`` and the
move gate run between; translations and ``clear`` too, and (checked targets) caller errors:
a double free, an id named twice, a translation of a free id, a free of a free state slot.
Declares the family's ``FAMILY``.
"""

from __future__ import annotations

import sys

from ...engine.draws import Draws
from ...engine.examples import record_example
from ...engine.families import Family
from ...engine.machines import FamilyMachine, bind
from ...engine.steps import ActionMachine, action
from ...engine.target import Config, Target
from ..unified.batches import Row
from .coverage import UNIFIED_MAMBA
from .executor import UnifiedMambaExecutor
from .peer import ENTRY_BYTES, MAX_STATE_SLOTS, STATE_BYTES
from .targets import UnifiedMambaCapabilities


class UnifiedMambaMachine(FamilyMachine, ActionMachine):
    """Scheduler model over one unified full + Mamba configuration."""

    executor_class = UnifiedMambaExecutor
    ex: UnifiedMambaExecutor
    caps: UnifiedMambaCapabilities
    rows: list[Row]

    def __init__(self) -> None:
        super().__init__()
        self.ready = False
        self.slots: list[list[int]] = []  # state slots held, one list per allocation
        self.group_open = False

    def start(self, data: Draws) -> None:
        """A fresh buffer of 8-30 full pages (maybe half a token more) and the builder's state
        slots, eager or lazy (when the target has both modes)."""
        pages, ragged, lazy = data.integer(8, 30), data.boolean(), data.boolean()
        modes = self.caps.compaction
        lazy = lazy if len(modes) > 1 else modes[0] == "lazy"
        total = (pages * self.ps * ENTRY_BYTES + (ENTRY_BYTES // 2 if ragged else 0)
                 + MAX_STATE_SLOTS * STATE_BYTES)
        self.ex.create(total, lazy)
        self.ready = True

    def _append(self, out: list[int] | None, rows: list[Row], counts: list[int]) -> None:
        if out is None:
            return
        start = 0
        for row, n in zip(rows, counts):
            row.slots += out[start:start + n]
            start += n
            if row not in self.rows:
                self.rows.append(row)

    @action(rank=3)
    def new_requests(self, data: Draws) -> None:
        """New requests from an empty prefix (``fill``: one that takes available_size())."""
        m = self.ex.model
        assert m is not None
        fill, whole = data.choice([False, False, True]), data.boolean()
        most = m.available_size() if fill else 0
        seqs = [most] if most > 0 else [data.integer(1, 3 * self.ps + 1)
                                        for _ in range(data.integer(1, 3))]
        if most > 0:
            self.ex.note("fill")
        if whole or self.ps == 1:
            seqs = [-(-n // self.ps) * self.ps for n in seqs]
            out = self.ex.call("alloc", need_size=sum(seqs))
        else:
            out = self.ex.call("alloc_extend", prefix_lens=[0] * len(seqs), seq_lens=seqs,
                               last_loc=[-1] * len(seqs), extend_num_tokens=sum(seqs))
        self.ex.note("short" if out is None else "arrive")
        self._append(out, [Row([]) for _ in seqs], seqs)

    @action(lambda self: self.rows)
    def grow(self, data: Draws) -> None:
        """One or two rows extend by chunks of 0 to ``2 * ps + 1`` tokens from their prefix."""
        picks = list(self.rows)
        rows = [picks.pop(data.integer(0, len(picks) - 1))]
        if picks and data.boolean():
            rows.append(picks.pop(data.integer(0, len(picks) - 1)))
        chunks = [data.integer(0, 2 * self.ps + 1) for _ in rows]
        pre = [len(r.slots) for r in rows]
        out = self.ex.call("alloc_extend", prefix_lens=pre,
                           seq_lens=[p + c for p, c in zip(pre, chunks)],
                           last_loc=[r.slots[-1] for r in rows], extend_num_tokens=sum(chunks))
        self.ex.note("extend" if out is not None else "short")
        self._append(out, rows, chunks)

    @action(lambda self: self.rows)
    def decode_step(self, data: Draws) -> None:
        """Up to eight rows decode one token (``alloc`` at page size 1 without decode_ps1)."""
        rows = self.rows[:data.integer(1, 8)]
        if self.ps > 1 or self.caps.decode_ps1:
            out = self.ex.call("alloc_decode", seq_lens=[len(r.slots) + 1 for r in rows],
                               last_loc=[r.slots[-1] for r in rows])
            self.ex.note("decode" if out is not None else "short")
        else:
            out = self.ex.call("alloc", need_size=len(rows))
        self._append(out, rows, [1] * len(rows))

    def _finish_one(self, data: Draws) -> None:
        row = self.rows.pop(data.integer(0, len(self.rows) - 1))
        if self.ps > 1 and data.boolean(0.3):
            self.ex.call("free_segment", free_index=row.slots, start_pos=0)
            self.ex.note("finish.segment")
            return
        ids = row.slots if self.caps.free_any_order else sorted(row.slots)
        if self.caps.free_any_order and data.boolean():
            ids = ids[::-1]
            self.ex.note("finish.shuffled")
        self.ex.call("free", free_index=ids)
        self.ex.note("finish")
        if self.caps.checks("free") and not self.group_open and data.boolean(0.2):
            self.ex.note("bad.double_free")
            self.ex.call_bad("free", free_index=row.slots[:1])

    @action(lambda self: self.rows, rank=2)
    def finish(self, data: Draws) -> None:
        """A request finishes (its tokens in any order, or by ``free_segment``)."""
        self._finish_one(data)

    @action(lambda self: self.caps.groups and self.rows, rank=2)
    def finish_in_group(self, data: Draws) -> None:
        """One to three requests finish inside a free group; maybe state slots are taken while
        it is open (``prepare_mamba_allocation`` runs its frees first)."""
        self.ex.call("free_group_begin")
        self.group_open = True
        for _ in range(data.integer(1, min(3, len(self.rows)))):
            self._finish_one(data)
        if data.boolean():
            self._take_state(data)
            self.ex.note("group.flush")
        self.ex.call("free_group_end")
        self.group_open = False
        self.ex.note("group")

    def _take_state(self, data: Draws) -> None:
        m = self.ex.model
        assert m is not None
        count = data.choice([1, 1, 2, m.state_available_size() + 1])
        self.ex.call("prepare_mamba_allocation", count=count)
        self.ex.note("state.prepare")
        out = self.ex.call("alloc_state", count=count)
        if out:
            self.slots.append(out)

    @action()
    def state_slots(self, data: Draws) -> None:
        """Requests take state slots as SGLang's request pool does, or release theirs."""
        if self.slots and data.boolean():
            slots = self.slots.pop(data.integer(0, len(self.slots) - 1))
            self.ex.call("free_state", slots=slots)
            self.ex.note("state.free")
            if self.caps.checks("free_state") and data.boolean(0.3):
                self.ex.note("bad.state_double_free")
                self.ex.call_bad("free_state", slots=slots[:1])
            return
        self._take_state(data)

    @action(lambda self: self.ex.model is not None and self.ex.model.lazy)
    def idle(self, data: Draws) -> None:
        """The scheduler is idle: ``flush_opportunistic()`` (maybe just after the oldest request
        finished, leaving holes away from the frontier for it to fill), or the move gate opens
        or closes."""
        if data.boolean():
            allow = data.boolean()
            self.ex.call("set_disagg_move_gate", allow=allow)
            self.ex.note("gate-open" if allow else "gate-closed")
            return
        m = self.ex.model
        if m is not None and m.moves_blocked and data.boolean():  # the transfer ended
            self.ex.call("set_disagg_move_gate", allow=True)
            self.ex.note("gate-open")
        if data.boolean():  # the oldest request finishes first: its pages are the ones
            while len(self.rows) < 2:  # farthest from full's frontier (two rows at least)
                out = self.ex.call("alloc", need_size=self.ps)
                if out is None:
                    break
                self.rows.append(Row(out))
            if len(self.rows) > 1:
                row = self.rows.pop(0)
                self.ex.call("free", free_index=sorted(row.slots))
                self.ex.note("finish")
        self.ex.call("flush_opportunistic")
        self.ex.note("flush-idle")

    @action(lambda self: self.rows, rank=2)
    def translate(self, data: Draws) -> None:
        """One to four tokens of a row translated for a transfer; (checked) or a free page's."""
        m = self.ex.model
        assert m is not None
        if self.caps.checks("translate_kv_indices_for_transfer") and m.free_virtual \
                and data.boolean(0.2):
            self.ex.note("bad.translate_freed")
            self.ex.call_bad("translate_kv_indices_for_transfer",
                             kv_indices=[data.choice(list(m.free_virtual)) * self.ps])
            return
        row = data.choice(self.rows)
        picks = [data.choice(row.slots) for _ in range(data.integer(1, 4))]
        self.ex.call("translate_kv_indices_for_transfer", kv_indices=picks)

    @action(lambda self: self.caps.checks("free") and self.rows and self.ps == 1, rank=2)
    def bad_twice(self, data: Draws) -> None:
        """A free that names a live token twice (``UMB-8``; page size 1, where a token is a
        page)."""
        row = data.choice(self.rows)
        self.ex.note("bad.twice_in_call")
        self.ex.call_bad("free", free_index=[*row.slots, row.slots[0]])

    @action(lambda self: self.caps.clear, rank=3)
    def clear(self, data: Draws) -> None:
        """``clear()`` (one time in four drawn): both ends empty again."""
        if data.integer(0, 3) == 3:
            self.ex.call("clear")
            self.rows, self.slots = [], []

    def teardown(self) -> None:
        """Release every row and state slot (the model must be back to empty); record the
        example. Nothing is released after a failure or inside a group."""
        try:
            m = self.ex.model
            if m is not None and not self.ex.failed and not self.group_open:
                for row in self.rows:
                    self.ex.call("free", free_index=row.slots)
                for slots in self.slots:
                    self.ex.call("free_state", slots=slots)
                assert not m.full.v2p and not m.state.v2p
        finally:
            record_example(type(self), self.ex, sys.exc_info()[1])


def unified_mamba_machine_for(target: Target, config: Config) -> type[UnifiedMambaMachine]:
    """A machine class bound to one unified full + Mamba configuration."""
    return bind(UnifiedMambaMachine, f"UnifiedMamba_ps{config.page_size}", target, config)


FAMILY = Family("unified_mamba", UnifiedMambaExecutor, unified_mamba_machine_for, UNIFIED_MAMBA,
                UnifiedMambaCapabilities, "kvpool_unified_mamba_capabilities")
