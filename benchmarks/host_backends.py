"""kvpool's two CPU backends side by side: the compiled loops and the numpy fallback.

An install with a C compiler runs :class:`kvpool.impl.native_ops.NativeOps`; one without runs
:class:`kvpool.impl.numpy_ops.NumpyOps` (``KVPOOL_NATIVE=0`` forces it). This probe measures both
in one process on the workloads where the backend matters, so that a user without a compiler
knows what it costs:

- W3's ``alloc_extend`` step (:func:`benchmarks.workloads.w3_step`) beside its output floor,
  every row's windows interleaved (:func:`benchmarks.timing.measure_interleaved`);
- W5's serving trace (:mod:`benchmarks.trace`), both backends replayed step by step in turn,
  with a digest of every result to show that they hand out the same slots.

``python -m benchmarks.host_backends [--out DIR] [--quick]`` prints one line per cell and writes
``host_backends.json`` and ``host_backends.md`` to DIR (default ``benchmarks/results``).
Exits 1 when the extension is not built (there is nothing to compare) or when the two backends'
W5 digests differ.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import kvpool.impl as kvpool_impl
import torch
from kvpool.impl.native_ops import native_available

from benchmarks.adapters import make_allocator
from benchmarks.timing import Settings, Step, measure_interleaved, probe_args
from benchmarks.trace import make_trace, replay, replay_in_turn, summary
from benchmarks.workloads import output_floor, w3_step

FULL = Settings()
QUICK = Settings(warmup_steps=5, window_s=0.01, windows=3)
BACKENDS = ("compiled", "numpy")
POOL_PAGES = 10_000


@contextmanager
def backend(name: str) -> Iterator[None]:
    """Allocators built inside use the named CPU backend (``KVPOOL_NATIVE`` at construction)."""
    before = os.environ.get("KVPOOL_NATIVE")
    os.environ["KVPOOL_NATIVE"] = "1" if name == "compiled" else "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ["KVPOOL_NATIVE"]
        else:
            os.environ["KVPOOL_NATIVE"] = before


def w3_cell(ps: int, need_sort: bool, settings: Settings) -> dict[str, Any]:
    """W3's step on both backends and the floor, interleaved: µs per call."""
    steps: dict[str, Step] = {}
    args: tuple[Any, ...] = ()
    for name in BACKENDS:
        with backend(name):
            steps[name], args = w3_step(kvpool_impl, POOL_PAGES, ps, need_sort, "cpu")
    steps["floor"], _ = output_floor(args[-1])()

    def fail(row: str, exc: BaseException) -> None:
        raise RuntimeError(f"host_backends W3 row {row} failed: {exc!r}") from exc
    samples = measure_interleaved(steps, settings, fail)
    return {"workload": "w3_extend", "page_size": ps, "need_sort": need_sort,
            **{name: samples[name].median_us for name in (*BACKENDS, "floor")}}


def w5_cell(ps: int, need_sort: bool, num_steps: int) -> dict[str, Any]:
    """W5's trace on both backends, one step each in turn: µs per step and the digests."""
    trace = make_trace(ps, num_steps, POOL_PAGES // 2 - 64)
    kind = "token" if ps == 1 else "paged"
    gens: dict[str, Any] = {}
    held = []
    for name in BACKENDS:
        with backend(name):
            alloc = make_allocator(kvpool_impl, kind, POOL_PAGES, ps, need_sort)
        held.append(alloc.alloc((POOL_PAGES // 2) * ps))
        gens[name] = replay(alloc, trace, ps)
    times, digests = replay_in_turn(gens, num_steps)
    return {"workload": "w5_trace", "page_size": ps, "need_sort": need_sort,
            **{name: summary(times[name])["median_us"] for name in BACKENDS},
            "same_slots": len(set(digests.values())) == 1 and len(digests) == len(BACKENDS)}


def markdown(rows: list[dict[str, Any]]) -> str:
    """One table line per cell: µs per call (W3) or per step (W5), numpy / compiled."""
    lines = ["| workload | ps | need_sort | compiled | numpy | numpy / compiled | floor |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        floor = f"{r['floor']:.2f}" if "floor" in r else "—"
        lines.append(f"| {r['workload']} | {r['page_size']} | {r['need_sort']} | "
                     f"{r['compiled']:.2f} | {r['numpy']:.2f} | "
                     f"{r['numpy'] / r['compiled']:.2f} | {floor} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Measure every cell, print and write the results; 0 on success, 1 as the docstring says."""
    ns = probe_args("host_backends", __doc__, "short windows, 300 trace steps", argv)
    if not native_available():
        print("kvpool.impl._native is not built: only the numpy backend is installed")
        return 1
    torch.set_num_threads(1)
    settings, num_steps = (QUICK, 300) if ns.quick else (FULL, 10_000)
    rows: list[dict[str, Any]] = []
    for ps in (1, 16):
        for need_sort in (False, True):
            for row in (w3_cell(ps, need_sort, settings), w5_cell(ps, need_sort, num_steps)):
                rows.append(row)
                print(f"{row['workload']} ps={ps} need_sort={need_sort}: compiled "
                      f"{row['compiled']:.2f} µs, numpy {row['numpy']:.2f} µs "
                      f"({row['numpy'] / row['compiled']:.2f}x)", flush=True)
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "host_backends.json").write_text(json.dumps(rows, indent=1) + "\n")
    ratios = [r["numpy"] / r["compiled"] for r in rows]
    (ns.out / "host_backends.md").write_text(
        f"kvpool's CPU backends at {POOL_PAGES:,} pages: µs per W3 call / W5 step, medians "
        "of interleaved windows (W5: both replayed step by step in turn); numpy / compiled "
        f"{min(ratios):.2f}-{max(ratios):.2f} (median {statistics.median(ratios):.2f})\n\n"
        + markdown(rows))
    print(f"wrote {ns.out / 'host_backends.md'}")
    differ = [r for r in rows if r.get("same_slots") is False]
    for r in differ:
        print(f"W5 ps={r['page_size']} need_sort={r['need_sort']}: the backends' slots differ")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
