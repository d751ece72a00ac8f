"""``python -m kvpool.oracle --jobs N``: the same run spread over N processes.

No pool of its own: the command becomes a pytest session of the oracle's plugin
(:mod:`kvpool.oracle.pytest_plugin`, one item per configuration) on pytest-xdist with N workers,
collected from an empty folder so that nothing but the oracle's items runs. Each configuration
keeps its derandomized (or ``--seed``) examples, so verdicts, counts, step hashes and coverage
are those of the serial run; the controller prints one merged report (and ``--json``).
``--rounds R`` makes it a soak (R seeds per configuration). Several machines: the same pytest
session with xdist's ``--tx`` options, or one soak per machine with disjoint ``--seed`` ranges
(CONTRIBUTING.md, the oracle's map).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from ..engine.registry import registered


def pytest_args(args: argparse.Namespace, folder: str) -> list[str]:
    """The pytest command line for the parsed ``python -m kvpool.oracle`` options ``args``
    (no target: the family's default one). Raises ValueError for an unknown family."""
    argv = [folder, "-q", "-p", "no:cacheprovider", "--rootdir", folder, "-n", str(args.jobs)]
    argv += ["--kvpool-family", args.family, "--kvpool-device", args.device]
    argv += ["--kvpool-examples", str(args.examples), "--kvpool-steps", str(args.steps)]
    argv += ["--kvpool-rounds", str(args.rounds)]
    for target in args.target or []:
        argv += ["--kvpool-target", target]
    if not args.target:  # the family's default target (its registry record's)
        argv += ["--kvpool-target", registered(args.family).default_target]
    options = {
        "--kvpool-order": args.order,
        "--kvpool-seed": args.seed,
        "--kvpool-declare": args.declare,
        "--kvpool-json": args.json,
        "--kvpool-trace-dir": args.trace_dir,
        "--kvpool-page-sizes": _join(args.page_sizes),
        "--kvpool-need-sort": _join(args.need_sort),
    }
    for name, value in options.items():
        if value is not None:
            argv += [name, str(value)]
    return argv + (["--kvpool-require-coverage"] if args.require_coverage else [])


def _join(values: list[list[object]] | None) -> str | None:
    if values is None:
        return None
    return ",".join(str(v).lower() for group in values for v in group)


def run_parallel(args: argparse.Namespace) -> int:
    """Run the session; exit status as the serial run's (0 conformant, 1 a divergence or gap,
    2 a usage error). Raises nothing for a missing pytest-xdist: a usage error (2)."""
    import pytest

    try:
        import xdist  # noqa: F401
    except ImportError:
        print("kvpool.oracle: error: --jobs needs pytest-xdist (pip install 'kvpool[test]')")
        return 2
    saved = os.environ.get("PYTHONPATH")
    # the workers import the targets this process can import (its sys.path, the cwd first)
    paths = [os.getcwd(), *(p for p in sys.path if p and os.path.isdir(p))]
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths, *([saved] if saved else [])])
    try:
        with tempfile.TemporaryDirectory(prefix="kvpool-oracle-") as folder:
            code = int(pytest.main(pytest_args(args, folder)))
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return {0: 0, 1: 1}.get(code, 2)
