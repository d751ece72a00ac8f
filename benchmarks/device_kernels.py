"""The Triton kernels' own costs on a device: a one-launch floor and the cold start.

Used by :mod:`benchmarks.device_calls` on CUDA. :func:`launch_floor` times one Triton launch
that writes as many int64 values as a call returns (the least any one-kernel call costs on that
machine); :func:`specialisation` runs changing extend batches through kvpool's extend kernel as
shipped and under Triton's default integer specialisation (seconds of the pass, compiles
included, and variants compiled).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from benchmarks.device_probes import call_launches, call_syncs, fmt, sync, timed


def _variants(kernel: Any) -> int | None:
    """Compiled variants a Triton JIT function holds (None where this Triton hides them)."""
    try:
        return sum(len(entry[0]) for entry in kernel.device_caches.values())
    except (AttributeError, TypeError, IndexError):
        return None


def specialisation(device: str, num_batches: int = 120, seed: int = 5) -> list[dict[str, Any]]:
    """Cold-start cost of kvpool's extend kernel over changing batches, as shipped (host ints
    not specialised on) beside the same kernel under Triton's default specialisation.

    ``num_batches`` random extend batches (1-128 requests, ps 16) run once through each; the
    figures are the seconds of that pass (compiles included) and the variants compiled.
    """
    import random

    import triton
    from kvpool.impl import triton_ops

    shipped = triton_ops._extend_kernel
    default = triton.jit(shipped.fn)  # the same function, every int specialised
    rng = random.Random(seed)
    batches = []
    for _ in range(num_batches):
        bs = rng.randint(1, 128)
        pre = [rng.choice([0, rng.randint(1, 300)]) for _ in range(bs)]
        seq = [p + rng.randint(1, 200) for p in pre]
        batches.append((pre, seq))
    rows = []
    for label, kernel in (("kvpool (ints not specialised)", shipped),
                          ("Triton default specialisation", default)):
        ops = triton_ops.TritonOps(16, device)
        ops_kernel = triton_ops._extend_kernel
        triton_ops._extend_kernel = kernel
        try:
            sync(device)
            t0 = time.perf_counter()
            for pre, seq in batches:
                pre_d = torch.tensor(pre, dtype=torch.int64, device=device)
                seq_d = torch.tensor(seq, dtype=torch.int64, device=device)
                last_d = torch.tensor([p * 16 - 1 if p else -1 for p in pre],
                                      dtype=torch.int64, device=device)
                num_pages = sum(-(-s // 16) - -(-p // 16) for p, s in zip(pre, seq, strict=True))
                pages = torch.arange(1, num_pages + 1, dtype=torch.int64, device=device)
                ops.extend_slots(pre_d, seq_d, last_d, pages, sum(seq) - sum(pre))
            sync(device)
            seconds = time.perf_counter() - t0
        finally:
            triton_ops._extend_kernel = ops_kernel
        rows.append({"kernel": label, "batches": num_batches, "seconds": seconds,
                     "variants": _variants(kernel)})
        print(f"  specialisation: {label:32} {num_batches} batches {seconds:7.2f} s, "
              f"variants {_variants(kernel)}", flush=True)
    return rows


def launch_floor(device: str, num_tokens: int) -> dict[str, Any] | None:
    """Host and event µs of one Triton launch that writes ``num_tokens`` int64 values: what
    any one-kernel call that returns that many slots costs at least (None without Triton)."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit(do_not_specialize=["n"])
    def _fill(out_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + i, i, mask=i < n)

    def call() -> torch.Tensor:
        out = torch.empty(num_tokens, dtype=torch.int64, device=device)
        _fill[(triton.cdiv(num_tokens, 1024),)](out, num_tokens, BLOCK=1024)
        return out

    for _ in range(3):
        call()
    host_us, event_us = timed(call, device)
    return {"impl": "floor", "num_slots": num_tokens, "host_us": host_us, "event_us": event_us,
            "launches": call_launches(call, device), "syncs": call_syncs(call, device)}


def specialisation_markdown(rows: list[dict[str, Any]]) -> str:
    """The cold-start table (empty without rows)."""
    if not rows:
        return ""
    lines = ["", f"**Cold start over {rows[0]['batches']} changing extend batches** (ps 16, "
             "compiles included)", "", "| kernel | seconds | variants compiled |", "|---|---|---|"]
    lines += [f"| {r['kernel']} | {r['seconds']:.2f} | {fmt(r['variants'], 'd')} |"
              for r in rows]
    return "\n".join(lines) + "\n"
