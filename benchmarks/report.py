"""Turn result records into paired ratios, Markdown tables, target verdicts and plots.

Ratios are ``kvpool / peer`` medians of rows measured in the same run with the same key
(workload, variant, allocator kind, page size, need_sort, pool size). vLLM has no need_sort: its
row (``need_sort=None``) pairs with both kvpool settings. Below 1 means kvpool is faster.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

Record = dict[str, Any]

# vLLM row to compare with when the variant has no vLLM analogue of its own.
VLLM_VARIANT = {("w4_free_row", "free_segments"): "free"}


def _key(r: Record) -> tuple[Any, ...]:
    return (r["workload"], r["variant"], r["kind"], r["page_size"], r["need_sort"],
            r["num_pages"])


def index(records: list[Record]) -> dict[tuple[Any, ...], dict[str, Record]]:
    """Map each key (with need_sort; vLLM and floor rows under ``need_sort=None``) to
    impl -> record."""
    out: dict[tuple[Any, ...], dict[str, Record]] = defaultdict(dict)
    for r in records:
        out[_key(r)][r["impl"]] = r
    return out


def paired_rows(records: list[Record]) -> list[dict[str, Any]]:
    """One row per kvpool (or, without kvpool, SGLang) measurement with its peers beside it."""
    idx = index(records)
    rows: list[dict[str, Any]] = []
    for key, by_impl in idx.items():
        workload, variant, kind, ps, ns, num_pages = key
        if ns is None:
            continue
        base = by_impl.get("kvpool")
        sg = by_impl.get("sglang")
        vkey = (workload, VLLM_VARIANT.get((workload, variant), variant), kind, ps, None,
                num_pages)
        vl = idx.get(vkey, {}).get("vllm")
        fl = idx.get((*key[:4], None, num_pages), {}).get("floor")
        row = {"workload": workload, "variant": variant, "kind": kind, "page_size": ps,
               "need_sort": ns, "num_pages": num_pages,
               "kvpool_us": base["median_us"] if base else None,
               "sglang_us": sg["median_us"] if sg else None,
               "vllm_us": vl["median_us"] if vl else None,
               "floor_us": fl["median_us"] if fl else None}
        row["kv_over_sglang"] = _ratio(row["kvpool_us"], row["sglang_us"])
        row["kv_over_vllm"] = _ratio(row["kvpool_us"], row["vllm_us"])
        row["kv_over_floor"] = _ratio(row["kvpool_us"], row["floor_us"])
        rows.append(row)
    rows.sort(key=lambda r: (r["workload"], r["kind"], r["page_size"], r["variant"],
                             r["need_sort"], r["num_pages"]))
    return rows


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _fmt(x: float | None, ratio: bool = False) -> str:
    if x is None:
        return "—"
    if ratio:
        return f"{x:.3f}"
    return f"{x:,.1f}" if x >= 10 else f"{x:.2f}"


def _pow10(n: int) -> str:
    e = len(str(n)) - 1
    return f"1e{e}" if n == 10 ** e else str(n)


def markdown(rows: list[dict[str, Any]]) -> str:
    """Tables of medians (µs per call / step) and kvpool / peer ratios, one per workload; a
    workload with an output floor (W3, W5) gets its ``floor`` and ``kv/floor`` columns."""
    out: list[str] = []
    current = None
    floored: set[str] = {r["workload"] for r in rows if r.get("floor_us") is not None}
    for r in rows:
        has_floor = r["workload"] in floored
        if r["workload"] != current:
            current = r["workload"]
            extra = (" floor |", " kv/floor |", "---|---|") if has_floor else ("", "", "")
            out += ["", f"**{current}** (µs, median of window means; ratio = kvpool / peer)", "",
                    f"| variant | allocator | ps | need_sort | P | kvpool | SGLang | vLLM |"
                    f"{extra[0]} kv/SGLang | kv/vLLM |{extra[1]}",
                    f"|---|---|---|---|---|---|---|---|{extra[2]}---|---|"]
        floor = f" {_fmt(r.get('floor_us'))} |" if has_floor else ""
        kv_floor = f" {_fmt(r.get('kv_over_floor'), True)} |" if has_floor else ""
        out.append(
            f"| {r['variant']} | {r['kind']} | {r['page_size']} | {r['need_sort']} "
            f"| {_pow10(r['num_pages'])} | {_fmt(r['kvpool_us'])} | {_fmt(r['sglang_us'])} "
            f"| {_fmt(r['vllm_us'])} |{floor} {_fmt(r['kv_over_sglang'], True)} "
            f"| {_fmt(r['kv_over_vllm'], True)} |{kv_floor}")
    return "\n".join(out).lstrip("\n") + "\n"


def memory_markdown(mem: list[Record]) -> str:
    """Table of allocator metadata bytes per page."""
    lines = ["| impl | allocator | ps | need_sort | P | bytes/page fresh "
             "| bytes/page after churn |", "|---|---|---|---|---|---|---|"]
    for m in mem:
        lines.append(f"| {m['impl']} | {m['kind']} | {m['page_size']} | {m['need_sort']} "
                     f"| {_pow10(m['num_pages'])} | {m['fresh_bytes_per_page']:.2f} "
                     f"| {m['churned_bytes_per_page']:.2f} |")
    return "\n".join(lines) + "\n"


def plot(records: list[Record], out_dir: Path) -> list[Path]:
    """One PNG per workload: cost vs pool size, log-log, a line per implementation (the output
    floor of W3 / W5 dashed grey)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_workload: dict[str, dict[tuple[Any, ...], dict[str, list[tuple[int, float]]]]] = {}
    for r in records:
        panels = by_workload.setdefault(r["workload"], {})
        pk = (r["variant"], r["kind"], r["page_size"], r["need_sort"])
        panels.setdefault(pk, {}).setdefault(r["impl"], []).append(
            (r["num_pages"], r["median_us"]))
    paths: list[Path] = []
    for workload, panels in sorted(by_workload.items()):
        # vLLM panels (need_sort=None) are drawn into every matching kvpool panel
        keys = sorted((k for k in panels if k[3] is not None), key=str)
        if not keys:
            continue
        cols = min(3, len(keys))
        nrows = -(-len(keys) // cols)
        fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False)
        for ax, k in zip(axes.flat, keys, strict=False):
            lines = dict(panels[k])
            vk = (VLLM_VARIANT.get((workload, k[0]), k[0]), k[1], k[2], None)
            if vk in panels:
                lines.update(panels[vk])
            for impl, pts in sorted(lines.items()):
                pts.sort()
                style = {"linestyle": "--", "color": "grey"} if impl == "floor" else {}
                ax.plot([p for p, _ in pts], [t for _, t in pts], marker="o", label=impl,
                        **style)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{k[0]} {k[1]} ps={k[2]} sort={k[3]}", fontsize=8)
            ax.set_xlabel("pool size (pages)", fontsize=7)
            ax.set_ylabel("µs", fontsize=7)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=6)
        for ax in list(axes.flat)[len(keys):]:
            ax.set_visible(False)
        fig.suptitle(workload)
        fig.tight_layout(rect=(0, 0, 1, 0.97))
        path = out_dir / f"{workload}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths


def scaling_markdown(records: list[Record], small: int, big: int) -> str:
    """W1: cost at ``big`` pages over cost at ``small`` pages, per row and implementation."""
    idx = index(records)
    lines = ["| allocator | ps | need_sort | k | kvpool | SGLang | vLLM |",
             "|---|---|---|---|---|---|---|"]
    keys = sorted({k[:5] for k in idx if k[0] == "w1_alloc_free" and k[4] is not None},
                  key=lambda k: (k[2], k[3], k[4], int(k[1].removeprefix("k="))))
    for wl, variant, kind, ps, ns in keys:
        cells = []
        for impl in ("kvpool", "sglang", "vllm"):
            key_ns = None if impl == "vllm" else ns
            a = idx.get((wl, variant, kind, ps, key_ns, small), {}).get(impl)
            b = idx.get((wl, variant, kind, ps, key_ns, big), {}).get(impl)
            cells.append("—" if not a or not b else f"{b['median_us'] / a['median_us']:.2f}")
        lines.append(f"| {kind} | {ps} | {ns} | {variant.removeprefix('k=')} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def digest_checks(records: list[dict[str, Any]]) -> list[str]:
    """W5: did kvpool hand out exactly SGLang's slots over the whole trace?"""
    by: dict[tuple[Any, ...], dict[str, int]] = {}
    for r in records:
        if "digest" in r and r["impl"] in ("kvpool", "sglang"):
            key = (r["page_size"], r["need_sort"], r["num_pages"])
            by.setdefault(key, {})[r["impl"]] = r["digest"]
    out = []
    for (ps, ns, n), d in sorted(by.items(), key=str):
        if len(d) == 2:
            same = d["kvpool"] == d["sglang"]
            out.append(f"{'same' if same else 'DIFFERENT'} slots as SGLang over the trace: "
                       f"ps={ps} need_sort={ns} P={n}")
    return out


def results_markdown(meta: dict[str, Any], records: list[Record], rows: list[dict[str, Any]],
                     mem: list[Record], verdicts: list[Any], cuda_records: list[Record],
                     checks: list[str]) -> str:
    """The whole ``results.md``: header, targets, trace checks, tables, memory, CUDA.

    ``verdicts`` are ``benchmarks.targets.Verdict`` objects (anything with ``line()``).
    """
    v = meta["versions"]
    lines = [f"Machine: {meta['cpu']}, {meta['cores']} cores; Python {meta['python']}; "
             f"torch {v['torch']}; kvpool {v['kvpool']}; SGLang {v['sglang']}; "
             f"vLLM {v['vllm']}; torch threads {meta['torch_threads']}; malloc "
             + ", ".join(f"{k}={x}" for k, x in meta["malloc"].items())
             + f"; mode {meta['mode']}; {meta['date_utc']} UTC; {meta['elapsed_s']} s; "
             f"load average (1/5/15 min) at start {meta['loadavg_start']}, "
             f"at end {meta['loadavg_end']}.", "",
             "Targets:", "", "```", *[x.line() for x in verdicts], "```", "",
             *(["W5 replay check (kvpool vs SGLang, digest of every result):", "", "```",
                *checks, "```", ""] if checks else []),
             markdown(rows)]
    sizes = sorted({r["num_pages"] for r in rows if r["workload"] == "w1_alloc_free"})
    if len(sizes) >= 2:
        lines += ["", f"**W1 pool-size scaling**: median at {sizes[-1]:,} pages / median at "
                  f"{sizes[0]:,} pages (1.0 = flat)", "",
                  scaling_markdown(records, sizes[0], sizes[-1])]
    if mem:
        lines += ["", "**Allocator metadata** (bytes per page; no KV buffer)", "",
                  memory_markdown(mem)]
    if cuda_records:
        lines += ["", "**CUDA** (host µs, event µs, kernel launches and host syncs per call)", "",
                  "| workload | variant | ps | need_sort | P | impl | host µs | event µs "
                  "| launches | syncs |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in cuda_records:
            dev = [r.get(k) for k in ("cuda_event_us", "kernel_launches", "host_syncs")]
            cells = " | ".join("—" if x is None else f"{x:.1f}" for x in dev)
            lines.append(f"| {r['workload']} | {r['variant']} | {r['page_size']} "
                         f"| {r['need_sort']} | {r['num_pages']} | {r['impl']} "
                         f"| {r['median_us']:.1f} | {cells} |")
    return "\n".join(lines) + "\n"
