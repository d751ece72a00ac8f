"""Entry point: ``python -m benchmarks [--quick] [--out DIR] [--threads N] ...``.

Pins glibc malloc (re-executes itself with ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_``
set, since glibc reads them only at start-up), loads every implementation that is installed
(missing ones are skipped with a line saying why), runs the workloads, and writes
``results.json``, ``results.md`` and one PNG per workload into ``--out``. Always exits 0 unless
the harness itself breaks; a workload that raises for one implementation is logged and skipped.
"""

from __future__ import annotations

import argparse
import os
import sys

MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "1073741824", "MALLOC_TRIM_THRESHOLD_": "1073741824"}
REEXEC_MARK = "KVPOOL_BENCH_REEXEC"


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--quick", action="store_true",
                   help="smoke run: pool sizes 1e4 and 1e5, short windows, 300 trace steps")
    p.add_argument("--out", default="benchmarks/results", help="output folder")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--sizes", type=int, nargs="+", help="pool sizes in pages (overrides mode)")
    p.add_argument("--workloads", nargs="+", default=["w1", "w2", "w3", "w4", "w5", "w6", "w7"],
                   help="subset of w1..w7 (w6: SGLang's scheduler-side code, needs .[sglang]; "
                        "w7: the hybrid sliding-window allocator)")
    p.add_argument("--skip", nargs="*", default=[], choices=["kvpool", "sglang", "vllm"],
                   help="implementations to leave out")
    p.add_argument("--trace-steps", type=int, help="steps of the W5 trace (default 10000)")
    p.add_argument("--no-pin-malloc", action="store_true", help="do not re-exec with pinned malloc")
    p.add_argument("--no-cuda", action="store_true", help="skip the CUDA pass even if present")
    p.add_argument("--no-memory", action="store_true", help="skip the metadata-bytes table")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--no-profile", action="store_true", help="skip the operator-count profile")
    return p.parse_args(argv)


def maybe_reexec(args: argparse.Namespace, argv: list[str]) -> None:
    """Re-execute with pinned malloc settings unless already set (or ``--no-pin-malloc``)."""
    if args.no_pin_malloc or os.environ.get(REEXEC_MARK):
        return
    if all(os.environ.get(k) for k in MALLOC_ENV):
        return
    env = dict(os.environ)
    for k, v in MALLOC_ENV.items():
        env.setdefault(k, v)
    env[REEXEC_MARK] = "1"
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "benchmarks", *argv], env)


def main(argv: list[str] | None = None) -> int:
    """Parse, pin malloc, run; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    maybe_reexec(args, argv)
    from benchmarks.runner import run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
