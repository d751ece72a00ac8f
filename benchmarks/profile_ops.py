"""Operator counts per call: why a call costs what it costs on the CPU.

On the CPU an allocator call is dominated by the fixed cost of each PyTorch operator it
dispatches (a few µs each) unless the tensors are large. For the cells the targets read (largest
pool, need_sort off), this profiles a few calls of each implementation with ``torch.profiler``
and reports the top-level operators per call and the operators with the most self time.
vLLM's ``BlockPool`` runs no tensor operators and is left out.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.workloads import (
    DECODE_BATCH,
    EXTEND_BATCH,
    Case,
    Config,
    extend_batch,
    extend_inputs,
    new_page_positions,
    w1_alloc_free,
    w2_decode,
    w3_extend,
    w4_free_row,
)

PROFILE_CALLS = 20


def _wanted(c: Case, biggest: int) -> bool:
    if c.impl == "vllm" or c.need_sort is not False or c.num_pages != biggest:
        return False
    if c.workload == "w1_alloc_free":
        return c.variant in ("k=1", "k=256") and c.page_size == 16
    if c.workload == "w2_decode":
        return c.page_size == 16
    if c.workload == "w3_extend":
        return c.page_size == 16
    return c.workload == "w4_free_row"


def profile_cases(cfg: Config) -> list[dict[str, Any]]:
    """Profile the target cells; one dict per (case): ops per call, top self-time operators."""
    biggest = max(cfg.sizes)
    out: list[dict[str, Any]] = []
    for fn in (w1_alloc_free, w2_decode, w3_extend, w4_free_row):
        for c in fn(cfg):
            if not _wanted(c, biggest):
                continue
            step, cleanup = c.make()
            for _ in range(5):
                step()
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(PROFILE_CALLS):
                    step()
            if cleanup is not None:
                cleanup()
            top_level: Counter[str] = Counter()
            self_us: Counter[str] = Counter()
            for evt in prof.events():
                if evt.name.startswith("aten::"):
                    self_us[evt.name] += evt.self_cpu_time_total
                    if evt.cpu_parent is None:
                        top_level[evt.name] += 1
            total_ops = sum(top_level.values()) / PROFILE_CALLS
            top = [(name, us / PROFILE_CALLS) for name, us in self_us.most_common(4)]
            out.append({"workload": c.workload, "variant": c.variant, "page_size": c.page_size,
                        "num_pages": c.num_pages, "impl": c.impl, "ops_per_call": total_ops,
                        "top_self_us": top})
    return out


def _top_level_ops(call: Any, calls: int = PROFILE_CALLS) -> float:
    """Top-level ``aten::`` operators per ``call()`` (each call profiled on its own)."""
    total = 0
    for _ in range(calls):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            call()
        total += sum(1 for e in prof.events() if e.name.startswith("aten::")
                     and e.cpu_parent is None)
    return total / calls


def fallback_op_counts() -> list[dict[str, Any]]:
    """Torch operators per ``alloc_extend`` / ``alloc_decode`` call of kvpool's torch path
    (the CUDA fallback when Triton is absent, forced here on the CPU), and of the CPU paths
    (numpy, and the compiled one where it is built).

    On CUDA each of these operators is one kernel launch; the Triton path replaces the layout
    operators by one kernel per call (launches are measured in the CUDA section when a GPU is
    present). W3's batch (64 requests, ps 16) and W2's decode batch (256 requests crossing a
    page); the new pages are given back between calls, outside the profile.
    """
    from kvpool.impl.backend import TorchOps
    from kvpool.impl.native_ops import NativeOps, native_available
    from kvpool.impl.numpy_ops import NumpyOps

    rows = [*_backend_counts("torch (CUDA fallback)", TorchOps),
            *_backend_counts("numpy (CPU without a C compiler)", NumpyOps)]
    if native_available():
        rows += _backend_counts("compiled (CPU default)", NativeOps)
    return rows


def _backend_counts(backend: str, ops_cls: Any) -> list[dict[str, Any]]:
    from kvpool.impl import PagedTokenToKVPoolAllocator, base

    ps = 16
    original = base.ops_for
    base.ops_for = lambda page_size, device: ops_cls(page_size, device)
    try:
        a = PagedTokenToKVPoolAllocator(100_000 * ps, ps, torch.float16, "cpu", None, False)
    finally:
        base.ops_for = original
    prefix, seq = extend_batch(ps)
    _rows, args = extend_inputs(a, prefix, seq, "cpu")  # on the CPU: one tensor per length
    new_pos = new_page_positions(prefix, seq, ps)
    owned = a.alloc(DECODE_BATCH * ps)
    assert owned is not None
    dseq = torch.full((DECODE_BATCH,), ps + 1, dtype=torch.int64)
    dlast = owned[::ps] + (ps - 1)
    state: dict[str, Any] = {}

    def extend() -> None:
        state["out"] = a.alloc_extend(*args)
        state["new"] = new_pos

    def decode() -> None:
        state["out"] = a.alloc_decode(dseq, dseq, dlast)
        state["new"] = slice(None)

    out: list[dict[str, Any]] = []
    for name, call, batch in (("alloc_extend", extend, EXTEND_BATCH),
                              ("alloc_decode", decode, DECODE_BATCH)):
        counts = []
        for _ in range(3):
            counts.append(_top_level_ops(call, 1))
            a.free(state["out"][state["new"]])  # the new pages back, outside the profile
        out.append({"call": name, "backend": backend, "ops_per_call": min(counts),
                    "batch": batch})
    return out


def fallback_markdown(rows: list[dict[str, Any]]) -> str:
    """Table: torch operators per call of each backend (kvpool's paged allocator, ps 16)."""
    lines = ["| call | batch | kvpool backend | torch operators / call |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['call']} | {r['batch']} | {r['backend']} | {r['ops_per_call']:.0f} |")
    return "\n".join(lines) + "\n"


def markdown(rows: list[dict[str, Any]]) -> str:
    """Table: top-level aten operators per call and where the self time goes."""
    lines = ["| workload | variant | ps | P | impl | aten ops / call | top self time (µs / call) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        top = ", ".join(f"{n.removeprefix('aten::')} {us:.1f}" for n, us in r["top_self_us"])
        lines.append(f"| {r['workload']} | {r['variant']} | {r['page_size']} | {r['num_pages']} "
                     f"| {r['impl']} | {r['ops_per_call']:.1f} | {top} |")
    return "\n".join(lines) + "\n"
