"""SGLang 0.5.23's unified SWA composite beside its static SWA allocator and kvpool's own: per-call
cost.

The baseline a kvpool implementation of the unified pools (SPEC.md §16) has to beat. Targets,
built on the CPU in one process:

- ``static``: SGLang's ``SWATokenToKVPoolAllocator`` (two fixed pools, a full → SWA mapping),
  ``P`` pages a side, through the oracle's ``peer_swa`` loader;
- ``eager`` / ``lazy``: SGLang's ``UnifiedSWATokenToKVPoolAllocator`` (one byte buffer, virtual
  ids, compaction), built by SGLang's own ``build_swa_pool`` with room for ``P`` pages a side,
  eager or lazy compaction. Its sub-pools' ``alloc_extend`` / ``alloc_decode`` launch Triton
  kernels unconditionally; here they run SGLang's own torch fallbacks
  (``alloc_extend_naive`` / ``alloc_decode_naive``), which the static allocator uses on a CPU too;
- ``kvpool-eager`` / ``kvpool-lazy``: kvpool's own ``kvpool.impl.unified_swa.UnifiedSWAAllocator``
  over the same byte buffer (checked mode on, its own byte store: pages zeroed at hand-out and
  copied on compaction as SGLang's are).

The tri-pools (SGLang's and kvpool's, Mamba state end + SWA float + full end) and the full + Mamba
pools get a table each, side by side on one trace (:mod:`benchmarks.unified_tri`,
:mod:`benchmarks.unified_mamba`).

Every target first holds a quarter of its pages. Calls (the same trace on every target; each
step times only its call and restores the state untimed):

- ``alloc`` (ps 1): ``alloc(64)``; ``extend``: ``alloc_extend`` of 8 requests × 256 tokens from
  an empty prefix (its argument tensors built once, outside the timed call); ``decode``: one
  page-opening decode token for 64 requests (ps 1: ``alloc(64)``, as SGLang's scheduler does
  at page size 1);
- ``free``: ``free`` of the 8 × 256-token rows of the last extend, newest rows (no compaction
  move on the unified pools: the pages are at the frontier);
- ``free_swa``: a 256-token row's window slides out whole (``free_swa``; the row's full
  side is then released with ``free_full``, untimed);
- ``compaction``: ``free`` of the oldest of two 1024-token rows: the unified eager pool moves
  the newer row's pages into the holes inside the call, the lazy pool frees now and compacts in
  an explicit ``flush_opportunistic()`` (timed with it), the static pool has nothing to move.

Medians of interleaved windows (:func:`benchmarks.timing.measure_interleaved`), µs per call.
``python -m benchmarks.unified [--quick] [--out DIR]`` prints one line per cell and writes
``unified.json`` and ``unified.md`` to DIR (default ``benchmarks/results``). Exits 1 when SGLang
cannot be imported.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from benchmarks.timing import Settings, Step, measure_interleaved, probe_args

FULL = Settings()
QUICK = Settings(warmup_steps=3, window_s=0.01, windows=3)
POOL_PAGES = 4096
BATCH = 64
ROWS, ROW_TOKENS = 8, 256
LONG_ROW_TOKENS = 1024
TARGETS = ("static", "eager", "lazy", "kvpool-eager", "kvpool-lazy")
ENTRY_BYTES = 32  # build_swa_pool: fp16, 1 head of dim 8, K and V, one layer a side


def i64(xs: list[int]) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.int64)


def make_target(name: str, ps: int) -> Any:
    """A fresh allocator of the named kind with room for ``POOL_PAGES`` pages a side."""
    if name == "static":
        try:
            from kvpool.oracle.peers.peer_swa import load_sglang_swa, make_swa_kv_pool
        except ModuleNotFoundError:  # the oracle's layout before its subpackages
            from kvpool.oracle.peers.peer_swa import load_sglang_swa, make_swa_kv_pool
        size = POOL_PAGES * ps
        return load_sglang_swa().SWATokenToKVPoolAllocator(
            size, size, ps, torch.float16, "cpu", make_swa_kv_pool(), False)
    total_bytes = 2 * (POOL_PAGES + 1) * ps * ENTRY_BYTES
    if name.startswith("kvpool-"):
        from kvpool.impl.unified_swa import UnifiedSWAAllocator

        return UnifiedSWAAllocator(total_bytes, ps, lazy=name == "kvpool-lazy")
    from kvpool.oracle.families.unified.peer import load_unified as load

    fixtures = load()
    fixtures.setup_allocator_context()
    return fixtures.build_swa_pool(page_size=ps, lazy=name == "lazy", total_bytes=total_bytes)


def extend(a: Any, lens: list[int]) -> torch.Tensor:
    """One ``alloc_extend`` of fresh rows of ``lens`` tokens (ps 1: one ``alloc``)."""
    if a.page_size == 1:
        out: torch.Tensor = a.alloc(sum(lens))
        return out
    n = len(lens)
    zeros = i64([0] * n)
    rows: torch.Tensor = a.alloc_extend(zeros, zeros, i64(lens), i64(lens), i64([-1] * n),
                                        sum(lens))
    return rows


def extend_call(a: Any, lens: list[int]) -> Callable[[], Any]:
    """:func:`extend` as a call whose argument tensors are built once, here (untimed)."""
    if a.page_size == 1:
        total = sum(lens)
        return lambda: a.alloc(total)
    n = len(lens)
    zeros, seq, last = i64([0] * n), i64(lens), i64([-1] * n)
    total = sum(lens)
    return lambda: a.alloc_extend(zeros, zeros, seq, seq, last, total)


def timed(call: Callable[[], Any], restore: Callable[[Any], Any]) -> Step:
    """A step that times ``call`` only, then restores the state with its result, untimed."""
    def step() -> float:
        t0 = time.perf_counter()
        got = call()
        seconds = time.perf_counter() - t0
        restore(got)
        return seconds
    return step


def steps_for(op: str, a: Any, ps: int) -> Step:
    """The timed step of ``op`` on allocator ``a`` (see the module docstring)."""
    lazy = bool(getattr(a, "lazy_compaction", False))
    if op == "alloc":
        return timed(lambda: a.alloc(BATCH), a.free)
    if op == "extend":
        return timed(extend_call(a, [ROW_TOKENS] * ROWS), a.free)
    if op == "decode":
        if ps == 1:
            return timed(lambda: a.alloc(BATCH), a.free)
        seq = i64([ps + 1] * BATCH)
        heads = extend(a, [ps] * BATCH)                 # one full page per request, kept
        last = heads.reshape(BATCH, ps)[:, -1].contiguous()
        return timed(lambda: a.alloc_decode(seq, seq, last), a.free)
    if op == "free":
        def untimed_rows() -> torch.Tensor:
            return extend(a, [ROW_TOKENS] * ROWS)
        state = {"rows": untimed_rows()}

        def free_rows() -> None:
            a.free(state["rows"])

        def refill(_: Any) -> None:
            state["rows"] = untimed_rows()
        return timed(free_rows, refill)
    if op == "free_swa":
        state = {"row": extend(a, [ROW_TOKENS])}

        def slide() -> None:
            a.free_swa(state["row"])

        def renew(_: Any) -> None:
            a.free_full(state["row"])                   # its SWA side is already released
            state["row"] = extend(a, [ROW_TOKENS])
        return timed(slide, renew)
    if op == "compaction":
        rows = [extend(a, [LONG_ROW_TOKENS]), extend(a, [LONG_ROW_TOKENS])]

        def free_oldest() -> None:
            a.free(rows.pop(0))
            if lazy:
                a.flush_opportunistic()

        def append_new(_: Any) -> None:
            rows.append(extend(a, [LONG_ROW_TOKENS]))
        return timed(free_oldest, append_new)
    raise ValueError(op)


def copy_counts(op: str, ps: int, calls: int = 16) -> dict[str, float]:
    """Compaction copies per call of ``op`` on each unified target, the same trace untimed:
    ``<target>-pages`` (pages moved by ``move_physical_pages``, both sub-pools) and
    ``<target>-bytes`` (those pages' bytes)."""
    out: dict[str, float] = {}
    for name in TARGETS[1:]:
        a = make_target(name, ps)
        extend(a, [POOL_PAGES // 4 * ps])
        moved = [0]
        kv = a.get_kvcache()
        for side in (kv.full_kv_pool, kv.swa_kv_pool):
            inner = side.move_physical_pages

            def counted(dst: Any, src: Any, *args: Any, _inner: Any = inner,
                        _moved: list[int] = moved, **kw: Any) -> Any:
                _moved[0] += int(dst.numel())
                return _inner(dst, src, *args, **kw)
            side.move_physical_pages = counted
        step = steps_for(op, a, ps)
        step()                                          # the first call sets the trace up
        moved[0] = 0
        for _ in range(calls):
            step()
        out[f"{name}-pages"] = moved[0] / calls
        out[f"{name}-bytes"] = moved[0] * ps * ENTRY_BYTES / calls
    return out


def metadata_bytes(a: Any) -> int:
    """Bytes of an allocator's host bookkeeping: every integer or bool numpy array and integer
    tensor reachable from its attributes (page tables, free lists, holes, scratch), the KV byte
    buffer and its views (float, uint8 or whole-page elements) left out."""
    seen: set[int] = set()
    total = 0

    def walk(obj: Any, depth: int) -> None:
        nonlocal total
        if id(obj) in seen or depth > 5:
            return
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):  # integer and bool tables; byte and page views out
            total += obj.nbytes if obj.dtype.kind in "iub" and obj.dtype != np.uint8 else 0
        elif isinstance(obj, torch.Tensor):
            is_index = not obj.dtype.is_floating_point and obj.dtype != torch.uint8
            total += obj.numel() * obj.element_size() if is_index else 0
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                walk(item, depth + 1)
        elif isinstance(obj, dict):
            for item in obj.values():
                walk(item, depth + 1)
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            for item in vars(obj).values():
                walk(item, depth + 1)
    walk(a, 0)
    return total


def metadata_rows() -> list[dict[str, Any]]:
    """Metadata bytes per physical page (both sides' pages counted) of each unified target,
    a quarter of its pages held."""
    rows = []
    for ps in (1, 16):
        row: dict[str, Any] = {"page_size": ps}
        for name in TARGETS[1:]:
            a = make_target(name, ps)
            extend(a, [POOL_PAGES // 4 * ps])
            row[name] = metadata_bytes(a) / (2 * POOL_PAGES)
        rows.append(row)
    return rows


def cell(op: str, ps: int, settings: Settings) -> dict[str, Any]:
    """One operation at one page size on every target, interleaved: µs per call."""
    steps: dict[str, Step] = {}
    for name in TARGETS:
        a = make_target(name, ps)
        extend(a, [POOL_PAGES // 4 * ps])              # a quarter held for the whole cell
        steps[name] = steps_for(op, a, ps)

    def fail(name: str, exc: BaseException) -> None:
        raise RuntimeError(f"unified {op} ps={ps} on {name} failed: {exc!r}") from exc
    samples = measure_interleaved(steps, settings, fail)
    return {"op": op, "page_size": ps, **{n: samples[n].median_us for n in TARGETS},
            "copies": copy_counts(op, ps)}


def markdown(rows: list[dict[str, Any]]) -> str:
    """One table line per cell: µs per call, SGLang's unified pools over its static one, and
    SGLang's unified pools over kvpool's (the speed-up)."""
    lines = ["| op | ps | static | SGLang eager | SGLang lazy | kvpool eager | kvpool lazy | "
             "eager / static | lazy / static | SGLang / kvpool eager | SGLang / kvpool lazy |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['op']} | {r['page_size']} | {r['static']:.1f} | {r['eager']:.1f} "
                     f"| {r['lazy']:.1f} | {r['kvpool-eager']:.1f} | {r['kvpool-lazy']:.1f} | "
                     f"{r['eager'] / r['static']:.2f} | {r['lazy'] / r['static']:.2f} | "
                     f"{r['eager'] / r['kvpool-eager']:.0f}x | "
                     f"{r['lazy'] / r['kvpool-lazy']:.0f}x |")
    return "\n".join(lines) + "\n"


def copies_md(rows: list[dict[str, Any]]) -> str:
    """The compaction-copies table: pages and bytes per call of every unified target."""
    names = TARGETS[1:]
    lines = ["| op | ps | " + " | ".join(f"{_label(n)} pages | {_label(n)} bytes"
                                          for n in names) + " |",
             "|---|---|" + "---|---|" * len(names)]
    for r in rows:
        c = r["copies"]
        lines.append(f"| {r['op']} | {r['page_size']} | " + " | ".join(
            f"{c[n + '-pages']:g} | {c[n + '-bytes']:g}" for n in names) + " |")
    return "\n".join(lines) + "\n"


def metadata_md(meta: list[dict[str, Any]]) -> str:
    """The metadata table: bytes per physical page of every unified target."""
    names = TARGETS[1:]
    lines = ["| ps | " + " | ".join(_label(n) for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for r in meta:
        lines.append(f"| {r['page_size']} | " + " | ".join(f"{r[n]:.2f}" for n in names) + " |")
    return "\n".join(lines) + "\n"


def _label(name: str) -> str:
    return name.replace("kvpool-", "kvpool ") if name.startswith("kvpool") else f"SGLang {name}"


def main(argv: list[str] | None = None) -> int:
    """Measure every cell, print and write the results; 0 on success, 1 without SGLang."""
    ns = probe_args("unified", __doc__, "short windows", argv)
    try:
        make_target("eager", 1)
        make_target("static", 1)
    except Exception as exc:  # the oracle's PeerUnavailable or an import error
        print(f"SGLang 0.5.23 cannot be imported here: {exc}")
        return 1
    torch.set_num_threads(1)
    settings = QUICK if ns.quick else FULL
    rows = []
    for ps in (1, 16):
        for op in ("alloc", "extend", "decode", "free", "free_swa", "compaction"):
            if op == "alloc" and ps > 1:
                continue                               # the static allocator: ps 1 only
            row = cell(op, ps, settings)
            rows.append(row)
            print(f"{op} ps={ps}: static {row['static']:.1f} µs, eager {row['eager']:.1f} µs, "
                  f"lazy {row['lazy']:.1f} µs, kvpool eager {row['kvpool-eager']:.1f} µs, "
                  f"kvpool lazy {row['kvpool-lazy']:.1f} µs", flush=True)
    meta = metadata_rows()
    from benchmarks import unified_trace

    serving = unified_trace.run(300 if ns.quick else unified_trace.NUM_STEPS)
    from benchmarks import unified_tri

    tri = unified_tri.rows(settings)
    from benchmarks import unified_mamba

    mamba = unified_mamba.rows(settings)
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "unified.json").write_text(json.dumps(
        {"calls": rows, "metadata_bytes_per_page": meta, "serving_trace": serving,
         "tri_pool_calls": tri, "full_mamba_calls": mamba},
        indent=1) + "\n")
    (ns.out / "unified.md").write_text(
        f"SGLang 0.5.23 and kvpool on the CPU, {POOL_PAGES:,} pages a side, a quarter held: µs "
        "per call, medians of interleaved windows; SGLang's unified extend/decode on its torch "
        "fallbacks "
        "(see benchmarks/unified.py)\n\n" + markdown(rows)
        + "\nCompaction copies per call on the same trace (pages moved by "
        "`move_physical_pages` on both sub-pools, and their bytes):\n\n" + copies_md(rows)
        + "\nHost metadata bytes per physical page (page tables, free lists, holes, scratch; "
        "both sides' pages counted; the KV buffer left out):\n\n" + metadata_md(meta)
        + "\nA W5 serving trace with sliding-window releases (benchmarks/unified_trace.py): "
        "µs per step, kvpool's unified pools beside kvpool's static SWA allocator, steps "
        "interleaved, medians of 10 window means:\n\n" + unified_trace.markdown(serving)
        + "\nThe tri-pools (Mamba state end, SWA float, full end; SGLang's fixture geometry, "
        "a quarter held and two state slots; benchmarks/unified_tri.py): µs per call\n\n"
        + unified_tri.markdown(tri)
        + "\nThe full + Mamba pools (full end and Mamba state end; SGLang's builder geometry, a "
        "quarter held and two state slots; benchmarks/unified_mamba.py): µs per call\n\n"
        + unified_tri.markdown(mamba))
    print(f"wrote {ns.out / 'unified.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
