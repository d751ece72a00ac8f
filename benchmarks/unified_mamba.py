"""The unified full + Mamba composites side by side: SGLang 0.5.23's
``UnifiedMambaTokenToKVPoolAllocator`` and kvpool's ``UnifiedMambaAllocator``, per-call cost.

SGLang's built by its own pool builder (``build_unified_mamba``: 100 full pages plus the 8 state
slots it adds, in one byte buffer), kvpool's over the same whole buffer (checked mode on),
eager or lazy compaction; SGLang's sub-pool kernels on its torch fallbacks. Every target first
holds a quarter of its full pages and two state slots. Calls (the same trace on every target;
each step times only its call and restores the state untimed):

- ``alloc``: ``alloc(8 pages)``; ``extend``: ``alloc_extend`` of 2 requests × 4 pages from an
  empty prefix (ps 1: one ``alloc``); ``decode``: one page-opening decode token for 8 requests
  (ps 1: ``alloc(8)``, as SGLang's decode binds nothing there);
- ``free``: ``free`` of the 2 rows of the last extend; ``segment``: ``free_segment`` of them;
- ``translate``: ``translate_kv_loc`` of the 2 rows' tokens;
- ``state``: one state slot taken and released through ``mamba_allocator``;
- ``flush``: ``flush_opportunistic`` after a row below a live one was freed (lazy: one page
  copied a call; eager: nothing to do).

Medians of interleaved windows, µs per call. ``python -m benchmarks.unified_mamba [--quick]``.
"""

from __future__ import annotations

from typing import Any

import torch

from benchmarks.timing import Settings, Step, measure_interleaved, probe_args
from benchmarks.unified_tri import BATCH, ROW_PAGES, ROWS, extend, extend_call, i64, markdown
from benchmarks.unified_tri import timed as timed_step

FULL = Settings()
QUICK = Settings(warmup_steps=3, window_s=0.01, windows=3)

TARGETS = ("sglang-eager", "sglang-lazy", "kvpool-eager", "kvpool-lazy")
OPS = ("alloc", "extend", "decode", "free", "segment", "translate", "state", "flush")
FULL_PAGES = 100
ENTRY_BYTES = 32


def make_target(name: str, ps: int) -> Any:
    """A fresh composite of the named kind over ``FULL_PAGES`` full pages' bytes (plus the
    state slots SGLang's builder adds)."""
    from kvpool.impl import UnifiedMambaAllocator
    from kvpool.oracle.families.unified_mamba.peer import build_unified_mamba

    lazy = name.endswith("lazy")
    theirs = build_unified_mamba(total_bytes=FULL_PAGES * ps * ENTRY_BYTES, page_size=ps,
                                 lazy=lazy)
    if name.startswith("sglang"):
        return theirs
    return UnifiedMambaAllocator(theirs.unified_buffer.total_bytes, ps, lazy=lazy)


def _refilled(a: Any, ps: int, call: Any) -> Step:
    """Time ``call(rows)`` on the 2 rows of an extend, then extend them again, untimed."""
    held = {"rows": extend(a, [ROW_PAGES * ps] * ROWS)}

    def run() -> Any:
        return call(held["rows"])

    def refill(_: Any) -> None:
        held["rows"] = extend(a, [ROW_PAGES * ps] * ROWS)
    return timed_step(run, refill)


def _flush(a: Any, ps: int) -> Step:
    """A row freed below a live one (a hole under lazy compaction), then ``flush_opportunistic``
    timed; the live row freed and both extended again, untimed."""
    held = {"rows": [extend(a, [ps]), extend(a, [ps])]}
    a.free(held["rows"][0])

    def renew(_: Any) -> None:
        a.free(held["rows"][1])
        held["rows"] = [extend(a, [ps]), extend(a, [ps])]
        a.free(held["rows"][0])
    return timed_step(a.flush_opportunistic, renew)


def steps_for(op: str, a: Any, ps: int) -> Step:
    """The timed step of ``op`` on composite ``a`` (module docstring)."""
    if op == "alloc":
        return timed_step(lambda: a.alloc(BATCH * ps), a.free)
    if op == "extend":
        return timed_step(extend_call(a, [ROW_PAGES * ps] * ROWS), a.free)
    if op == "decode":
        if ps == 1:
            return timed_step(lambda: a.alloc(BATCH), a.free)
        seq = i64([ps + 1] * BATCH)
        heads = extend(a, [ps] * BATCH)
        last = heads.reshape(BATCH, ps)[:, -1].contiguous()
        return timed_step(lambda: a.alloc_decode(seq, seq, last), a.free)
    if op == "free":
        return _refilled(a, ps, a.free)
    if op == "segment":
        return _refilled(a, ps, lambda rows: a.free_segment(rows, start_pos=0))
    if op == "translate":
        rows = extend(a, [ROW_PAGES * ps] * ROWS)
        return timed_step(lambda: a.translate_kv_loc(rows), lambda _: None)
    if op == "state":
        ma = a.mamba_allocator
        return timed_step(lambda: ma.alloc(1), ma.free)
    if op == "flush":
        return _flush(a, ps)
    raise ValueError(op)


def cell(op: str, ps: int, settings: Settings) -> dict[str, Any]:
    """One operation at one page size on every composite, interleaved: µs per call."""
    steps: dict[str, Step] = {}
    for name in TARGETS:
        a = make_target(name, ps)
        extend(a, [FULL_PAGES // 4 * ps])  # a quarter of the full pages, held for the cell
        slots = a.mamba_allocator.alloc(2)
        assert slots is not None, f"{name}: no room for two state slots"
        steps[name] = steps_for(op, a, ps)

    def fail(name: str, exc: BaseException) -> None:
        raise RuntimeError(f"unified Mamba {op} ps={ps} on {name} failed: {exc!r}") from exc
    samples = measure_interleaved(steps, settings, fail)
    return {"op": op, "page_size": ps, **{n: samples[n].median_us for n in TARGETS}}


def rows(settings: Settings) -> list[dict[str, Any]]:
    """Every cell at page sizes 1 and 16."""
    return [cell(op, ps, settings) for ps in (1, 16) for op in OPS]


def main(argv: list[str] | None = None) -> int:
    """Measure and print every cell; 1 without SGLang."""
    ns = probe_args("unified_mamba", __doc__, "short windows", argv)
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
