"""The unified scheduler model: the state machine that drives a unified full + SWA target.

A run builds a small buffer (a few dozen pages a side, so shortages and compaction happen),
eager or lazy. Requests arrive (``alloc_extend`` from an empty prefix, or ``alloc`` of whole
pages), grow by chunks from their prefix, decode (``alloc_decode``; at page size 1 without
``decode_ps1``: ``alloc``), and their window slides: ``free_swa`` of the whole pages before the
window (never the last page, which the next token continues); a decode node's request may
arrive with SWA pages for its window tail only (``alloc_extend_swa_tail``). A request finishes
by ``free``, or
by ``free_full`` of its released head and ``free`` of the rest, or stays in the prefix cache
(``cached``) that the capacity hook ``evict_to_free_tokens`` is handed (:mod:`.cache`) and may
evict from, or the decode gate ``check_decode_capacity`` after it (``UNI-15``). Translations,
the capacity hook, ``clear``, the idle-time ``flush_opportunistic`` (lazy) and (checked
targets) bad input run between; on a tri-pool, requests' state slots on its mamba end come and
go, and a prealloc may be sized so that only the SWA float's holes make it fit. A free group
ends two or three requests by plain frees, or one to three by any form. A decode batch may be
made to fit and mix rows (:mod:`.batches`): its first row continues its page, the others are
extended to open one each. Each row remembers ``front``: its positions below it have no SWA
page.

Each step is ``start`` or one action (:mod:`kvpool.oracle.engine.steps`). An action's rank is
the number of parameters it draws (``data`` counted as one), so the actions that change least
come first, as Hypothesis orders rules by their arguments.
"""

from __future__ import annotations

import sys

from ...engine.draws import Draws
from ...engine.examples import record_example
from ...engine.families import Family
from ...engine.machines import FamilyMachine, bind
from ...engine.steps import ActionMachine, action
from ...engine.target import Config, Target
from .batches import Row, compacted_capacity, fitting_batch, float_hole_fit
from .calls import Group
from .coverage import UNIFIED
from .executor import UnifiedExecutor
from .targets import UnifiedCapabilities


class UnifiedMachine(FamilyMachine, ActionMachine):
    """Scheduler model over one unified configuration (bound by ``unified_machine_for``)."""

    executor_class = UnifiedExecutor
    ex: UnifiedExecutor
    caps: UnifiedCapabilities
    rows: list[Row]
    cached: list[Row]  # finished rows the prefix cache holds (oldest first)

    def __init__(self) -> None:
        super().__init__()
        self.cached = []
        self.ready = False

    def start(self, data: Draws) -> None:
        """A fresh buffer of 8-30 pages a side (maybe half an entry more; paged, one time in
        four twice that: room for decode batches of several rows), eager or lazy (when the
        target has both modes)."""
        pages, ragged, lazy = data.integer(8, 30), data.boolean(), data.boolean()
        pages *= 2 if self.ps > 1 and data.boolean(0.25) else 1
        modes = self.caps.compaction
        lazy = lazy if len(modes) > 1 else modes[0] == "lazy"
        entry = self.caps.entry_bytes[0]
        self.ex.create(pages * self.ps * entry + (entry // 2 if ragged else 0), lazy)
        self.ready = True

    # -- growth --------------------------------------------------------------------------------
    @action(rank=3)
    def new_requests(self, data: Draws) -> None:
        """New requests from an empty prefix; ``fill`` (one time in three): one request that
        takes everything ``available_size()`` promises, or all that fits once compacted;
        ``whole``: ``alloc`` of whole pages."""
        fill, whole = data.choice([False, False, True]), data.boolean()
        m = self.ex.model
        assert m is not None
        most = 0
        if fill:  # the compacted capacity is computed only when drawn (a loop over the pages)
            most = compacted_capacity(m) if data.boolean() else m.available_size()
        if most > 0:
            seqs = [most]
            self.ex.note("fill")
        else:
            seqs = [data.integer(1, 3 * self.ps + 1) for _ in range(data.integer(1, 3))]
        if whole or self.ps == 1:
            seqs = [-(-n // self.ps) * self.ps for n in seqs]
            out = self.ex.call("alloc", need_size=sum(seqs))
        else:
            out = self.ex.call("alloc_extend", prefix_lens=[0] * len(seqs), seq_lens=seqs,
                               last_loc=[-1] * len(seqs), extend_num_tokens=sum(seqs))
        self.ex.note("short" if out is None else "arrive")
        self._append(out, [Row([]) for _ in seqs], seqs)

    @action(lambda self: self.ex.model is not None and self.ex.model.lazy)
    def move_gate(self, data: Draws) -> None:
        """A transfer holds resolved device rows (PD disaggregation): the move gate closes,
        and no page may move until it opens again (``set_disagg_move_gate``, lazy only)."""
        allow = data.boolean()
        self.ex.call("set_disagg_move_gate", allow=allow)
        self.ex.note("gate-open" if allow else "gate-closed")

    @action(lambda self: self.ex.model is not None and self.ex.model.lazy
            and self.caps.capacity_exact)
    def idle_flush(self, data: Draws) -> None:
        """The scheduler is idle: ``flush_opportunistic()``, the non-urgent compaction of both
        sides (``UNI-6``; lazy, on the exact model); ``finished``: a request (the oldest, as
        drawn first) finishes by ``free`` just before, leaving holes away from the frontiers
        (its pages are the ends' oldest), so the flush has pages to move."""
        if self.rows and data.boolean() and Group.of(self.ex.model) is None:
            self.finish(data, split=False, backwards=False, segments=False)
        self.ex.call("flush_opportunistic")
        self.ex.note("flush-idle")

    @action(lambda self: self.caps.float_chain)
    def state_slots(self, data: Draws) -> None:
        """Requests of a hybrid mamba model hold 0-3 state slots on the tri-pool's mamba end
        (its request pool takes one per request; ``UNI-14``)."""
        self.ex.call("state_slots", count=data.integer(0, 3))
        self.ex.note("state-slots")

    @action()
    def prealloc_tail(self, data: Draws) -> None:
        """A decode node's prealloc: one request's KV for its whole prompt on the full side, on
        the SWA side for its window tail only (``alloc_extend_swa_tail``); its ``front`` is
        the first page with an SWA page (past its last page when the tail is empty)."""
        seq = data.integer(1, 3 * self.ps + 1)
        tail = data.integer(0, seq)
        holes = False  # sized so that the SWA float's holes must be credited (tri-pool)
        if self.caps.float_chain and data.boolean():
            seq, tail, holes = float_hole_fit(self.ex.target, self.ex.model, seq, tail)
        out = self.ex.call("alloc_extend_swa_tail", prefix_lens=[0], seq_lens=[seq],
                           last_loc=[-1], extend_num_tokens=seq, swa_tail_len=tail)
        self.ex.note("short" if out is None else "prealloc-float-holes" if holes
                     else "prealloc-tail")
        if out is not None:
            front = (seq - tail) // self.ps if tail else -(-seq // self.ps)
            self.rows.append(Row(out, front * self.ps))

    def _append(self, out: list[int] | None, rows: list[Row], counts: list[int]) -> None:
        """Give each of ``rows`` its next ``counts`` tokens of ``out`` (None: nothing) and keep
        the new ones among the live rows."""
        if out is None:
            return
        start = 0
        for row, n in zip(rows, counts):
            row.slots += out[start:start + n]
            start += n
            if row not in self.rows:
                self.rows.append(row)

    @action(lambda self: self.rows)
    def grow(self, data: Draws) -> None:
        """One to three distinct rows extend by chunks of 0 to ``2 * ps + 1`` tokens from their
        prefix (``align``: each to the end of its last page)."""
        picks = list(self.rows)
        rows = [picks.pop(data.integer(0, len(picks) - 1))]
        while picks and len(rows) < 3 and data.boolean():
            rows.append(picks.pop(data.integer(0, len(picks) - 1)))
        align = data.boolean()  # each row to its page's end: its next decode opens a page
        chunks = [(-len(r.slots)) % self.ps if align else data.integer(0, 2 * self.ps + 1)
                  for r in rows]
        pre = [len(r.slots) for r in rows]
        out = self.ex.call("alloc_extend", prefix_lens=pre,
                           seq_lens=[p + c for p, c in zip(pre, chunks)],
                           last_loc=[r.slots[-1] for r in rows], extend_num_tokens=sum(chunks))
        self.ex.note("extend" if out is not None else "short")
        self._append(out, rows, chunks)

    @action(lambda self: self.rows)
    def decode_step(self, data: Draws) -> None:
        """Up to eight rows decode one token; then, sometimes, their windows slide. ``fit``
        (paged): all rows but the first are first extended to their pages' ends (when the
        first does not open a page), and rows that would open a page are left out, last first,
        until the pages the batch opens fit: a batch that mixes opening and continuing rows,
        granted."""
        rows = self.rows[:8]
        fit = data.boolean()
        if fit and self.ps > 1:
            rows = self._mixed_batch(rows)
        if self.ps > 1 or self.caps.decode_ps1:
            if fit and self.ps > 1:
                rows = fitting_batch(self.ex.model, rows, self.ps)
            out = self.ex.call("alloc_decode", seq_lens=[len(r.slots) + 1 for r in rows],
                               last_loc=[r.slots[-1] for r in rows])
            self.ex.note("decode" if out is not None else "short")
            opening = sum(len(r.slots) % self.ps == 0 for r in rows)
            if out is not None and self.ps > 1 and 1 < opening < len(rows):
                self.ex.note("decode-mixed")
        else:
            out = self.ex.call("alloc", need_size=len(rows))
        self._append(out, rows, [1] * len(rows))
        if out is not None and data.boolean():
            window = data.integer(1, 2 * self.ps)
            for row in rows:
                self._slide_to(row, len(row.slots) - window)

    def _mixed_batch(self, rows: list[Row]) -> list[Row]:
        """A decode batch whose first row continues its page and whose others (at least two
        where the pool holds them) open one: one-token requests arrive while there are fewer
        than three rows, the first row that continues its page leads, the others are extended
        to their pages' ends (:meth:`_align`)."""
        m = self.ex.model
        assert m is not None
        short = 3 - len(rows)
        if short > 0 and m.fits(short, compacted=False):
            out = self.ex.call("alloc_extend", prefix_lens=[0] * short, seq_lens=[1] * short,
                               last_loc=[-1] * short, extend_num_tokens=short)
            self._append(out, [Row([]) for _ in range(short)], [1] * short)
            rows = self.rows[:8]
        lead = next((r for r in rows if len(r.slots) % self.ps), None)
        if lead is None or len(rows) < 3:
            return rows
        rest = [r for r in rows if r is not lead]
        self._align(rest)
        return [lead, *rest]

    def _align(self, rows: list[Row]) -> None:
        """Extend ``rows`` to the end of their last pages (no new page), so that their next
        decode opens one each."""
        chunks = [(-len(r.slots)) % self.ps for r in rows]
        if not any(chunks):
            return
        pre = [len(r.slots) for r in rows]
        out = self.ex.call("alloc_extend", prefix_lens=pre,
                           seq_lens=[p + c for p, c in zip(pre, chunks)],
                           last_loc=[r.slots[-1] for r in rows], extend_num_tokens=sum(chunks))
        self.ex.note("extend" if out is not None else "short")
        self._append(out, rows, chunks)

    # -- window slides and release ---------------------------------------------------------------
    @action(lambda self: self.rows, rank=2)
    def slide(self, data: Draws) -> None:
        """The window of a row slides by up to ``2 * ps`` tokens short of its end (``segment``:
        by ``free_swa_segment``)."""
        segment = data.boolean()
        row = data.choice(self.rows)
        self._slide_to(row, len(row.slots) - data.integer(0, 2 * self.ps), segment)

    def _slide_to(self, row: Row, end: int, segment: bool = False) -> None:
        """Release the SWA pages of positions ``[front, end)``, down to a page boundary and
        short of the last page (``segment``: by ``free_swa_segment``)."""
        last_page = (len(row.slots) - 1) // self.ps * self.ps
        end = min(end // self.ps * self.ps, last_page)
        if end <= row.front:
            return
        part = row.slots[row.front:end]
        if segment:
            self.ex.call("free_swa_segment", free_index=part, start_pos=row.front)
        else:
            self.ex.call("free_swa", free_index=part)
        self.ex.note("slide-segment" if segment else "slide")
        row.front = end

    @action(lambda self: self.rows, rank=4)
    def finish(
        self,
        data: Draws,
        split: bool | None = None,
        backwards: bool | None = None,
        segments: bool | None = None,
    ) -> None:
        """A request finishes; ``split``: by ``free_full`` of its released head (its window
        slides first if none is) and ``free`` of the rest; ``backwards``: its tokens passed
        last position first (a cache frees in any order; without ``free_any_order`` they are
        passed ascending), then maybe a waiting request takes its place; ``segments``: by
        ``free_full_segment`` of its released head and ``free_segment`` of the rest. Each is
        drawn when not given."""
        split = data.boolean() if split is None else split
        backwards = data.boolean() if backwards is None else backwards
        segments = data.boolean() if segments is None else segments
        row = self.rows.pop(data.integer(0, len(self.rows) - 1))
        if segments:
            if row.front:
                self.ex.call("free_full_segment", free_index=row.slots[:row.front], start_pos=0)
            self.ex.call("free_segment", free_index=row.slots[row.front:], start_pos=row.front)
            self.ex.note("finish-segments")
            return
        if split and not row.front:  # its window slides first: the head has no SWA page
            self._slide_to(row, len(row.slots) - self.ps)
        head, tail = row.slots[:row.front], row.slots[row.front:]
        if not split or not row.front:
            head, tail = [], row.slots
        if not self.caps.free_any_order:
            head, tail = sorted(head), sorted(tail)
        elif backwards:
            head, tail = head[::-1], tail[::-1]
        if head:
            self.ex.call("free_full", free_index=head)
        self.ex.call("free", free_index=tail)
        self.ex.note("finish-full" if head else "finish-free")
        if backwards and data.boolean():  # a waiting request takes its place
            need = -(-len(row.slots) // self.ps) * self.ps
            self._append(self.ex.call("alloc", need_size=need), [Row([])], [need])
        in_group = Group.of(self.ex.model) is not None  # its frees are queued, not done yet
        if bool(self.caps.error_types) and not in_group and data.boolean():
            self._bad("double_free", "free", free_index=row.slots[:self.ps])

    @action(lambda self: self.caps.groups and self.rows)
    def finish_batch_in_group(self, data: Draws) -> None:
        """Up to three requests finish inside a free group (their frees wait for its end)."""
        m = self.ex.model
        assert m is not None
        if m.lazy and self.ps == 1 and not self.caps.free_any_order:
            return  # the group's end frees its ids in the order they were queued
        plain = data.boolean()  # every request by free (its head by free_full): 2 or 3 frees
        count = data.integer(min(2, len(self.rows)) if plain else 1, min(3, len(self.rows)))
        self.ex.call("free_group_begin")
        for _ in range(count):
            self.finish(data, split=data.boolean(), backwards=False,
                        segments=False if plain else data.boolean())
        self.ex.call("free_group_end")
        self.ex.note("group")
        if plain and count > 1:
            self.ex.note("group-frees")

    # -- queries, capacity, maintenance ----------------------------------------------------------
    @action(lambda self: self.rows, rank=2)
    def translate(self, data: Draws) -> None:
        """One to four tokens of a row (repeats allowed) translated, full to SWA (``swa``) or
        for a transfer."""
        swa = data.boolean()
        row = data.choice(self.rows)
        picks = [data.choice(row.slots) for _ in range(data.integer(1, 4))]
        name = "translate_loc_from_full_to_swa" if swa else "translate_kv_indices_for_transfer"
        self.ex.call(name, kv_indices=picks)

    @action(lambda self: self.caps.capacity_hooks or self.caps.clear, rank=2)
    def maintenance(self, data: Draws) -> None:
        """The capacity hook at sizes around what fits, after up to two finished requests
        stayed in the prefix cache it is handed (or, one time in eight, ``clear``)."""
        clear = data.integer(0, 7) == 7
        m = self.ex.model
        assert m is not None
        if clear and self.caps.clear:
            self.ex.call("clear")
            self.rows, self.cached = [], []
            return
        if not self.caps.capacity_hooks:
            return
        least = int(self.caps.float_chain and not self.cached)  # a tri-pool's cache holds rows
        for _ in range(data.integer(min(least, len(self.rows)), min(2, len(self.rows)))):
            self.cached.append(self.rows.pop(0))
        decode_gate = data.boolean()  # the scheduler's decode gate instead of the bare hook
        free, most = len(m.free_virtual) * self.ps, compacted_capacity(m)
        now = int(self.ex.target.available_size()) if self.caps.float_chain else m.available_size()
        held = sum(len(r.slots) for r in self.cached)  # what evicting helps with
        sizes = sorted({0, now, now + self.ps, now + held // 2, now + held, free // 2, free,
                        free + held + self.ps,
                        most, most + self.ps, most + 3 * self.ps, m.full_available_size(),
                        m.swa_available_size()})
        evicts = self.caps.float_chain and held and data.boolean()  # a size eviction serves
        self.ex.call("check_decode_capacity" if decode_gate else "evict_to_free_tokens",
                     num_tokens=now + held if evicts else data.choice(sizes),
                     cached=[(r.slots, r.front) for r in self.cached])
        self.ex.note("decode-gate" if decode_gate else "evict")
        self.cached = [r for r in self.cached if r.slots[0] // self.ps in m.full.v2p]
        for row in self.cached:  # the cache released its SWA pages
            row.front = row.front if row.slots[-1] // self.ps in m.swa.v2p else len(row.slots)

    # -- bad input (checked targets) -------------------------------------------------------------
    @action(lambda self: self.caps.error_types)
    def translate_freed(self, data: Draws) -> None:
        """A translation of a free page's first token, either way (``UNI-11``)."""
        m = self.ex.model
        assert m is not None
        if m.free_virtual:
            page = data.choice(m.free_virtual)
            side = data.choice(["translate_kv_indices_for_transfer",
                                "translate_loc_from_full_to_swa"])
            self._bad("translate_freed", side, kv_indices=[page * self.ps])

    def _bad(self, kind: str, name: str, **args: object) -> None:
        """Send one bad call of ``kind`` (the coverage event ``bad.<kind>``)."""
        self.ex.note(f"bad.{kind}")
        self.ex.call_bad(name, **args)

    def teardown(self) -> None:
        """Release every row (the model must be back to its empty capacity); count the
        example, its calls, coverage events and steps. Nothing is released after a failure or
        inside a free group (an example Hypothesis ended mid-group: its frees would wait)."""
        try:
            m = self.ex.model
            if m is not None and not self.ex.failed and Group.of(m) is None:
                for row in self.rows + self.cached:
                    self.ex.call("free", free_index=row.slots)
                assert not m.full.v2p and not m.swa.v2p
        finally:
            record_example(type(self), self.ex, sys.exc_info()[1])


def unified_machine_for(target: Target, config: Config) -> type[UnifiedMachine]:
    """A machine class bound to one unified configuration."""
    return bind(UnifiedMachine, f"Unified_ps{config.page_size}", target, config)


# The unified memory-pool family: SGLang 0.5.23's ``UnifiedSWATokenToKVPoolAllocator``, eager
# and lazy compaction (``python -m kvpool.oracle --family unified``).
FAMILY = Family("unified", UnifiedExecutor, unified_machine_for, UNIFIED, UnifiedCapabilities,
                "kvpool_unified_capabilities")
