"""``python -m kvpool.oracle hybrid [TARGET ...]``: the hybrid sliding-window conformance run.

TARGET is ``kvpool-swa`` (default), ``kvpool-swa-unchecked``, ``sglang-swa`` or a
``module:factory`` whose factory takes ``size=, size_swa=, page_size=, need_sort=, device=``
(declare with ``factory.kvpool_hybrid_capabilities``; undeclared: unchecked, page sizes 1 and
4). Exit status: 0 conformant, 1 a divergence (its repro is printed), 2 a usage error.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from .hybrid_runner import run_hybrid
from .hybrid_targets import HYBRID_TARGETS


def _factory(name: str) -> Any:
    if name in HYBRID_TARGETS:
        return HYBRID_TARGETS[name]
    module, sep, attr = name.partition(":")
    if not sep:
        raise ValueError(f"{name!r}: not one of {sorted(HYBRID_TARGETS)} nor module:factory")
    return getattr(importlib.import_module(module), attr)


def hybrid_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m kvpool.oracle hybrid",
                                description="Run the hybrid (SWA) oracle against targets.")
    p.add_argument("targets", nargs="*", default=["kvpool-swa"])
    p.add_argument("--examples", type=int, default=60, help="examples per configuration")
    args = p.parse_args(argv)
    status = 0
    for name in args.targets:
        try:
            factory = _factory(name)
        except (ValueError, ImportError, AttributeError) as err:
            print(f"usage error: {err}")
            return 2
        result = run_hybrid(factory, max_examples=args.examples)
        print(result.summary())
        if not result.ok:
            if result.failure is not None:
                print(result.failure.report())
            status = 1
    return status
