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


def evaluate(records: list[Record], need_sorts: list[bool],
             mem: list[Record] | None = None) -> list[Verdict]:
    """Every target: the W5 trace against vLLM and SGLang, W3 against its output floor, W1
    flatness, W2 decode (two peers), W3 and W4 against SGLang, metadata bytes per page."""
    idx = index(records)
    return [*_trace(idx), _floor(idx), _scaling(idx), *_decode(idx, need_sorts), _extend(idx),
            _segments(idx), _memory(mem or [])]


def _worst(rows: list[tuple[float, str]], higher_is_worse: bool) -> tuple[float, str] | None:
    if not rows:
        return None
    return max(rows) if higher_is_worse else min(rows)


def _trace(idx: dict[tuple[Any, ...], dict[str, Record]]) -> list[Verdict]:
    """W5 at every pool size and need_sort: ps 16 against vLLM and SGLang, ps 1 against SGLang."""
    vs_vllm: list[tuple[float, str]] = []
    vs_sglang: list[tuple[float, str]] = []
    token: list[tuple[float, str]] = []
    for key in idx:
        wl, _, _, ps, ns, n = key
        if wl != "w5_trace" or ns is None:
            continue
        kv, sg = _med(idx, key, "kvpool"), _med(idx, key, "sglang")
        vl = _med(idx, (*key[:4], None, n), "vllm")
        row = f"ps={ps} need_sort={ns} P={n}"
        if kv is None:
            continue
        if ps == 1 and sg is not None:
            token.append((kv / sg, f"{row}: kvpool {kv:.1f} µs vs SGLang {sg:.1f} µs"))
        if ps == 16 and vl is not None:
            vs_vllm.append((kv / vl, f"{row}: kvpool {kv:.1f} µs vs vLLM {vl:.1f} µs"))
        if ps == 16 and sg is not None:
            vs_sglang.append((sg / kv, f"{row}: kvpool {kv:.1f} µs vs SGLang {sg:.1f} µs"))
    out = []
    for name, rows, limit, worse_high, unit in (
            ("serving trace ps 16: kvpool <= 1.0x vLLM BlockPool per step", vs_vllm, 1.0,
             True, "x vLLM"),
            ("serving trace ps 16: >= 5x faster than SGLang", vs_sglang, 5.0, False,
             "x faster"),
            ("serving trace token allocator: <= 0.5x SGLang", token, 0.5, True, "x SGLang")):
        w = _worst(rows, worse_high)
        if w is None:
            out.append(Verdict(name, "n/a", "-", "needs the W5 rows of both"))
            continue
        ok = w[0] <= limit if worse_high else w[0] >= limit
        out.append(Verdict(name, "PASS" if ok else "MISS", f"worst {w[0]:.2f}{unit}", w[1]))
    return out


def _floor(idx: dict[tuple[Any, ...], dict[str, Record]]) -> Verdict:
    """W3 against the output floor measured beside it (every ps, need_sort, pool size)."""
    name = "alloc_extend batch 64: <= 3x the output floor (one numpy op writing the result)"
    rows: list[tuple[float, str]] = []
    for key in idx:
        wl, _, _, ps, ns, n = key
        if wl != "w3_extend" or ns is None:
            continue
        kv, fl = _med(idx, key, "kvpool"), _med(idx, (*key[:4], None, n), "floor")
        if kv is None or fl is None:
            continue
        sg = _med(idx, key, "sglang")
        vs = f", SGLang {sg / kv:.1f}x slower" if sg else ""
        rows.append((kv / fl, f"ps={ps} need_sort={ns} P={n}: kvpool {kv:.1f} µs vs floor "
                              f"{fl:.2f} µs{vs}"))
    w = _worst(rows, True)
    if w is None:
        return Verdict(name, "n/a", "-", "needs kvpool and floor rows")
    return Verdict(name, "PASS" if w[0] <= 3 else "MISS", f"worst {w[0]:.1f}x floor", w[1])


def _memory(mem: list[Record]) -> Verdict:
    """kvpool's metadata bytes per page, less its ownership guard's bit per page, <= SGLang's,
    fresh and after churn, every cell (the guard, which SGLang lacks, is shown beside)."""
    name = "metadata bytes per page <= SGLang's + the guard's 1 bit (fresh and after churn)"
    by = {(m["kind"], m["page_size"], m["need_sort"], m["num_pages"], m["impl"]): m for m in mem}
    rows: list[tuple[float, str]] = []
    for (kind, ps, ns, n, impl), m in by.items():
        sg = by.get((kind, ps, ns, n, "sglang"))
        if impl != "kvpool" or sg is None:
            continue
        guard = m.get("guard_bytes_per_page", 0.0)
        for field in ("fresh_bytes_per_page", "churned_bytes_per_page"):
            ratio = (m[field] - guard) / sg[field]
            rows.append((ratio, f"{kind} ps={ps} need_sort={ns} P={n} "
                                f"{field.split('_')[0]}: {m[field]:.2f} (guard {guard:.3f}) "
                                f"vs {sg[field]:.2f}"))
    w = _worst(rows, True)
    if w is None:
        return Verdict(name, "n/a", "-", "needs the memory rows of kvpool and SGLang")
    return Verdict(name, "PASS" if w[0] <= 1.0 else "MISS", f"worst {w[0]:.2f}x SGLang", w[1])


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
