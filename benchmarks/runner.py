"""Run the selected workloads for every available implementation and write the results."""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from benchmarks import memory, report, targets
from benchmarks.adapters import VllmPools
from benchmarks.hybrid import w7_hybrid
from benchmarks.peers import load_peers
from benchmarks.sglang_serving import w6_sglang_serving
from benchmarks.timing import Settings, measure_interleaved
from benchmarks.trace import summary, w5_trace
from benchmarks.workloads import Case, Config, w1_alloc_free, w2_decode, w3_extend, w4_free_row

WORKLOADS: dict[str, Callable[[Config], Iterator[Case]]] = {
    "w1": w1_alloc_free, "w2": w2_decode, "w3": w3_extend, "w4": w4_free_row, "w5": w5_trace,
    "w6": w6_sglang_serving, "w7": w7_hybrid,
}
MALLOC_KEYS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def _machine(versions: dict[str, str], threads: int) -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "torch_threads": threads,
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "malloc": {k: os.environ.get(k) for k in MALLOC_KEYS}, "versions": versions,
            "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
            "loadavg_start": _loadavg()}


def _loadavg() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _print(rec: dict[str, Any]) -> None:
    ns = "-" if rec["need_sort"] is None else int(rec["need_sort"])
    extra = ""
    if "kernel_launches" in rec:
        extra = (f"  launches {rec['kernel_launches']:.1f} syncs {rec['host_syncs']:.1f}"
                 f" event {rec['cuda_event_us']:.1f} µs")
    if "digest" in rec:
        extra += f"  digest {rec['digest']:x}"
    print(f"  {rec['workload']:14} {rec['variant']:12} {rec['kind']:5} "
          f"ps={rec['page_size']:<2} sort={ns} P={rec['num_pages']:<8} "
          f"{rec['impl']:7} {rec['median_us']:12.2f} µs{extra}", flush=True)


def _error(label: str, exc: BaseException) -> None:
    print(f"  ERROR {label}: {type(exc).__name__}: {exc} (skipped)", flush=True)
    traceback.print_exception(type(exc), exc, exc.__traceback__, limit=4)


def _groups(cases: list[Case]) -> list[list[Case]]:
    """Consecutive cases with one group key."""
    out: list[list[Case]] = []
    for c in cases:
        if out and out[-1][0].group() == c.group():
            out[-1].append(c)
        else:
            out.append([c])
    return out


def _label(c: Case) -> str:
    return f"{c.impl}/need_sort={c.need_sort}/P={c.num_pages}"


def _lockstep(gens: dict[str, Any]) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Advance the trace replays one step each in turn (rotating who goes first)."""
    times: dict[str, list[float]] = {k: [] for k in gens}
    digests: dict[str, int] = {}
    live = list(gens)
    turn = 0
    while live:
        k = turn % len(live)
        for label in live[k:] + live[:k]:
            try:
                times[label].append(next(gens[label]))
            except StopIteration as stop:
                digests[label] = int(stop.value or 0)
                live.remove(label)
            except Exception as exc:
                _error(label, exc)
                live.remove(label)
                times.pop(label)
        turn += 1
    return times, digests


def _run_group(cfg: Config, group: list[Case], sink: list[dict[str, Any]]) -> None:
    """Build the group's cases, time them together, record and print the results."""
    built: dict[str, tuple[Case, Any]] = {}
    cleanups: list[Any] = []
    for c in group:
        try:
            step, cleanup = c.make()
        except Exception as exc:
            _error(f"{c.workload} {_label(c)} set-up", exc)
            continue
        built[_label(c)] = (c, step)
        if cleanup is not None:
            cleanups.append(cleanup)
    try:
        if group[0].lockstep:
            times, digests = _lockstep({k: v[1] for k, v in built.items()})
            for label, per_step in times.items():
                if label in digests and per_step:
                    rec = built[label][0].record(_TraceSample(summary(per_step)))
                    rec["digest"] = digests[label]
                    sink.append(rec)
                    _print(rec)
            return
        if cfg.device == "cpu":
            samples = measure_interleaved({k: v[1] for k, v in built.items()}, cfg.settings,
                                          lambda label, exc: _error(label, exc))
        else:
            samples = {}
            for label, (_, step) in built.items():
                try:
                    samples[label] = cfg.measure(step, cfg.settings)
                except Exception as exc:
                    _error(label, exc)
        for label, sample in samples.items():
            rec = built[label][0].record(sample)
            sink.append(rec)
            _print(rec)
    finally:
        for cleanup in cleanups:
            cleanup()


class _TraceSample:
    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields

    def as_dict(self) -> dict[str, Any]:
        return self.fields


def _pass(cfg: Config, peers: Any, selected: list[str], vllm: VllmPools | None,
          sink: list[dict[str, Any]]) -> None:
    impls = {name: m for name, m in (("kvpool", peers.kvpool), ("sglang", peers.sglang))
             if m is not None}
    cfg = replace(cfg, impls=impls, vllm=vllm)
    for wname in selected:
        try:
            cases = list(WORKLOADS[wname](cfg))
        except Exception as exc:
            _error(wname, exc)
            continue
        for group in _groups(cases):
            _run_group(cfg, group, sink)


def _memory(cfg: Config, peers: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name, module in (("kvpool", peers.kvpool), ("sglang", peers.sglang)):
        if module is None:
            continue
        for n in cfg.sizes:
            for kind, ps in (("token", 1), ("paged", 1), ("paged", 16)):
                for ns in cfg.need_sorts:
                    try:
                        m = memory.allocator_metadata(module, kind, n, ps, ns)
                    except Exception as exc:
                        print(f"  ERROR memory {name}: {type(exc).__name__}: {exc}")
                        continue
                    out.append({"impl": name, "kind": kind, "page_size": ps, "need_sort": ns,
                                "num_pages": n, **m})
    if peers.vllm_block_pool is not None:
        for n in cfg.sizes:
            m = memory.vllm_metadata(peers.vllm_block_pool, n)
            out.append({"impl": "vllm", "kind": "block", "page_size": "any", "need_sort": None,
                        "num_pages": n, **m})
    return out


def render(meta: dict[str, Any], records: list[dict[str, Any]], mem: list[dict[str, Any]],
           verdicts: list[Any], cuda_records: list[dict[str, Any]],
           prof_rows: list[dict[str, Any]], fallback_rows: list[dict[str, Any]]) -> str:
    """The whole ``results.md`` of one run (also from a saved ``results.json``)."""
    from benchmarks import profile_ops

    rows = report.paired_rows(records)
    checks = report.digest_checks(records)
    md = report.results_markdown(meta, records, rows, mem, verdicts, cuda_records, checks)
    if prof_rows:
        md += ("\n**Operators per call** (CPU, torch.profiler, need_sort off, largest pool; the "
               "whole step, so W3 includes the untimed free of the new pages and W4 the untimed "
               "re-take of the row; times inflated by the profiler)\n\n"
               + profile_ops.markdown(prof_rows))
    if fallback_rows:
        md += ("\n**kvpool's backends: torch operators per call** (CPU, torch.profiler; on CUDA "
               "every operator of the torch path that is not a view launches a kernel; the "
               "Triton path replaces the layout operators by one kernel per call)\n\n"
               + profile_ops.fallback_markdown(fallback_rows))
    return md


def run(args: argparse.Namespace) -> int:
    """Run everything ``args`` selects; write JSON, Markdown and plots; print verdicts."""
    torch.set_num_threads(args.threads)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    peers = load_peers(args.skip)
    meta = _machine(peers.versions, args.threads)
    meta["mode"] = "quick" if args.quick else "full"
    print(f"kvpool benchmarks ({meta['mode']}) — {meta['cpu']}, {meta['cores']} cores, "
          f"Python {meta['python']}, torch {peers.versions['torch']}, "
          f"threads {args.threads}")
    print("malloc: " + ", ".join(f"{k}={v}" for k, v in meta["malloc"].items()))
    print("versions: " + ", ".join(f"{k} {v}" for k, v in peers.versions.items()))
    for name, why in peers.missing.items():
        print(f"SKIP {name}: {why}")
    quick = args.quick
    sizes = args.sizes or ([10**4, 10**5] if quick else [10**4, 10**5, 10**6])
    settings = Settings(warmup_steps=5, window_s=0.01, windows=3) if quick else Settings()
    cfg = Config(sizes=sizes, page_sizes=[1, 16], need_sorts=[False, True],
                 ks=[1, 16, 256], settings=settings, impls={}, vllm=None,
                 trace_steps=args.trace_steps or (300 if quick else 10_000))
    selected = [w for w in args.workloads if w in WORKLOADS]
    vllm = VllmPools(peers.vllm_block_pool) if peers.vllm_block_pool is not None else None
    records: list[dict[str, Any]] = []
    _pass(cfg, peers, selected, vllm, records)
    if vllm is not None:
        try:
            vllm.check_invariants()
        except AssertionError as exc:
            print(f"  ERROR vLLM pool bookkeeping: {exc}")
        vllm.pools.clear()
    mem = [] if args.no_memory else _memory(cfg, peers)
    cuda_records: list[dict[str, Any]] = []
    if not args.no_cuda and torch.cuda.is_available():
        from benchmarks.cuda import cuda_measure

        print("CUDA pass on", meta["cuda"])
        ccfg = replace(cfg, device="cuda", measure=cuda_measure)
        _pass(ccfg, peers, selected, None, cuda_records)
    elif not args.no_cuda:
        print("SKIP cuda: no CUDA device (torch.cuda.is_available() is False)")
    prof_rows: list[dict[str, Any]] = []
    fallback_rows: list[dict[str, Any]] = []
    if not args.no_profile:
        from benchmarks import profile_ops

        impls = {n: m for n, m in (("kvpool", peers.kvpool), ("sglang", peers.sglang))
                 if m is not None}
        try:
            prof_rows = profile_ops.profile_cases(replace(cfg, impls=impls, vllm=None))
        except Exception as exc:
            _error("operator profile", exc)
        if peers.kvpool is not None:
            try:
                fallback_rows = profile_ops.fallback_op_counts()
            except Exception as exc:
                _error("fallback operator counts", exc)
    rows = report.paired_rows(records)
    checks = report.digest_checks(records)
    verdicts = targets.evaluate(records, cfg.need_sorts, mem)
    meta["elapsed_s"] = round(time.perf_counter() - t_start, 1)
    meta["loadavg_end"] = _loadavg()
    md = render(meta, records, mem, verdicts, cuda_records, prof_rows, fallback_rows)
    (out_dir / "results.md").write_text(md)
    payload = {"meta": meta, "records": records, "paired": rows, "memory": mem,
               "targets": [v.__dict__ for v in verdicts], "cuda_records": cuda_records,
               "skipped": peers.missing, "trace_checks": checks, "op_profile": prof_rows,
               "backend_ops": fallback_rows}
    (out_dir / "results.json").write_text(json.dumps(payload, indent=1))
    plots: list[Path] = []
    if not args.no_plots:
        try:
            plots = report.plot(records, out_dir)
        except ImportError as exc:
            print(f"SKIP plots: {exc} (pip install matplotlib)")
    print()
    print(md)
    for v in verdicts:
        print(v.line())
    print(f"wrote {out_dir / 'results.json'}, {out_dir / 'results.md'} and {len(plots)} plots "
          f"in {meta['elapsed_s']} s")
    return 0
