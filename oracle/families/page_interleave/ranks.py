"""The page-interleave pool across real ranks: ``N`` processes on this machine, joined by
``torch.distributed`` (gloo, a ``file://`` store), each holding its own allocator (kvpool's or
SGLang's) fed the same mirrored call stream (:mod:`.stream`, from a seed).

After every call each rank all-gathers its state (class free lists, class release lists, the
open free group, the call's result) and every rank checks, alike:

- mirroring (``PINTER-12``): all ranks hold the same state; the first call where they do not
  is named with the part that differs, and the run stops there;
- ownership (``PINTER-1``): rank ``r``'s own pages, its class ``r`` lists, are the spec's (the
  spec model runs on every rank), each logical page ``l`` with ``l % N == r`` and physical
  page ``l // N`` in ``1..P``;
- the balance bound (``PINTER-7``): each request's new pages hold per-rank counts that differ
  by at most one.

``--break`` wraps allocators with a deliberate mirroring break (:mod:`.breaks`): the last rank's
for ``free_order`` and ``tie_break``, every rank's for ``unstable_sort``. Run as
``python -m kvpool.oracle.families.page_interleave.ranks --ranks 2 --calls 200 --target kvpool``;
the exit status is 0 when every call agreed and checked, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from .stream import Shape, apply, generate

PARTS = ("class free lists", "class release lists", "free group", "result")
FACTORIES = {"kvpool": "kvpool_page_interleave", "sglang": "sglang_page_interleave"}


def make_allocator(target: str, shape: Shape, rank: int, brk: str | None) -> Any:
    """Rank ``rank``'s allocator: ``target``'s (``kvpool`` or ``sglang``), wrapped by the
    mirroring break ``brk`` where it applies to this rank."""
    from . import targets
    from .breaks import MirrorBreak

    alloc = getattr(targets, FACTORIES[target])(size=shape.size, page_size=shape.page_size,
                                                shard_size=shape.ranks,
                                                need_sort=shape.need_sort)
    if brk == "unstable_sort" or (brk is not None and rank == shape.ranks - 1):
        return MirrorBreak(alloc, brk)
    return alloc


def state_parts(alloc: Any, result: Any) -> dict[str, Any]:
    """A rank's state as plain values, by part (``PARTS``)."""
    group = alloc.free_group
    return {"class free lists": [x.tolist() for x in alloc.class_free_pages],
            "class release lists": [x.tolist() for x in alloc.class_release_pages],
            "free group": None if group is None else [x.tolist() for x in group],
            "result": result}


def own_page_errors(parts: dict[str, Any], spec: Any, rank: int, shape: Shape) -> list[str]:
    """What is wrong with rank ``rank``'s view of its own pages (its class lists) against the
    spec's (empty: nothing)."""
    n = shape.ranks
    own = parts["class free lists"][rank] + parts["class release lists"][rank]
    want = spec.free_lists[rank] + spec.release_lists[rank]
    errors = [f"page {p} (class {p % n}) on rank {rank}'s lists" for p in own if p % n != rank]
    errors += [f"physical page {p // n} of rank {rank} outside 1..{spec.pages_per_rank}"
               for p in own if not 1 <= p // n <= spec.pages_per_rank]
    if own != want:
        errors.append(f"rank {rank}'s own free pages {own}, the spec's {want}")
    return errors


def balance_errors(call: dict[str, Any], result: Any, shape: Shape) -> list[str]:
    """Requests of an allocation whose new pages' per-rank counts differ by more than one."""
    if not result or result[0] is None:
        return []
    requests = call.get("requests") or [[0, call.get("need_size", 0)]]
    out, at, n = [], 0, shape.ranks
    for prefix, seq in requests:
        part, at = result[0][at:at + seq - prefix], at + seq - prefix
        pages = list(dict.fromkeys(s // shape.page_size for s in part))
        counts = [sum(1 for p in pages if p % n == r) for r in range(n)]
        if max(counts) - min(counts) > 1:
            out.append(f"pages {pages}: {counts} per rank")
    return out


def _rank_main(rank: int, shape: Shape, stream: list[dict[str, Any]], target: str,
               brk: str | None, store: str, out: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=shape.ranks, timeout=timedelta(seconds=120))
    try:
        report = _run_rank(rank, shape, stream, target, brk, dist)
        if rank == 0:
            Path(out).write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()


def _run_rank(rank: int, shape: Shape, stream: list[dict[str, Any]], target: str,
              brk: str | None, dist: Any) -> dict[str, Any]:
    alloc, spec = make_allocator(target, shape, rank, brk), shape.spec()
    report: dict[str, Any] = {"ranks": shape.ranks, "calls": len(stream), "agreed": 0,
                              "divergence": None, "ownership": [], "balance": [],
                              "spec_mismatch": None}
    start = time.perf_counter()
    for index, call in enumerate(stream):
        try:
            result = apply(alloc, call)
        except Exception as err:  # a rank that raises still takes part in the gather
            result = f"raised {type(err).__name__}: {err}"
        want = _spec_call(spec, call)
        parts = state_parts(alloc, result)
        mine = {"parts": parts, "own": own_page_errors(parts, spec, rank, shape),
                "balance": balance_errors(call, result, shape)}
        gathered: list[Any] = [None] * shape.ranks
        dist.all_gather_object(gathered, mine)
        differ = next((p for p in PARTS if any(g["parts"][p] != gathered[0]["parts"][p]
                                               for g in gathered)), None)
        if differ is not None:
            report["divergence"] = {"call": index, "name": call["call"], "part": differ,
                                    "by_rank": [g["parts"][differ] for g in gathered]}
            break
        report["agreed"] = index + 1
        report["ownership"] += [f"call {index}: {e}" for g in gathered for e in g["own"]]
        report["balance"] += [f"call {index}: {e}" for e in gathered[0]["balance"]]
        if report["spec_mismatch"] is None and want is not None and result != want:
            report["spec_mismatch"] = {"call": index, "got": result, "spec": want}
    report["seconds"] = round(time.perf_counter() - start, 3)
    return report


def _spec_call(spec: Any, call: dict[str, Any]) -> Any:
    name = call["call"]
    if name == "alloc_extend":
        return list(spec.alloc_extend([tuple(r) for r in call["requests"]], call["bases"]))
    if name == "alloc_cyclic":
        return [spec.alloc_cyclic(call["start_class"], call["need_size"]), None]
    getattr(spec, name)(*([call["slots"]] if name == "free" else []))
    return None


def run_ranks(shape: Shape, num_calls: int, seed: int = 0, target: str = "kvpool",
              brk: str | None = None, start_method: str = "fork") -> dict[str, Any]:
    """Start ``shape.ranks`` processes, feed each the stream of ``num_calls`` calls from
    ``seed`` and return rank 0's report: ``agreed`` (calls all ranks agreed after),
    ``divergence`` (None, or the first diverging call, its name, the part and each rank's
    value), ``ownership`` and ``balance`` errors, ``spec_mismatch`` and ``seconds``. The
    processes are forked (``start_method``; ``"spawn"`` starts fresh interpreters, slower)."""
    from torch.multiprocessing.spawn import start_processes

    stream = generate(shape, num_calls, seed)
    if target == "sglang":  # imported once, before the fork
        from .targets import load_sglang_page_interleave

        load_sglang_page_interleave()
    with tempfile.TemporaryDirectory() as tmp:
        store, out = str(Path(tmp) / "store"), str(Path(tmp) / "report.json")
        began = time.perf_counter()
        start_processes(_rank_main, args=(shape, stream, target, brk, store, out),  # type: ignore[no-untyped-call]
                           nprocs=shape.ranks, join=True, start_method=start_method)
        report: dict[str, Any] = json.loads(Path(out).read_text())
    report["wall_seconds"] = round(time.perf_counter() - began, 3)
    report["target"], report["seed"], report["break"] = target, seed, brk
    return report


def ok(report: dict[str, Any]) -> bool:
    """Every call agreed, every rank's own pages and every chain's balance checked."""
    return (report["divergence"] is None and not report["ownership"] and not report["balance"]
            and report["spec_mismatch"] is None and report["agreed"] == report["calls"])


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m kvpool.oracle.families.page_interleave.ranks",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", choices=sorted(FACTORIES), default="kvpool")
    parser.add_argument("--page-size", type=int, default=4)
    parser.add_argument("--size", type=int, default=64, help="slots per rank")
    parser.add_argument("--need-sort", action="store_true")
    parser.add_argument("--break", dest="brk", choices=("free_order", "tie_break",
                                                        "unstable_sort"))
    parser.add_argument("--json", type=Path, help="write the report here")
    a = parser.parse_args(argv)
    shape = Shape(a.ranks, a.page_size, a.size, a.need_sort)
    report = run_ranks(shape, a.calls, a.seed, a.target, a.brk)
    if a.json:
        a.json.write_text(json.dumps(report, indent=1))
    print(describe(report))
    return 0 if ok(report) else 1


def describe(report: dict[str, Any]) -> str:
    """The report in a few lines."""
    head = (f"{report['target']} x {report['ranks']} ranks, seed {report['seed']}"
            f"{', break ' + report['break'] if report['break'] else ''}: {report['agreed']} of "
            f"{report['calls']} calls agreed on every rank ({report['seconds']} s of calls, "
            f"{report['wall_seconds']} s with start-up)")
    lines = [head]
    d = report["divergence"]
    if d is not None:
        lines.append(f"ranks diverge at call {d['call']} ({d['name']}) in {d['part']}: "
                     + "; ".join(f"rank {r}: {v}" for r, v in enumerate(d["by_rank"])))
    lines += [f"ownership: {e}" for e in report["ownership"][:5]]
    lines += [f"balance: {e}" for e in report["balance"][:5]]
    if report["spec_mismatch"] is not None:
        lines.append(f"spec: {report['spec_mismatch']}")
    lines.append("ok" if ok(report) else "FAIL")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
