"""What SGLang's ``alloc_extend`` call shape costs on the CPU before any allocator work.

Target 2 of the benchmark compares W3's whole ``alloc_extend`` call with its output floor, one
numpy operation writing the result. This probe splits that gap, for W3's own batches and with
every row's windows interleaved in one process (:func:`benchmarks.timing.measure_interleaved`):

- ``floor``: the output floor (:func:`benchmarks.workloads.output_floor`).
- ``call``: a Python method with ``alloc_extend``'s six arguments that returns
  ``torch.empty(extend_num_tokens, dtype=torch.int64)``: the result must be a new tensor.
- ``call+numpy``: ``call`` plus reading the three CPU tensors the way a numpy host path does
  (``Tensor.numpy()`` of ``prefix_lens_cpu``, ``seq_lens_cpu`` and ``last_loc``).
- ``call+ptr``: ``call`` plus the same three tensors' ``data_ptr()``, the hand-off a compiled
  host path would take instead.
- ``kvpool``: kvpool's ``alloc_extend``, W3's own step (:func:`benchmarks.workloads.w3_step`).

``python -m benchmarks.call_floor [--out DIR] [--quick]`` prints one line per row and writes
``call_floor.json`` and ``call_floor.md`` to DIR (default ``benchmarks/results``). ``--quick``
measures one pool size with short windows (a smoke run).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import kvpool.impl as kvpool_impl
import torch

from benchmarks.timing import Settings, Step, measure_interleaved, probe_args
from benchmarks.workloads import output_floor, w3_step

FULL = Settings()
QUICK = Settings(warmup_steps=5, window_s=0.01, windows=3)
POOL_SIZES = (10_000, 1_000_000)
PAGE_SIZES = (1, 16)
ROWS = ("floor", "call", "call+numpy", "call+ptr", "kvpool")


class CallShape:
    """``alloc_extend``'s signature with no allocator behind it (see the module docstring)."""

    def __init__(self, read: Callable[[torch.Tensor], Any] | None) -> None:
        self._read = read

    def alloc_extend(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                     seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                     last_loc: torch.Tensor, extend_num_tokens: int) -> torch.Tensor:
        """A new int64 tensor of ``extend_num_tokens`` uninitialised slots, after reading the
        three CPU tensors with the hand-off given at construction (none for ``None``)."""
        read = self._read
        if read is not None:
            read(prefix_lens_cpu)
            read(seq_lens_cpu)
            read(last_loc)
        return torch.empty(extend_num_tokens, dtype=torch.int64)


def _shape_step(read: Callable[[torch.Tensor], Any] | None, args: tuple[Any, ...]) -> Step:
    shape = CallShape(read)

    def step() -> None:
        shape.alloc_extend(*args)
    return step


def cell(num_pages: int, ps: int, need_sort: bool, settings: Settings) -> list[dict[str, Any]]:
    """The five rows of one (pool size, page size, need_sort) cell, µs and ratio to the floor.

    Raises RuntimeError when a row fails (every row is plain Python on fixed inputs)."""
    kv_step, args = w3_step(kvpool_impl, num_pages, ps, need_sort, "cpu")
    floor_step, _ = output_floor(args[-1])()
    steps: dict[str, Step] = {
        "floor": floor_step, "call": _shape_step(None, args),
        "call+numpy": _shape_step(torch.Tensor.numpy, args),
        "call+ptr": _shape_step(torch.Tensor.data_ptr, args), "kvpool": kv_step}

    def fail(name: str, exc: BaseException) -> None:
        raise RuntimeError(f"call_floor row {name} failed: {exc!r}") from exc
    samples = measure_interleaved(steps, settings, fail)
    floor_us = samples["floor"].median_us
    return [{"num_pages": num_pages, "page_size": ps, "need_sort": need_sort,
             "num_tokens": args[-1], "row": name, "median_us": samples[name].median_us,
             "over_floor": samples[name].median_us / floor_us} for name in ROWS]


def markdown(rows: list[dict[str, Any]]) -> str:
    """One table line per cell: each row's µs with its ratio to the floor."""
    head = "| P | ps | need_sort | tokens | " + " | ".join(ROWS) + " |"
    lines = [head, "|" + "---|" * (4 + len(ROWS))]
    for i in range(0, len(rows), len(ROWS)):
        group = rows[i:i + len(ROWS)]
        first = group[0]
        cells = " | ".join(f"{r['median_us']:.2f} ({r['over_floor']:.1f}x)" for r in group)
        lines.append(f"| {first['num_pages']:.0e} | {first['page_size']} | "
                     f"{first['need_sort']} | {first['num_tokens']} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Measure every cell, print and write the results; 0 on success."""
    ns = probe_args("call_floor", __doc__, "one pool size, short windows", argv)
    torch.set_num_threads(1)
    settings, sizes = (QUICK, POOL_SIZES[:1]) if ns.quick else (FULL, POOL_SIZES)
    rows: list[dict[str, Any]] = []
    for num_pages in sizes:
        for ps in PAGE_SIZES:
            for need_sort in (False, True):
                got = cell(num_pages, ps, need_sort, settings)
                rows += got
                print(f"P={num_pages:.0e} ps={ps} need_sort={need_sort}: " + ", ".join(
                    f"{r['row']} {r['median_us']:.2f} µs ({r['over_floor']:.1f}x)"
                    for r in got), flush=True)
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "call_floor.json").write_text(json.dumps(rows, indent=1) + "\n")
    (ns.out / "call_floor.md").write_text(
        "µs per call, median of interleaved window means (ratio to the output floor)\n\n"
        + markdown(rows))
    print(f"wrote {ns.out / 'call_floor.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
