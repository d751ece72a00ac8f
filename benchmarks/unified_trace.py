"""A W5 serving trace with sliding-window releases, on kvpool's unified and static SWA pools.

The trace is W5's (:func:`benchmarks.trace.make_trace`: finished requests freed in one free
group, chunked prefill as one batched ``alloc_extend``, one batched ``alloc_decode``; ps 1:
``alloc``), plus the window: after a step's allocations, every request whose row is longer than
``WINDOW_TOKENS[ps]`` releases the SWA side of the whole pages that slid out of its window, all
of them in one ``free_swa`` call (the full side stays live until the request finishes; then,
inside the step's free group, ``free_full`` of the slid-out part and ``free`` of the rest).

Targets, in one process, their steps interleaved (:func:`benchmarks.trace.replay_in_turn`):
``static`` (kvpool's ``SWATokenToKVPoolAllocator``, ``P`` pages a side), ``unified-eager`` /
``unified-lazy`` (kvpool's ``UnifiedSWAAllocator`` over a buffer of ``P`` pages a side, checked
mode, its own byte store). Only allocator calls are timed; µs per step, median of 10 window
means (:func:`benchmarks.trace.summary`).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import torch

from benchmarks.trace import Step, make_trace, replay_in_turn, summary

NUM_PAGES = 4096
NUM_STEPS = 3000
WINDOW_TOKENS = {1: 16, 16: 128}
ENTRY_BYTES = 32
TARGETS = ("static", "unified-eager", "unified-lazy")


def make(name: str, ps: int) -> Any:
    """A fresh target of ``NUM_PAGES`` pages a side."""
    if name == "static":
        from kvpool.impl import SWATokenToKVPoolAllocator

        size = NUM_PAGES * ps
        return SWATokenToKVPoolAllocator(size, size, ps, torch.float16, "cpu", None, False)
    from kvpool.impl.unified_swa import UnifiedSWAAllocator

    return UnifiedSWAAllocator(2 * (NUM_PAGES + 1) * ps * ENTRY_BYTES, ps,
                               lazy=name == "unified-lazy")


def _i64(xs: list[int]) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.int64)


def replay_windowed(a: Any, trace: list[Step], ps: int) -> Generator[float, None, int]:
    """Replay ``trace`` with window releases (module docstring): allocator seconds per step;
    returns the number of ``free_swa`` calls made."""
    from time import perf_counter as clock

    window = WINDOW_TOKENS[ps]
    slots: dict[int, list[int]] = {}
    released: dict[int, int] = {}
    slides = 0
    for step in trace:
        spent = 0.0
        if step.finish:
            parts = []  # (slid-out part: free_full, the rest: free) of each finished row
            for rid in step.finish:
                row, cut = slots.pop(rid), released.pop(rid)
                parts.append((_i64(row[:cut]), _i64(row[cut:])))
            t0 = clock()
            a.free_group_begin()
            for slid_out, rest in parts:
                a.free_full(slid_out)
                a.free(rest)
            a.free_group_end()
            spent += clock() - t0
        if step.extend:
            n_tok = sum(s - p for _, p, s in step.extend)
            if ps == 1:
                t0 = clock()
                out = a.alloc(n_tok)
                spent += clock() - t0
            else:
                pre = _i64([p for _, p, _ in step.extend])
                seq = _i64([s for _, _, s in step.extend])
                last = _i64([slots[r][-1] if p else -1 for r, p, _ in step.extend])
                t0 = clock()
                out = a.alloc_extend(pre, pre, seq, seq, last, n_tok)
                spent += clock() - t0
            if out is None:
                raise RuntimeError("the windowed trace ran out of pages")
            values, off = out.tolist(), 0
            for rid, p, s in step.extend:
                slots.setdefault(rid, []).extend(values[off:off + s - p])
                released.setdefault(rid, 0)
                off += s - p
        if step.decode:
            if ps == 1:
                t0 = clock()
                out = a.alloc(len(step.decode))
                spent += clock() - t0
            else:
                seq = _i64([len(slots[r]) + 1 for r in step.decode])
                last = _i64([slots[r][-1] for r in step.decode])
                t0 = clock()
                out = a.alloc_decode(seq, seq, last)
                spent += clock() - t0
            if out is None:
                raise RuntimeError("the windowed trace ran out of pages")
            for rid, slot in zip(step.decode, out.tolist(), strict=True):
                slots[rid].append(slot)
        slid: list[int] = []
        for rid, row in slots.items():
            cut = (len(row) - window) // ps * ps
            if cut > released[rid]:
                slid += row[released[rid]:cut]
                released[rid] = cut
        if slid:
            ids = _i64(slid)
            t0 = clock()
            a.free_swa(ids)
            spent += clock() - t0
            slides += 1
        yield spent
    return slides


def run(num_steps: int = NUM_STEPS) -> list[dict[str, Any]]:
    """Per page size: µs per step of every target (median of window means), each unified
    target's ratio to ``static``, and the number of window releases."""
    rows = []
    for ps in (1, 16):
        trace = make_trace(ps, num_steps, NUM_PAGES // 2)
        gens = {name: replay_windowed(make(name, ps), trace, ps) for name in TARGETS}
        times, slides = replay_in_turn(gens, num_steps)
        row: dict[str, Any] = {"page_size": ps, "steps": num_steps,
                               "window_tokens": WINDOW_TOKENS[ps],
                               "free_swa_calls": slides["static"]}
        for name in TARGETS:
            row[name] = summary(times[name][1:])["median_us"]
        for name in TARGETS[1:]:
            row[f"{name} / static"] = row[name] / row["static"]
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The serving-trace table."""
    lines = ["| ps | steps | window (tokens) | free_swa calls | static | unified eager | "
             "unified lazy | eager / static | lazy / static |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['page_size']} | {r['steps']} | {r['window_tokens']} | "
                     f"{r['free_swa_calls']} | {r['static']:.1f} | {r['unified-eager']:.1f} | "
                     f"{r['unified-lazy']:.1f} | {r['unified-eager / static']:.2f} | "
                     f"{r['unified-lazy / static']:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(run()))
