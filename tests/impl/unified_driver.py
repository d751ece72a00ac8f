"""Random call sequences for a unified full + SWA pool, run beside a reference.

:class:`Driver` keeps the requests a scheduler would hold (each row's virtual token ids and the
front below which its SWA pages were released), picks a random call the state allows, sends it
to every allocator it drives (the spec model :class:`UnifiedSWAModel`, kvpool's
``UnifiedSWAAllocator``, SGLang's composite) and hands the results to a comparison callback.
Token tensors go as int64, int32 or strided views at random.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from kvpool.oracle.families.unified.cache import SWACache, evict_spec
from kvpool.oracle.families.unified.calls import UNIFIED_CALLS
from kvpool.spec.unified import UnifiedSWAModel

Row = list[int]


def form(ids: list[int], rng: random.Random) -> torch.Tensor:
    """``ids`` as an int64, int32 or strided int64 tensor."""
    kind = rng.randrange(3)
    if kind == 0:
        return torch.tensor(ids, dtype=torch.int64)
    if kind == 1:
        return torch.tensor(ids, dtype=torch.int32)
    wide = torch.zeros(2 * len(ids), dtype=torch.int64)
    wide[::2] = torch.tensor(ids, dtype=torch.int64)
    return wide[::2]


def as_list(value: Any) -> Any:
    return value.tolist() if isinstance(value, torch.Tensor) else value


@dataclass
class Driver:
    """Drives ``targets`` (each a composite with SGLang's API) and, when given, ``model``."""

    rng: random.Random
    page_size: int
    model: UnifiedSWAModel | None
    targets: list[Any]
    rows: list[tuple[Row, int]] = field(default_factory=list)
    in_group: bool = False
    sorted_frees: bool = False  # pass freed ids ascending (SGLang's lazy page size 1 wants it)
    strict_segments: bool = False  # free_segment / free_swa_segment only of rows bound on SWA

    # -- sending --

    def each(self, spec: Callable[[UnifiedSWAModel], Any] | None,
             call: Callable[[Any], Any]) -> list[Any]:
        """The model's result (None without a model) then every target's."""
        out = [spec(self.model) if spec is not None and self.model is not None else None]
        return out + [as_list(call(t)) for t in self.targets]

    def step(self) -> tuple[str, list[Any]]:
        """One random call; returns its name and the results."""
        rng = self.rng
        choices = ["alloc", "extend", "decode", "tail", "evict", "translate"]
        if self.rows:
            choices += ["free", "free", "free_swa", "free_full", "segment", "group"]
        if rng.random() < 0.02:
            choices.append("clear")
        if self.model is None:  # the model has no non-urgent flush
            choices.append("flush")
        name = rng.choice(choices)
        return name, getattr(self, "do_" + name)()

    # -- allocations --

    def do_alloc(self) -> list[Any]:
        need = self.rng.randrange(0, 12) * self.page_size
        out = self.each(lambda m: m.alloc(need), lambda t: t.alloc(need))
        if out[-1] is not None:
            self.rows.append((out[-1], 0))
        return out

    def _growing(self, count: int) -> list[int]:
        """Indices of up to ``count`` rows to grow (-1: a new request)."""
        picks = [self.rng.randrange(-1, len(self.rows)) for _ in range(count)]
        return list(dict.fromkeys(picks))

    def do_extend(self) -> list[Any]:
        rng, picks = self.rng, self._growing(self.rng.randrange(1, 4))
        rows = [self.rows[i][0] if i >= 0 else [] for i in picks]
        prefix = [len(r) for r in rows]
        seq = [p + rng.randrange(0, 3 * self.page_size + 2) for p in prefix]
        last = [r[-1] if r else -1 for r in rows]
        num = sum(seq) - sum(prefix)
        out = self.each(lambda m: m.alloc_extend(prefix, seq, last), lambda t: t.alloc_extend(
            torch.tensor(prefix), torch.tensor(prefix), torch.tensor(seq), torch.tensor(seq),
            form(last, rng), num))
        if out[-1] is not None:
            self._grow(picks, [s - p for p, s in zip(prefix, seq)], out[-1])
        return out

    def _grow(self, picks: list[int], counts: list[int], tokens: list[int]) -> None:
        at = 0
        for i, n in zip(picks, counts):
            new, at = tokens[at:at + n], at + n
            if i >= 0:
                row, front = self.rows[i]
                self.rows[i] = (row + new, front)
            elif new:
                self.rows.append((new, 0))

    def do_decode(self) -> list[Any]:
        live = [i for i, (r, _) in enumerate(self.rows) if r]
        picks = self.rng.sample(live, min(len(live), self.rng.randrange(1, 6)))
        if not picks:
            return self.do_translate()
        seq = [len(self.rows[i][0]) + 1 for i in picks]
        last = [self.rows[i][0][-1] for i in picks]
        out = self.each(lambda m: m.alloc_decode(seq, last), lambda t: t.alloc_decode(
            torch.tensor(seq), torch.tensor(seq), form(last, self.rng)))
        if out[-1] is not None:
            self._grow(picks, [1] * len(picks), out[-1])
        return out

    def do_tail(self) -> list[Any]:
        (i,) = self._growing(1)
        row = self.rows[i][0] if i >= 0 else []
        prefix = len(row)
        extra = self.rng.randrange(0, 4 * self.page_size + 2)
        tail = self.rng.randrange(0, extra + 1)
        last = [row[-1] if row else -1]
        out = self.each(
            lambda m: m.alloc_extend_swa_tail(prefix, prefix + extra, last[0], tail),
            lambda t: t.alloc_extend_swa_tail(
                torch.tensor([prefix]), torch.tensor([prefix]), torch.tensor([prefix + extra]),
                torch.tensor([prefix + extra]), form(last, self.rng), extra, tail))
        if out[-1] is not None:
            self._grow([i], [extra], out[-1])
        return out

    # -- releases --

    def _take_row(self) -> tuple[Row, int]:
        return self.rows.pop(self.rng.randrange(len(self.rows)))

    def _ids(self, ids: list[int]) -> list[int]:
        ids = list(ids)
        if self.sorted_frees:
            return sorted(ids)
        self.rng.shuffle(ids)
        return ids

    def _free(self, name: str, ids: list[int], **kw: Any) -> list[Any]:
        spec = UNIFIED_CALLS[name].spec
        return self.each(lambda m: spec(m, {"free_index": ids, **kw}),
                         lambda t: getattr(t, name)(form(ids, self.rng), **kw))

    def do_free(self) -> list[Any]:
        row, _ = self._take_row()
        return self._free("free", self._ids(row))

    def do_free_swa(self) -> list[Any]:
        i = self.rng.randrange(len(self.rows))
        row, front = self.rows[i]
        ps = self.page_size
        new_front = max(front, self.rng.randrange(0, len(row) + 1) // ps * ps)
        self.rows[i] = (row, new_front)
        return self._free("free_swa", self._ids(row[front:new_front]))

    def do_free_full(self) -> list[Any]:
        """``free_full`` of a row whose SWA pages are all released (a slide first)."""
        row, _ = self._take_row()
        if row:
            self._free("free_swa", self._ids(row))
        return self._free("free_full", self._ids(row))

    def do_segment(self) -> list[Any]:
        """One of the segment frees of a whole row (page-aligned, start 0)."""
        row, _ = self._take_row()
        name = self.rng.choice(["free_segment", "free_full_segment", "free_swa_segment"])
        pages = {t // self.page_size for t in row}
        if self.strict_segments and not pages <= self.swa_bound():
            name = "free_full_segment"  # SGLang's other two want every SWA page bound
        if name == "free_full_segment" and row:
            self._free("free_swa", self._ids(row))
        if name == "free_swa_segment":
            self.rows.append((row, len(row)))
        return self.each(lambda m: UNIFIED_CALLS[name].spec(m, {"free_index": row,
                                                                "start_pos": 0}),
                         lambda t: getattr(t, name)(torch.tensor(row), start_pos=0))

    def do_group(self) -> list[Any]:
        name = "free_group_end" if self.in_group else "free_group_begin"
        self.in_group = not self.in_group
        return self.each(lambda m: UNIFIED_CALLS[name].spec(m, {}), lambda t: getattr(t, name)())

    def do_clear(self) -> list[Any]:
        self.rows.clear()
        self.in_group = False

        def spec(m: UnifiedSWAModel) -> None:
            m.clear()
            m.group = None  # clear() closes an open free group, as SGLang's does

        return self.each(spec, lambda t: t.clear())

    def do_evict(self) -> list[Any]:
        """``evict_to_free_tokens`` with up to two rows handed to a prefix cache."""
        if self.in_group:
            return self.do_translate()
        cached = [self._take_row() for _ in range(min(len(self.rows), self.rng.randrange(3)))]
        cached = [(row, front) for row, front in cached if row]
        num = self.rng.randrange(0, 40) * self.page_size
        model_out = evict_spec(self.model, num, cached) if self.model is not None else None
        outs: list[Any] = [model_out]
        kept: list[tuple[Row, int]] = []
        for t in self.targets:
            cache = SWACache(t, cached)
            outs.append((t.evict_to_free_tokens(cache, num), cache.requests))
            left = {tuple(slots): front for slots, front in cache.rows}
            kept = [(row, left[tuple(sorted(row))]) for row, _ in cached
                    if tuple(sorted(row)) in left]
        self.rows += kept  # what the cache did not evict stays held, in position order
        return outs

    def do_flush(self) -> list[Any]:
        """``flush_opportunistic()``: a non-urgent compaction (lazy), the copies it made."""
        return self.each(None, lambda t: t.flush_opportunistic())

    def do_translate(self) -> list[Any]:
        """No call: the comparison after every call reads the translations."""
        return self.each(None, lambda t: None)

    # -- views --

    def swa_bound(self) -> set[int]:
        """The virtual pages bound on the SWA side now (the model's, else the last target's)."""
        if self.model is not None:
            return set(self.model.swa.v2p)
        return set(self.targets[-1].unified_state().sides["swa"].bindings)

    def live_ids(self) -> list[int]:
        return sorted(t for row, _ in self.rows for t in row)
