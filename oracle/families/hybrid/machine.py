"""The hybrid scheduler model: a Hypothesis state machine that drives a sliding-window target.

Requests arrive (``alloc_extend`` from an empty prefix; page size 1: ``alloc``; above it some
pre-allocated with SWA pages for their window tail only, ``alloc_extend_swa_tail``), grow by chunks,
decode in batches, and their window slides: ``free_swa`` or ``free_swa_segment`` of the oldest
tokens, to a page boundary (``window.slide_end``) or to any position (the rest of that page then
loses its peer too, ``window.released_frontier``). A request finishes with ``free_full`` of its
slid-out head and ``free`` of the rest, or the segment forms, in or out of a free group;
translations, capacity hooks, ``clear`` / ``resize`` and (checked targets) bad input run between.
Each row remembers ``front``: positions below it have no SWA peer. The pure variant
(``caps.pure_swa``, ``SWA-21..25``) runs the same requests on one pool: its slid-out slots are
free again (another request may take them), so translations and the bad releases read the pool.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from kvpool.spec.window import released_frontier, slide_end

from ...engine.draws import Draws
from ...engine.examples import record_example
from ...engine.families import Family
from ...engine.machines import FamilyMachine, bind
from ...engine.steps import ActionMachine, action
from ...engine.target import Config, Target
from .coverage import BAD_KIND_CALLS, HYBRID
from .executor import HybridExecutor
from .targets import HybridCapabilities


@dataclass
class Row:
    """One request: its kv row (full slots) and its released frontier."""

    slots: list[int]
    front: int = 0

    def growable(self, ps: int) -> bool:
        """Growing continues the last page only when its SWA peer is live (``SWA-8``)."""
        return len(self.slots) % ps == 0 or self.front < len(self.slots)


class HybridMachine(FamilyMachine, ActionMachine):
    """Scheduler model over one hybrid configuration (bound by ``hybrid_machine_for``)."""

    executor_class = HybridExecutor
    ex: HybridExecutor
    caps: HybridCapabilities
    rows: list[Row]

    def __init__(self) -> None:
        super().__init__()
        self.group_open = False
        self.ready = False

    @property
    def clobber(self) -> bool:
        """Whether the caller overwrites a free's input tensors right after it (the engine's
        ``ALIAS-2`` probe; inside a group it tests that deferred frees copied them)."""
        return self.caps.ownership or self.group_open

    @property
    def pure(self) -> bool:
        """The pure sliding-window variant: one pool as both sides (``SWA-21``)."""
        return self.caps.pure_swa

    def start(self, data: Draws) -> None:
        """Two fresh pools: 10-28 full pages (maybe a partial page more), 5-20 SWA pages; the
        pure variant: one pool of 5-20 slots."""
        full_pages, swa_pages, ragged = data.integer(10, 28), data.integer(5, 20), data.boolean()
        extra = self.ps - 1 if ragged else 0
        if self.pure:
            self.ex.create(swa_pages, swa_pages)
            self.ex.note("pure.one_pool")
        else:
            self.ex.create(full_pages * self.ps + extra, swa_pages * self.ps)
        self.ready = True

    # -- growth --------------------------------------------------------------------------------
    @action()
    def new_requests(self, data: Draws) -> None:
        """New requests; ``fill``: one request that takes every slot the smaller side has left
        (the next page either side needs is then short on one side only)."""
        fill = data.choice([False, False, False, False, True])
        m = self.ex.model
        assert m is not None
        if fill and m.available_size() > 0:
            seqs = [m.available_size()]
            self.ex.note("fill")
        else:
            seqs = [data.integer(1, 2 * self.ps + 2) for _ in range(data.integer(1, 3))]
        if self.ps == 1:
            out = self.ex.call("alloc", need_size=sum(seqs))
        else:
            out = self.ex.call("alloc_extend", prefix_lens=[0] * len(seqs), seq_lens=seqs,
                               last_loc=[-1] * len(seqs), extend_num_tokens=sum(seqs))
        self.ex.note("short" if out is None else "arrive")
        self._note_pure(out)
        if out is not None:
            start = 0
            for n in seqs:
                self.rows.append(Row(out[start:start + n]))
                start += n

    @action(lambda self: self.ps > 1 and self.caps.swa_tail)
    def prealloc(self, data: Draws) -> None:
        """PD decode: one request arrives pre-allocated, its full row whole and SWA pages for its
        window tail only (``alloc_extend_swa_tail``, ``SWA-20``); the tail starts on a page
        boundary (none, part or all of the row); the head has no SWA peer (its ``front``)."""
        seq = data.integer(1, 3 * self.ps + 2)
        head = data.integer(0, seq // self.ps) * self.ps
        out = self.ex.call("alloc_extend_swa_tail", prefix_lens=[0], seq_lens=[seq],
                           last_loc=[-1], extend_num_tokens=seq, swa_tail_len=seq - head)
        self.ex.note("short" if out is None else "prealloc")
        if out is not None:
            self.rows.append(Row(out, front=head))

    @action(lambda self: self.rows)
    def grow(self, data: Draws) -> None:
        """Some growable rows extend by chunks or decode one token."""
        decode = data.boolean()
        picks = [r for r in self.rows if r.growable(self.ps)]
        if picks:
            chosen = [picks.pop(data.integer(0, len(picks) - 1))]  # 1-4 distinct rows
            while picks and len(chosen) < 4 and data.boolean():
                chosen.append(picks.pop(data.integer(0, len(picks) - 1)))
            self._grow(data, chosen, decode)

    @action(lambda self: self.rows)
    def decode_step(self, data: Draws) -> None:
        """The serving loop: every growable row decodes one token, then windows slide."""
        picks = [r for r in self.rows if r.growable(self.ps)]
        if picks:
            self._grow(data, picks[:8], True)

    def _grow(self, data: Draws, rows: list[Row], decode: bool) -> None:
        if self.ps == 1:
            chunks = [1] * len(rows) if decode else [data.integer(0, 5) for _ in rows]
            out = self.ex.call("alloc", need_size=sum(chunks))
        elif decode:
            chunks = [1] * len(rows)
            if not self.caps.atomic_decode and self._decode_refused(rows):
                return  # a refused decode leaks on such a target (SGL-SWA-DECODE-LEAK)
            out = self.ex.call("alloc_decode", seq_lens=[len(r.slots) + 1 for r in rows],
                               last_loc=[r.slots[-1] for r in rows])
        else:
            chunks = [data.integer(0, 2 * self.ps + 1) for _ in rows]
            pre = [len(r.slots) for r in rows]
            out = self.ex.call("alloc_extend", prefix_lens=pre,
                               seq_lens=[p + c for p, c in zip(pre, chunks)],
                               last_loc=[r.slots[-1] for r in rows], extend_num_tokens=sum(chunks))
        self.ex.note(("decode" if decode else "extend") + ("-short" if out is None else ""))
        self._note_pure(out)
        if out is not None:
            start = 0
            for row, n in zip(rows, chunks):
                row.slots += out[start:start + n]
                start += n
            if decode and data.boolean():  # the decode step's window slides
                window = data.integer(1, 2 * self.ps)
                for row in rows:
                    self._slide_to(row, slide_end(len(row.slots), window, self.ps),
                                   data.boolean())

    def _note_pure(self, out: list[int] | None) -> None:
        """The pure variant's allocation events: a refusal, a grant, a slid-out slot reused."""
        if not self.pure:
            return
        self.ex.note("pure.short" if out is None else "pure.alloc")
        heads = {s for r in self.rows for s in r.slots[:r.front]}
        if out and heads.intersection(out):
            self.ex.note("pure.reuse")

    def _decode_refused(self, rows: list[Row]) -> bool:
        m = self.ex.model
        assert m is not None
        need = sum((len(r.slots)) % self.ps == 0 for r in rows)
        return any(need > len(side.free_pages) + len(side.staged) for side in (m.full, m.swa))

    # -- window slides ---------------------------------------------------------------------------
    @action(lambda self: self.rows)
    def slide(
        self, data: Draws, aligned: bool | None = None, segment: bool | None = None
    ) -> None:
        """The window of a row slides (``aligned`` / ``segment``: drawn when not given)."""
        if aligned is None:
            aligned = data.boolean()
        if segment is None:
            segment = data.boolean()
        row = data.choice(self.rows)
        n = len(row.slots)
        if aligned or self.ps == 1:
            end = slide_end(n, data.integer(1, self.ps + 1), self.ps)
        else:
            end = data.integer(row.front, n)
        self._slide_to(row, end, segment)

    def _slide_to(self, row: Row, end: int, segment: bool) -> None:
        """Release the SWA side of positions ``[front, end)`` of ``row``."""
        if end <= row.front:
            return
        part = row.slots[row.front:end]
        if segment:
            self.ex.call("free_swa_segment", free_index=part, start_pos=row.front,
                         clobber=self.clobber)
        else:
            self.ex.call("free_swa", free_index=part, clobber=self.clobber)
        self.ex.note("slide-" + ("aligned" if end % self.ps == 0 else "unaligned"))
        if self.pure:
            self.ex.note("pure.slide")
        row.front = min(released_frontier(end, self.ps), max(len(row.slots), end))

    # -- release ---------------------------------------------------------------------------------
    @action(lambda self: self.rows)
    def finish(self, data: Draws) -> None:
        row = self.rows.pop(data.integer(0, len(self.rows) - 1))
        head, tail, front = row.slots[:row.front], row.slots[row.front:], row.front
        if data.boolean():
            self.ex.call("free_full", free_index=self.repeat(data, head), clobber=self.clobber)
            self.ex.call("free", free_index=self.repeat(data, tail), clobber=self.clobber)
            self.ex.note("finish-free")
            return
        self.ex.call("free_full_segments", segments=[[head, 0]], clobber=self.clobber)
        cut = front + data.integer(0, len(tail))
        if self.caps.segments == "disjoint":
            cut = min(len(row.slots), -(-cut // self.ps) * self.ps)
        segments = [[row.slots[front:cut], front], [row.slots[cut:], cut]]
        self.ex.call("free_segments", segments=segments, clobber=self.clobber)
        self.ex.note("finish-segments" + ("-shared" if cut % self.ps else ""))

    def repeat(self, data: Draws, slots: list[int]) -> list[int]:
        """At ``ps > 1`` outside a group, a quarter of the time, ``slots`` with its first slot
        named again at the end: one call may name a page twice (released once); at ``ps = 1`` a
        slot named twice is a double free (``SWA-11``)."""
        if self.ps == 1 or self.group_open or len(slots) < 2 or data.integer(0, 3):
            return slots
        self.ex.note("free.repeat_slot")
        return [*slots, slots[0]]

    @action(lambda self: self.caps.groups and self.rows)
    def finish_batch_in_group(self, data: Draws) -> None:
        self.ex.call("free_group_begin")
        self.group_open = True
        for _ in range(data.integer(1, min(3, len(self.rows)))):
            if data.boolean():
                self.slide(data, aligned=data.boolean(), segment=data.boolean())
            if self.rows:
                self.finish(data)
        if bool(self.caps.error_types) and data.boolean():
            self.bad_call(data)
        self.ex.call("free_group_end")
        self.group_open = False
        self.ex.note("group")

    # -- queries, capacity, maintenance ----------------------------------------------------------
    @action(lambda self: self.rows)
    def translate(self, data: Draws) -> None:
        row = data.choice(self.rows)
        live = row.slots[row.front:] if self.pure else row.slots  # pure: slid-out slots are free
        if not live:
            return
        picks = [data.choice(live) for _ in range(data.integer(1, 4))]
        self.ex.call("translate_loc_from_full_to_swa", kv_indices=[*picks, -1])
        if self.pure:
            self.ex.note("pure.identity")

    @action(lambda self: self.caps.capacity_hooks)
    def capacity(self, data: Draws) -> None:
        check = data.boolean()
        m = self.ex.model
        assert m is not None
        sizes = sorted({0, m.swa_available_size(), m.swa_available_size() + 1,
                        m.full_available_size() + self.ps})
        n = data.choice(sizes)
        self.ex.call("check_decode_capacity" if check else "evict_to_free_tokens", num_tokens=n)

    @action(lambda self: self.caps.clear or self.caps.resize)
    def maintenance(self, data: Draws) -> None:
        if self.caps.resize and data.boolean():
            m = self.ex.model
            assert m is not None
            top = 32 if self.caps.resize_grow else m.full.size // self.ps
            full = data.integer(4, max(4, top)) * self.ps
            swa = full if self.pure else data.integer(3, 14) * self.ps  # pure: one size (SWA-25)
            self.ex.call("resize", size=full, size_swa=swa)
            if self.pure:
                self.ex.note("pure.resize")
        elif self.caps.clear:
            self.ex.call("clear")
        self.rows = []

    # -- bad input (checked targets) -------------------------------------------------------------
    @action(lambda self: self.caps.error_types and self.rows)
    def bad_call(self, data: Draws) -> None:
        row = data.choice(self.rows) if self.rows else None
        if row is None:
            return
        kinds = ([] if self.pure else ["free_full_live"]) + ["translate_freed"]
        head = self._released_head(row)
        if head:
            kinds += ["swa_double", "free_released", "segment_released"]
        if self.pure:
            kinds.append("resize_unequal")
        if self.ps > 1 and len(row.slots) % self.ps:
            kinds.append("extend_released")
        kinds = [k for k in kinds if self.caps.checks(BAD_KIND_CALLS[k])]  # partially checked
        if not kinds:
            return
        kind = data.choice(kinds)
        if kind == "resize_unequal":
            m = self.ex.model
            assert m is not None
            self._bad(kind, "resize", size=m.size, size_swa=m.size + 1)
        elif kind == "swa_double":
            self._bad(kind, "free_swa", free_index=[data.choice(head)])
        elif kind == "free_released":
            self._bad(kind, "free", free_index=[data.choice(head)])
        elif kind == "segment_released":
            self._bad(kind, "free_swa_segment", free_index=head[:self.ps],
                      start_pos=row.slots.index(head[0]))
        elif kind == "free_full_live":
            if row.front < len(row.slots):
                self._bad(kind, "free_full", free_index=[row.slots[-1]])
        elif kind == "translate_freed":
            m = self.ex.model
            assert m is not None
            if m.full.free_pages:
                self._bad(kind, "translate_loc_from_full_to_swa",
                          kv_indices=[m.full.free_pages[0] * self.ps])
        else:  # the window first slides past the row's end: its last page has no peer left
            n = len(row.slots)
            self._slide_to(row, n, segment=False)
            self._bad(kind, "alloc_extend", prefix_lens=[n], seq_lens=[n + 1],
                      last_loc=[row.slots[-1]], extend_num_tokens=1)

    def _released_head(self, row: Row) -> list[int]:
        """The slots of ``row`` whose SWA side is released (pure: those still free in the pool,
        since another request may hold a slid-out slot again)."""
        head = row.slots[:row.front]
        if not self.pure:
            return head
        m = self.ex.model
        assert m is not None
        return [s for s in head if m.peer_of(s) == 0 and s <= m.full.num_pages]

    def _bad(self, kind: str, name: str, **args: object) -> None:
        """Send one bad call of ``kind`` (the coverage event ``bad.<kind>``)."""
        self.ex.note(f"bad.{kind}")
        self.ex.call_bad(name, **args)

    def teardown(self) -> None:
        """Release everything (every page of both pools must be free again); count the
        example, its calls, coverage events and steps (``machine.record_example``)."""
        try:
            if self.ex.model is not None and not self.group_open and not self.ex.failed:
                for row in self.rows:
                    self.ex.call("free_full", free_index=row.slots[:row.front])
                    self.ex.call("free", free_index=row.slots[row.front:])
                m = self.ex.model
                assert m.full_available_size() == m.full.num_pages * self.ps
                assert m.swa_available_size() == m.swa.num_pages * self.ps
        finally:
            record_example(type(self), self.ex, sys.exc_info()[1])


def hybrid_machine_for(target: Target, config: Config) -> type[HybridMachine]:
    """A machine class bound to one hybrid configuration."""
    name = f"Hybrid_ps{config.page_size}_{'sorted' if config.need_sort else 'unsorted'}"
    return bind(HybridMachine, name, target, config)


# The hybrid sliding-window family: SGLang 0.5.23's ``SWATokenToKVPoolAllocator`` and kvpool's
# (``python -m kvpool.oracle --family hybrid``).
FAMILY = Family("hybrid", HybridExecutor, hybrid_machine_for, HYBRID, HybridCapabilities,
                "kvpool_hybrid_capabilities")
