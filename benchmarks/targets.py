"""The performance targets, evaluated on ratios measured in one run.

Each target names the rows it reads; when the run lacks them (a peer missing, ``--quick`` without
10^6 pages) it reports ``n/a`` with the reason instead of a verdict. A target that spans several
rows (page sizes, need_sort values, pool sizes) is judged on its worst row, which is printed.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from benchmarks.report import index

Record = dict[str, Any]
BIG, SMALL = 10**6, 10**4


@dataclass
class Verdict:
    """One target: PASS / MISS / n/a, the measured figure and the worst row."""

    name: str
    status: str
    measured: str
    detail: str

    def line(self) -> str:
        """The printed line."""
        return f"{self.status:4} {self.name}: {self.measured}  [{self.detail}]"


def _med(idx: dict[tuple[Any, ...], dict[str, Record]], key: tuple[Any, ...],
         impl: str) -> float | None:
    r = idx.get(key, {}).get(impl)
    return None if r is None else float(r["median_us"])


def evaluate(records: list[Record], need_sorts: list[bool]) -> list[Verdict]:
    """All four targets (five verdicts: the decode target has two peers)."""
    idx = index(records)
    return [_scaling(idx), *_decode(idx, need_sorts), _extend(idx), _segments(idx)]


def _scaling(idx: dict[tuple[Any, ...], dict[str, Record]]) -> Verdict:
    name = "alloc+free at 1e6 pages <= 1.2x at 1e4 (kvpool; SGLang 7.8-20x)"
    worst: tuple[float, str] | None = None
    sg_worst = 0.0
    all_ratios: list[float] = []
    for key in idx:
        wl, variant, kind, ps, ns, n = key
        if wl != "w1_alloc_free" or n != BIG or ns is None:
            continue
        small = (wl, variant, kind, ps, ns, SMALL)
        kv_big, kv_small = _med(idx, key, "kvpool"), _med(idx, small, "kvpool")
        if kv_big is None or kv_small is None:
            continue
        r = kv_big / kv_small
        all_ratios.append(r)
        row = f"{kind} ps={ps} need_sort={ns} {variant}"
        if worst is None or r > worst[0]:
            worst = (r, row)
        sg_big, sg_small = _med(idx, key, "sglang"), _med(idx, small, "sglang")
        if sg_big is not None and sg_small is not None:
            sg_worst = max(sg_worst, sg_big / sg_small)
    if worst is None:
        return Verdict(name, "n/a", "-", "needs kvpool rows at 1e4 and 1e6 pages")
    status = "PASS" if worst[0] <= 1.2 else "MISS"
    sg = f"; SGLang worst {sg_worst:.1f}x" if sg_worst else ""
    typical = statistics.median(all_ratios)
    return Verdict(name, status, f"worst {worst[0]:.2f}x",
                   f"{worst[1]}; median over {len(all_ratios)} rows {typical:.2f}x{sg}")


def _decode(idx: dict[tuple[Any, ...], dict[str, Record]], need_sorts: list[bool]) -> list[Verdict]:
    out = []
    for peer, need in (("sglang", 6.0), ("vllm", 1.5)):
        name = (f"decode step, 256 new pages, ps 16, 1e6 pages: >= {need}x faster than "
                f"{'SGLang' if peer == 'sglang' else 'vLLM batched get_new_blocks+free_blocks'}")
        worst: tuple[float, str] | None = None
        for ns in need_sorts:
            key = ("w2_decode", "new_page", "paged", 16, ns, BIG)
            kv = _med(idx, key, "kvpool")
            pk = key if peer == "sglang" else (*key[:4], None, BIG)
            other = _med(idx, pk, peer)
            if kv is None or other is None:
                continue
            speedup = other / kv
            if worst is None or speedup < worst[0]:
                worst = (speedup, f"need_sort={ns}: kvpool {kv:.1f} µs vs {other:.1f} µs")
        if worst is None:
            out.append(Verdict(name, "n/a", "-", f"needs kvpool and {peer} at 1e6 pages"))
        else:
            out.append(Verdict(name, "PASS" if worst[0] >= need else "MISS",
                               f"worst {worst[0]:.2f}x faster", worst[1]))
    return out


def _worst_speedup(idx: dict[tuple[Any, ...], dict[str, Record]], workload: str,
                   kv_variant: str, sg_variant: str) -> tuple[float, str] | None:
    worst: tuple[float, str] | None = None
    for key in idx:
        wl, variant, kind, ps, ns, n = key
        if wl != workload or variant != kv_variant or ns is None:
            continue
        kv = _med(idx, key, "kvpool")
        sg = _med(idx, (wl, sg_variant, kind, ps, ns, n), "sglang")
        if kv is None or sg is None:
            continue
        s = sg / kv
        if worst is None or s < worst[0]:
            worst = (s, f"ps={ps} need_sort={ns} P={n}: kvpool {kv:.1f} µs vs SGLang {sg:.1f} µs")
    return worst


def _extend(idx: dict[tuple[Any, ...], dict[str, Record]]) -> Verdict:
    name = "alloc_extend batch 64: >= 20x faster than SGLang's CPU path"
    w = _worst_speedup(idx, "w3_extend", "bs=64", "bs=64")
    if w is None:
        return Verdict(name, "n/a", "-", "needs kvpool and sglang rows")
    return Verdict(name, "PASS" if w[0] >= 20 else "MISS", f"worst {w[0]:.1f}x faster", w[1])


def _segments(idx: dict[tuple[Any, ...], dict[str, Record]]) -> Verdict:
    name = "free_segments of a 32k row (ps 16): >= 3x faster than SGLang's free"
    w = _worst_speedup(idx, "w4_free_row", "free_segments", "free")
    if w is None:
        return Verdict(name, "n/a", "-", "needs kvpool and sglang rows")
    return Verdict(name, "PASS" if w[0] >= 3 else "MISS", f"worst {w[0]:.1f}x faster", w[1])
