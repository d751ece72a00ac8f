"""The tri-pools side by side: SGLang 0.5.23's ``UnifiedMambaSWATokenToKVPoolAllocator`` and
kvpool's ``UnifiedMambaSWAAllocator``, per-call cost.

Both built with the geometry of SGLang's tri-pool fixture (``build_tri_pool``: 100 pages a side
plus 8 Mamba state slots in one byte buffer; kvpool's by the oracle's ``kvpool_unified_tri``,
checked mode on), eager or lazy compaction; SGLang's sub-pool kernels on its torch fallbacks.
Every target first holds a quarter of its pages and two state slots. Calls (the same trace on
every target; each step times only its call and restores the state untimed):

- ``alloc``: ``alloc(8 pages)``; ``extend``: ``alloc_extend`` of 2 requests × 4 pages from an
  empty prefix (ps 1: one ``alloc``); ``decode``: one page-opening decode token for 8 requests
  (ps 1: ``alloc(8)``);
- ``free``: ``free`` of the 2 rows of the last extend; ``free_swa``: a 4-page row's window
  slides out whole (``free_swa``; its full side released with ``free_full``, untimed): the
  float's holes;
- ``state``: one state slot taken and released on the state end.

Medians of interleaved windows, µs per call. Run by ``python -m benchmarks.unified`` (its tri
table) or alone: ``python -m benchmarks.unified_tri [--quick]`` prints one line per cell.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.timing import Settings, Step, measure_interleaved, probe_args

FULL = Settings()
QUICK = Settings(warmup_steps=3, window_s=0.01, windows=3)

TARGETS = ("sglang-eager", "sglang-lazy", "kvpool-eager", "kvpool-lazy")
OPS = ("alloc", "extend", "decode", "free", "free_swa", "state")
ROWS, ROW_PAGES, BATCH = 2, 4, 8


def i64(xs: list[int]) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.int64)


def extend_call(a: Any, lens: list[int]) -> Callable[[], Any]:
    """``alloc_extend`` of fresh rows of ``lens`` tokens (ps 1: one ``alloc``), its argument
    tensors built once, here."""
    total = sum(lens)
    if a.page_size == 1:
        return lambda: a.alloc(total)
    zeros, seq, last = i64([0] * len(lens)), i64(lens), i64([-1] * len(lens))
    return lambda: a.alloc_extend(zeros, zeros, seq, seq, last, total)


def extend(a: Any, lens: list[int]) -> torch.Tensor:
    out: torch.Tensor = extend_call(a, lens)()
    return out


def timed(call: Callable[[], Any], restore: Callable[[Any], Any]) -> Step:
    """A step that times ``call`` only, then restores the state with its result, untimed."""
    def step() -> float:
        t0 = time.perf_counter()
        got = call()
        seconds = time.perf_counter() - t0
        restore(got)
        return seconds
    return step


def make_target(name: str, ps: int) -> Any:
    """A fresh tri-pool of the named kind (the fixture's geometry)."""
    from kvpool.oracle.families.unified.kvpool_target import kvpool_unified_tri
    from kvpool.oracle.families.unified.targets import sglang_unified_tri

    build = kvpool_unified_tri if name.startswith("kvpool") else sglang_unified_tri
    return build(total_bytes=0, page_size=ps, lazy=name.endswith("lazy"))


def _state_slot(a: Any) -> Step:
    ma = getattr(a, "mamba_allocator", None)
    if ma is not None:
        return timed(lambda: ma.alloc(1), ma.free)
    return timed(lambda: a.alloc_state(1), a.free_state_slots)


def steps_for(op: str, a: Any, ps: int) -> Step:
    """The timed step of ``op`` on tri-pool ``a`` (module docstring)."""
    if op == "alloc":
        return timed(lambda: a.alloc(BATCH * ps), a.free)
    if op == "extend":
        return timed(extend_call(a, [ROW_PAGES * ps] * ROWS), a.free)
    if op == "decode":
        if ps == 1:
            return timed(lambda: a.alloc(BATCH), a.free)
        seq = i64([ps + 1] * BATCH)
        heads = extend(a, [ps] * BATCH)
        last = heads.reshape(BATCH, ps)[:, -1].contiguous()
        return timed(lambda: a.alloc_decode(seq, seq, last), a.free)
    if op == "free":
        state = {"rows": extend(a, [ROW_PAGES * ps] * ROWS)}

        def free_rows() -> None:
            a.free(state["rows"])

        def refill(_: Any) -> None:
            state["rows"] = extend(a, [ROW_PAGES * ps] * ROWS)
        return timed(free_rows, refill)
    if op == "free_swa":
        held = {"row": extend(a, [ROW_PAGES * ps])}

        def slide() -> None:
            a.free_swa(held["row"])

        def renew(_: Any) -> None:
            a.free_full(held["row"])
            held["row"] = extend(a, [ROW_PAGES * ps])
        return timed(slide, renew)
    if op == "state":
        return _state_slot(a)
    raise ValueError(op)


def cell(op: str, ps: int, settings: Settings) -> dict[str, Any]:
    """One operation at one page size on every tri-pool, interleaved: µs per call."""
    from kvpool.oracle.families.unified.peer_state import set_state_slots

    steps: dict[str, Step] = {}
    for name in TARGETS:
        a = make_target(name, ps)
        extend(a, [25 * ps])  # a quarter of the 100 pages a side, held for the whole cell
        set_state_slots(a, 2)
        steps[name] = steps_for(op, a, ps)

    def fail(name: str, exc: BaseException) -> None:
        raise RuntimeError(f"tri-pool {op} ps={ps} on {name} failed: {exc!r}") from exc
    samples = measure_interleaved(steps, settings, fail)
    return {"op": op, "page_size": ps, **{n: samples[n].median_us for n in TARGETS}}


def rows(settings: Settings) -> list[dict[str, Any]]:
    """Every cell at page sizes 1 and 16."""
    return [cell(op, ps, settings) for ps in (1, 16) for op in OPS]


def markdown(cells: list[dict[str, Any]]) -> str:
    """One table line per cell: µs per call and SGLang's over kvpool's (the speed-up)."""
    lines = ["| op | ps | SGLang eager | SGLang lazy | kvpool eager | kvpool lazy | "
             "SGLang / kvpool eager | SGLang / kvpool lazy |",
             "|---|---|---|---|---|---|---|---|"]
    for r in cells:
        lines.append(
            f"| {r['op']} | {r['page_size']} | {r['sglang-eager']:.1f} | {r['sglang-lazy']:.1f} "
            f"| {r['kvpool-eager']:.1f} | {r['kvpool-lazy']:.1f} | "
            f"{r['sglang-eager'] / r['kvpool-eager']:.1f}x | "
            f"{r['sglang-lazy'] / r['kvpool-lazy']:.1f}x |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Measure and print every cell; 1 without SGLang."""
    ns = probe_args("unified_tri", __doc__, "short windows", argv)
    try:
        make_target("sglang-eager", 1)
    except Exception as exc:
        print(f"SGLang 0.5.23 cannot be imported here: {exc}")
        return 1
    torch.set_num_threads(1)
    print(markdown(rows(QUICK if ns.quick else FULL)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
