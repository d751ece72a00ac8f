"""What the ownership guard costs on the unchecked fast path: kvpool with and without it.

The guard (:mod:`kvpool.impl.ownership`: one bit per page, checked and updated in the passes
that already touch the pages) is on by default; ``guard=False`` at construction turns it off.
This probe measures both in one process, with the compiled CPU backend, at every pool size of
the main benchmark:

- W3's ``alloc_extend`` step (:func:`benchmarks.workloads.w3_step`) with its untimed free (the
  state is the same after every step): blocks of steps of the two allocators in turn, and the
  median of every step's own time (:func:`step_medians`);
- W5's serving trace (:mod:`benchmarks.trace`), both replayed step by step in turn, with a
  digest of every result to show that the guard changes no slot on valid input. Each row
  replays the trace ``ROUNDS`` times on fresh allocators (all of them in turn), and its time of
  a step is the least of its replays of that step.

Why per step: a call lasts a few µs, so the other processes of a loaded machine fall on one
now and then with a stall of milliseconds, which a window mean carries; the median of equal
steps (W3), or the least of three replays of a step (W5), takes that load off both rows alike.

``python -m benchmarks.guard_cost [--out DIR] [--quick]`` prints one line per cell and writes
``guard_cost.json`` and ``guard_cost.md`` to DIR (default ``benchmarks/results``). Exits 1 when
a W5 digest differs, or when a cell costs more than ``LIMIT`` (10 %) with the guard.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace
from typing import Any

import kvpool.impl as kvpool_impl
import torch

from benchmarks.adapters import make_allocator
from benchmarks.timing import Step, probe_args
from benchmarks.trace import make_trace, replay, replay_in_turn, summary
from benchmarks.workloads import w3_step


@dataclass(frozen=True)
class Blocks:
    """How W3's steps are run: ``warmup_steps`` each, then ``blocks`` blocks of
    ``block_steps`` steps per allocator in turn."""

    warmup_steps: int
    blocks: int
    block_steps: int


FULL = Blocks(warmup_steps=200, blocks=20, block_steps=500)
QUICK = Blocks(warmup_steps=5, blocks=4, block_steps=100)
ROWS = ("guarded", "unguarded")
POOL_PAGES = (10_000, 100_000, 1_000_000)
LIMIT = 1.10  # guarded / unguarded, per cell
ROUNDS = 3  # W5 replays per row; a step's time: the least of them


def module(guard: bool) -> Any:
    """``kvpool.impl`` with the allocators built with ``guard`` (for the workloads' helpers)."""
    return SimpleNamespace(
        TokenToKVPoolAllocator=partial(kvpool_impl.TokenToKVPoolAllocator, guard=guard),
        PagedTokenToKVPoolAllocator=partial(kvpool_impl.PagedTokenToKVPoolAllocator,
                                            guard=guard))


def step_medians(steps: dict[str, Step], settings: Blocks) -> dict[str, float]:
    """µs per step of each of ``steps`` (self-timed steps: each returns its own seconds): after
    the warm-up, ``settings.blocks`` blocks of ``settings.block_steps`` steps per name in turn
    (the order flipped every block), and the median of every step's time."""
    names = list(steps)
    times: dict[str, list[float]] = {name: [] for name in names}
    for name in names:
        for _ in range(settings.warmup_steps):
            steps[name]()
    for block in range(settings.blocks):
        for name in (names if block % 2 == 0 else names[::-1]):
            step = steps[name]
            for _ in range(settings.block_steps):
                seconds = step()
                assert seconds is not None, "a W3 step times itself"
                times[name].append(seconds)
    return {name: statistics.median(times[name]) * 1e6 for name in names}


def w3_cell(num_pages: int, ps: int, need_sort: bool, settings: Blocks) -> dict[str, Any]:
    """W3's step with and without the guard, in turn: µs per call."""
    steps: dict[str, Step] = {}
    for name in ROWS:
        steps[name], _ = w3_step(module(name == "guarded"), num_pages, ps, need_sort, "cpu")
    return {"workload": "w3_extend", "num_pages": num_pages, "page_size": ps,
            "need_sort": need_sort, **step_medians(steps, settings)}


def w5_cell(num_pages: int, ps: int, need_sort: bool, num_steps: int) -> dict[str, Any]:
    """W5's trace with and without the guard, ``ROUNDS`` replays of each, one step each in
    turn: µs per step (each step's least time over the replays), and whether every replay
    gave the same slots (digests)."""
    trace = make_trace(ps, num_steps, min(num_pages // 2 - 64, 100_000))
    kind = "token" if ps == 1 else "paged"
    gens: dict[str, Any] = {}
    held = []
    for turn in range(ROUNDS):
        for name in ROWS:
            alloc = make_allocator(module(name == "guarded"), kind, num_pages, ps, need_sort)
            held.append(alloc.alloc((num_pages // 2) * ps))
            gens[f"{name}/{turn}"] = replay(alloc, trace, ps)
    times, digests = replay_in_turn(gens, num_steps)
    least = {name: [min(step) for step in zip(*(times[f"{name}/{turn}"]
                                                 for turn in range(ROUNDS)), strict=True)]
             for name in ROWS}
    return {"workload": "w5_trace", "num_pages": num_pages, "page_size": ps,
            "need_sort": need_sort, **{name: summary(least[name])["median_us"] for name in ROWS},
            "same_slots": len(set(digests.values())) == 1 and len(digests) == len(gens)}


def markdown(rows: list[dict[str, Any]]) -> str:
    """One table line per cell: µs per call (W3) or per step (W5), and the ratio."""
    lines = ["| workload | pages | ps | need_sort | guarded | unguarded | guarded / unguarded |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['workload']} | {r['num_pages']:,} | {r['page_size']} | "
                     f"{r['need_sort']} | {r['guarded']:.2f} | {r['unguarded']:.2f} | "
                     f"{r['guarded'] / r['unguarded']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Measure every cell, print and write the results; 0 on success, 1 as the docstring says."""
    ns = probe_args("guard_cost", __doc__, "short windows, 300 trace steps, 10^4 pages", argv)
    torch.set_num_threads(1)
    settings, num_steps = (QUICK, 300) if ns.quick else (FULL, 5_000)
    pools = POOL_PAGES[:1] if ns.quick else POOL_PAGES
    rows: list[dict[str, Any]] = []
    for num_pages in pools:
        for ps in (1, 16):
            for need_sort in (False, True):
                for row in (w3_cell(num_pages, ps, need_sort, settings),
                            w5_cell(num_pages, ps, need_sort, num_steps)):
                    rows.append(row)
                    print(f"{row['workload']} pages={num_pages} ps={ps} need_sort={need_sort}: "
                          f"guarded {row['guarded']:.2f} µs, unguarded {row['unguarded']:.2f} µs "
                          f"({row['guarded'] / row['unguarded']:.3f}x)", flush=True)
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "guard_cost.json").write_text(json.dumps(rows, indent=1) + "\n")
    ratios = [r["guarded"] / r["unguarded"] for r in rows]
    (ns.out / "guard_cost.md").write_text(
        "The ownership guard's cost on the unchecked path (compiled backend): µs per W3 call "
        "(the median call, blocks of calls in turn) / W5 step (median of window means; both "
        f"replayed step by step in turn, {ROUNDS} times each, a step's time the least of its "
        "replays); "
        f"guarded / unguarded {min(ratios):.3f}-{max(ratios):.3f}, limit {LIMIT:.2f}\n\n"
        + markdown(rows))
    print(f"wrote {ns.out / 'guard_cost.md'}")
    failed = [r for r in rows if r.get("same_slots") is False]
    for r in failed:
        print(f"W5 pages={r['num_pages']} ps={r['page_size']} need_sort={r['need_sort']}: "
              "the guard changed the slots")
    over = [r for r in rows if r["guarded"] / r["unguarded"] > LIMIT]
    for r in over:
        print(f"OVER {r['workload']} pages={r['num_pages']} ps={r['page_size']} "
              f"need_sort={r['need_sort']}: {r['guarded'] / r['unguarded']:.3f}x")
    return 1 if failed or (over and not ns.quick) else 0


if __name__ == "__main__":
    raise SystemExit(main())
