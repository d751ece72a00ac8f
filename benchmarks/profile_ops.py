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

from torch.profiler import ProfilerActivity, profile

from benchmarks.workloads import Case, Config, w1_alloc_free, w2_decode, w3_extend, w4_free_row

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


def markdown(rows: list[dict[str, Any]]) -> str:
    """Table: top-level aten operators per call and where the self time goes."""
    lines = ["| workload | variant | ps | P | impl | aten ops / call | top self time (µs / call) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        top = ", ".join(f"{n.removeprefix('aten::')} {us:.1f}" for n, us in r["top_self_us"])
        lines.append(f"| {r['workload']} | {r['variant']} | {r['page_size']} | {r['num_pages']} "
                     f"| {r['impl']} | {r['ops_per_call']:.1f} | {top} |")
    return "\n".join(lines) + "\n"
