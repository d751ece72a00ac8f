"""Per-call device figures of ``alloc_extend`` and ``alloc_decode``, kvpool beside SGLang.

``python -m benchmarks.device_calls [--out DIR] [--device cuda]`` builds, for every page size
in ``PAGE_SIZES``, a fresh paged allocator of ``NUM_PAGES`` pages per implementation (kvpool's
default backend, kvpool's torch fallback with ``KVPOOL_TRITON=0``, SGLang 0.5.23 when it
imports) and measures the two calls alone, never a restore step beside them:

- ``launches``: CUDA kernels, memcpys and memsets ``torch.profiler`` records over
  ``PROBE_CALLS`` consecutive calls, per call (on the CPU: torch operators per call);
- ``syncs``: synchronising calls ``torch.cuda.set_sync_debug_mode("warn")`` reports over
  ``PROBE_CALLS`` calls, per call (CUDA only);
- ``host_us``: the median over ``WINDOWS`` windows of ``CALLS_PER_WINDOW`` consecutive calls
  of the host time per call (what the scheduler's thread pays);
- ``event_us``: the same windows' device-timeline span from CUDA events, per call;
- ``same_slots``: every call's result equals the first implementation's (kvpool's default),
  call for call from the same fresh state and inputs: SGLang's order on the device;
- a ``floor`` row per cell on CUDA: one Triton launch writing as many int64 values as the call
  returns (the least a one-kernel call costs on that machine).

On CUDA it also runs :func:`benchmarks.device_kernels.specialisation`: the cold-start cost of
the extend kernel over changing batches, as shipped and under Triton's default integer
specialisation.

The batches are W3's (64 requests, mixed unaligned prefixes, about 8.7k new tokens at ps 16)
and W2's (256 requests, each opening a page). The pool is large enough that no call merges or
runs short, so consecutive calls need no restore. Writes ``device_calls.json`` and
``device_calls.md`` into ``--out`` and prints the table. Exits 1 when an implementation's slots
differ from kvpool's outside a registered divergence (``KNOWN``), else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks import device_kernels
from benchmarks.adapters import make_allocator
from benchmarks.device_probes import (
    CALLS_PER_WINDOW,
    PROBE_CALLS,
    WINDOWS,
    Call,
    call_launches,
    call_syncs,
    fmt,
    timed,
)
from benchmarks.workloads import DECODE_BATCH, extend_batch, extend_inputs

PAGE_SIZES = (1, 16, 64)
NUM_PAGES = 400_000
# Cells where a peer differs from the spec by a registered divergence
# (kvpool.oracle.peers.divergences).
KNOWN = {("sglang", "alloc_decode", 1): "SGL-DECODE-PS1"}


def _extend_call(alloc: Any, ps: int, device: str) -> Call:
    """W3's batch: prefixes taken first (their last slots are ``last_loc``), then the call."""
    rows, args = extend_inputs(alloc, *extend_batch(ps), device)

    def call() -> Any:
        _ = rows  # the prefix rows own their pages for the call's lifetime
        return alloc.alloc_extend(*args)
    return call


def _decode_call(alloc: Any, ps: int, device: str) -> Call:
    """W2's batch: 256 requests, each owning one page and opening the next (``seq = ps + 1``)."""
    base = alloc.alloc(DECODE_BATCH * ps)
    seq = ps + 1
    seq_cpu = torch.full((DECODE_BATCH,), seq, dtype=torch.int64)
    seq_d = seq_cpu.to(device)
    last_loc = (base[::ps] // ps) * ps + (seq - 2)
    return lambda: alloc.alloc_decode(seq_d, seq_cpu, last_loc)


CALLS: dict[str, Callable[[Any, int, str], Call]] = {
    "alloc_extend": _extend_call, "alloc_decode": _decode_call}


def _results(call: Call, device: str, num_calls: int) -> list[list[int]]:
    outs = [call() for _ in range(num_calls)]
    return [o.tolist() if o is not None else [] for o in outs]


def probe(name: str, module: Any, call_name: str, ps: int, device: str) -> dict[str, Any]:
    """Every figure of one (implementation, call, page size) cell, on fresh allocators."""
    def fresh() -> Call:
        alloc = make_allocator(module, "paged", NUM_PAGES, ps, False, device)
        return CALLS[call_name](alloc, ps, device)

    slots = _results(fresh(), device, 3)  # the first calls from a fresh state
    call = fresh()
    for _ in range(3):  # warm-up (Triton compiles on its first launch)
        call()
    launches = call_launches(call, device)
    syncs = call_syncs(call, device)
    host_us, event_us = timed(call, device)
    return {"impl": name, "call": call_name, "page_size": ps, "device": device,
            "launches": launches, "syncs": syncs, "host_us": host_us, "event_us": event_us,
            "num_slots": len(slots[0]), "slots": slots}


def implementations(device: str) -> dict[str, Any]:
    """name -> (module, environment) for every implementation that imports here."""
    import kvpool.impl as kvpool_impl

    impls: dict[str, Any] = {"kvpool": (kvpool_impl, {})}
    if device.startswith("cuda"):
        impls["kvpool-torch"] = (kvpool_impl, {"KVPOOL_TRITON": "0"})
    try:
        from kvpool.oracle.peers.peer_import import load_sglang_allocators

        impls["sglang"] = (load_sglang_allocators(), {})
    except Exception as exc:  # a missing peer is reported, not fatal
        print(f"SKIP sglang: {type(exc).__name__}: {exc}")
    return impls


def run(device: str) -> list[dict[str, Any]]:
    """Probe every cell; ``same_slots`` compares each result with kvpool's default backend."""
    rows: list[dict[str, Any]] = []
    for ps in PAGE_SIZES:
        for call_name in CALLS:
            first: list[list[int]] | None = None
            for name, (module, env) in implementations(device).items():
                saved = {k: os.environ.get(k) for k in env}
                os.environ.update(env)
                try:
                    row = probe(name, module, call_name, ps, device)
                except Exception as exc:
                    print(f"  ERROR {name} {call_name} ps={ps}: {type(exc).__name__}: {exc}")
                    continue
                finally:
                    for k, v in saved.items():
                        if v is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = v
                slots = row.pop("slots")
                first = slots if first is None else first
                row["same_slots"] = slots == first
                row["known"] = KNOWN.get((name, call_name, ps))
                rows.append(row)
                print(_line(row), flush=True)
            cuda_floor = rows and device.startswith("cuda")
            floor = device_kernels.launch_floor(device, rows[-1]["num_slots"]) \
                if cuda_floor else None
            if floor is not None:
                floor.update(call=call_name, page_size=ps, device=device, same_slots=True,
                             known=None)
                rows.append(floor)
                print(_line(floor), flush=True)
    return rows


def _line(r: dict[str, Any]) -> str:
    return (f"  {r['call']:12} ps={r['page_size']:<3} {r['impl']:12} slots {r['num_slots']:5}"
            f"  launches {fmt(r['launches'], '.1f'):>5}  syncs {fmt(r['syncs'], '.1f'):>4}"
            f"  host {r['host_us']:8.1f} µs  event {fmt(r['event_us'], '.1f'):>7} µs"
            f"  same slots {_same(r)}")


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The table of one run, with the machine it ran on."""
    lines = [f"**Device calls** ({meta['device_name']}; torch {meta['torch']}, triton "
             f"{meta['triton']}; {NUM_PAGES} pages, windows of {CALLS_PER_WINDOW} calls, median "
             f"of {WINDOWS}; launches and syncs over {PROBE_CALLS} calls)", "",
             "| call | ps | impl | slots | launches / call | syncs / call | host µs | "
             "event µs | same slots as kvpool |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['call']} | {r['page_size']} | {r['impl']} | {r['num_slots']} | "
                     f"{fmt(r['launches'], '.1f')} | {fmt(r['syncs'], '.1f')} | "
                     f"{r['host_us']:.1f} | {fmt(r['event_us'], '.1f')} | "
                     f"{_same(r)} |")
    return "\n".join(lines) + "\n"


def _same(r: dict[str, Any]) -> str:
    if r["impl"] == "floor":
        return "-"
    if r["same_slots"]:
        return "yes"
    return f"no ({r['known']})" if r.get("known") else "NO"


def main(argv: list[str] | None = None) -> int:
    """Parse, probe, write ``device_calls.json`` / ``.md``; 1 if slots differ unexpectedly."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.device_calls", description=__doc__)
    p.add_argument("--out", default="benchmarks/results", help="output folder")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "absent"
    meta = {"device": args.device, "torch": torch.__version__, "triton": triton_version,
            "device_name": (torch.cuda.get_device_name(0) if args.device.startswith("cuda")
                            else "CPU"),
            "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
    print(f"device calls on {meta['device_name']} (torch {meta['torch']}, triton "
          f"{meta['triton']})")
    rows = run(args.device)
    spec_rows = device_kernels.specialisation(args.device) if args.device.startswith("cuda") \
        else []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "device_calls.json").write_text(json.dumps(
        {"meta": meta, "rows": rows, "specialisation": spec_rows}, indent=1))
    md = markdown(rows, meta) + device_kernels.specialisation_markdown(spec_rows)
    (out / "device_calls.md").write_text(md)
    print(md)
    differ = [r for r in rows if not r["same_slots"] and not r.get("known")]
    for r in differ:
        print(f"DIFFERENT SLOTS: {r['impl']} {r['call']} ps={r['page_size']} (not a registered "
              "divergence)")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
