"""W5's allocator calls on a device, call kind by call kind, kvpool beside SGLang.

``python -m benchmarks.device_trace [--out DIR] [--device cuda] [--steps N]`` replays the W5
serving trace (:mod:`benchmarks.trace`, 10^5 pages, page sizes 1 and 16, need_sort off) on each
implementation twice: once timing every allocator call on the host (``time.perf_counter``
around the call, what the scheduler's thread pays), once under ``torch.profiler`` counting the
launches inside each call (on CUDA: the runtime and driver calls that launch kernels, copies
and fills; on the CPU: top-level torch operators). The first ``WARM_STEPS`` steps of each replay
are left out (Triton compiles on first launches). Per call kind it reports calls per step, the
median and mean host µs per call (the mean includes compiles of batch shapes met later) and
launches per call; the ``step`` row gives them per step. Writes
``device_trace.json`` and ``device_trace.md``.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.adapters import make_allocator
from benchmarks.trace import make_trace, replay

NUM_PAGES = 100_000
WARM_STEPS = 50
# CUDA runtime and driver calls that put work on the device (torch's and Triton's launches)
RUNTIME = re.compile(r"^cu(da)?(LaunchKernel|Memcpy|Memset)")
METHODS = ("alloc", "free", "free_group_begin", "free_group_end", "alloc_extend", "alloc_decode")


def _wrap(alloc: Any, around: Callable[[str, Callable[[], Any]], Any]) -> None:
    """Route each of ``METHODS`` of ``alloc`` through ``around(name, call)``."""
    for name in METHODS:
        method = getattr(alloc, name)

        def wrapped(*args: Any, _m: Any = method, _n: str = name, **kwargs: Any) -> Any:
            return around(_n, lambda: _m(*args, **kwargs))
        setattr(alloc, name, wrapped)


def _replay(module: Any, ps: int, device: str, steps: int,
            around: Callable[[str, Callable[[], Any]], Any]) -> tuple[Any, Any]:
    kind = "token" if ps == 1 else "paged"
    alloc = make_allocator(module, kind, NUM_PAGES, ps, False, device)
    held = alloc.alloc((NUM_PAGES // 2) * ps)
    gen = replay(alloc, make_trace(ps, steps, NUM_PAGES // 2 - 64), ps, device)
    for _ in range(WARM_STEPS):
        next(gen)
    _wrap(alloc, around)
    return gen, held


def host_times(module: Any, ps: int, device: str,
               steps: int) -> tuple[dict[str, list[float]], list[float]]:
    """Host µs of every call after the warm steps, by call kind, and of every step (its calls
    summed)."""
    times: dict[str, list[float]] = collections.defaultdict(list)
    per_step = [0.0]

    def around(name: str, call: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        out = call()
        us = (time.perf_counter() - t0) * 1e6
        times[name].append(us)
        per_step[-1] += us
        return out

    gen, _held = _replay(module, ps, device, steps, around)
    for _ in gen:
        per_step.append(0.0)
    return times, per_step[:-1]


def launches(module: Any, ps: int, device: str, steps: int) -> dict[str, int]:
    """Launches (CPU: top-level torch operators) inside each call kind, summed."""
    from torch.profiler import ProfilerActivity, profile, record_function

    def around(name: str, call: Callable[[], Any]) -> Any:
        with record_function("kvcall::" + name):
            return call()

    gen, _held = _replay(module, ps, device, steps, around)
    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in gen:
            pass
        if cuda:
            torch.cuda.synchronize()
    counts: dict[str, int] = collections.Counter()
    for evt in prof.events():
        if cuda:
            # the runtime / driver call that issued a kernel, copy or fill: a host event whose
            # parents lead up to the call's range
            if str(evt.device_type).endswith("CUDA") or not RUNTIME.search(evt.name):
                continue
        elif not evt.name.startswith("aten::") or evt.cpu_parent is None \
                or not evt.cpu_parent.name.startswith("kvcall::"):
            continue
        parent = evt.cpu_parent
        while parent is not None and not parent.name.startswith("kvcall::"):
            parent = parent.cpu_parent
        if parent is not None:
            counts[parent.name.removeprefix("kvcall::")] += 1
    return counts


def rows_for(name: str, module: Any, ps: int, device: str, steps: int) -> list[dict[str, Any]]:
    """One row per call kind and a ``step`` row, for one implementation and page size."""
    times, per_step = host_times(module, ps, device, steps)
    counts = launches(module, ps, device, steps)
    measured = len(per_step)
    rows = []
    for kind in METHODS:
        if not times.get(kind):
            continue
        n = len(times[kind])
        rows.append({"impl": name, "page_size": ps, "call": kind, "calls_per_step": n / measured,
                     "host_us": statistics.median(times[kind]),
                     "mean_us": statistics.fmean(times[kind]),
                     "launches": counts.get(kind, 0) / n})
    rows.append({"impl": name, "page_size": ps, "call": "step", "calls_per_step": None,
                 "host_us": statistics.median(per_step), "mean_us": statistics.fmean(per_step),
                 "launches": sum(counts.values()) / measured})
    return rows


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The table of one run."""
    lines = [f"**W5 calls on {meta['device_name']}** (torch {meta['torch']}; {NUM_PAGES} pages, "
             f"need_sort off, {meta['steps']} steps, the first {WARM_STEPS} not counted; host µs "
             "per call: median and mean (the mean includes Triton's compiles of new batch "
             "shapes); launches per call; the step row: per step)", "",
             "| ps | call | impl | calls / step | host µs median | host µs mean | launches |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        per_step = "-" if r["calls_per_step"] is None else f"{r['calls_per_step']:.2f}"
        lines.append(f"| {r['page_size']} | {r['call']} | {r['impl']} | {per_step} | "
                     f"{r['host_us']:.1f} | {r['mean_us']:.1f} | {r['launches']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Parse, replay, write ``device_trace.json`` / ``.md``; 0 unless the harness breaks."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.device_trace", description=__doc__)
    p.add_argument("--out", default="benchmarks/results", help="output folder")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=400, help="trace steps per replay")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    from benchmarks.device_calls import implementations

    cuda = args.device.startswith("cuda")
    meta = {"device": args.device, "torch": torch.__version__, "steps": args.steps,
            "device_name": torch.cuda.get_device_name(0) if cuda else "CPU",
            "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
    rows: list[dict[str, Any]] = []
    for ps in (1, 16):
        for name, (module, env) in implementations(args.device).items():
            if env:  # the torch fallback is left out: device_calls covers it
                continue
            try:
                rows += rows_for(name, module, ps, args.device, args.steps)
            except Exception as exc:
                print(f"  ERROR {name} ps={ps}: {type(exc).__name__}: {exc}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "device_trace.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    md = markdown(rows, meta)
    (out / "device_trace.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
