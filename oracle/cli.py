"""``python -m kvpool.oracle``: run the conformance matrix, or replay a JSON trace.

Exit status: 0 conformant, 1 a divergence (or a target that crashed), 2 a usage or import error.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

from .capabilities import Capabilities, parse_declaration
from .runner import (
    DEFAULT_EXAMPLES,
    DEFAULT_STEPS,
    Config,
    Result,
    Target,
    configs_for,
    run_config,
    run_for,
)


def _bools(text: str) -> list[bool]:
    out = []
    for part in text.split(","):
        if part.strip().lower() not in ("true", "false", "1", "0"):
            raise argparse.ArgumentTypeError(f"{part!r} is not true/false")
        out.append(part.strip().lower() in ("true", "1"))
    return out


def _ints(text: str) -> list[int]:
    try:
        return [int(p) for p in text.split(",")]
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _flat(values: list[list[Any]] | None) -> list[Any] | None:
    return None if values is None else [v for group in values for v in group]


def _declare_from_options(caps: Capabilities, args: argparse.Namespace) -> Capabilities:
    """An undeclared factory supports what the options ask for."""
    changes: dict[str, Any] = {}
    if args.page_sizes:
        changes["page_sizes"] = tuple(args.page_sizes)
    if args.need_sort:
        changes["need_sort"] = tuple(args.need_sort)
    return caps.replace(**changes)


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m kvpool.oracle",
        description="Differential conformance run of a KV-cache allocator against kvpool.spec. "
        "TARGET is module:factory or an alias (kvpool, sglang); default kvpool.",
        epilog="Replay a trace: python -m kvpool.oracle replay TRACE.json --target TARGET",
    )
    p.add_argument("target", nargs="?", default=None)
    p.add_argument(
        "--order",
        choices=("exact", "contract"),
        default=None,
        help="compare slot for slot (exact) or by contract acceptance; default: "
        "exact if the target declares the reference order",
    )
    p.add_argument(
        "--page-sizes",
        type=_ints,
        nargs="+",
        default=None,
        metavar="PS",
        help="page sizes to run, e.g. 1 16 or 1,16 (default: the declared ones; "
        "for a factory that declares nothing, these become its declaration)",
    )
    p.add_argument(
        "--need-sort",
        type=_bools,
        nargs="+",
        default=None,
        metavar="BOOL",
        help="need_sort values, e.g. false true (default: the declared ones)",
    )
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--declare",
        default=None,
        metavar="KEY=VALUE,...",
        help="override the target's declared capabilities, e.g. "
        "checked=false,segments=disjoint,page_sizes=4+16",
    )
    budget = p.add_mutually_exclusive_group()
    budget.add_argument(
        "--examples",
        type=int,
        default=DEFAULT_EXAMPLES,
        help=f"examples per configuration (default {DEFAULT_EXAMPLES})",
    )
    budget.add_argument("--minutes", type=float, default=None, help="time budget per configuration")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: derandomized)")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="calls per example")
    p.add_argument(
        "--trace-dir",
        default="kvpool-traces",
        help="where failing traces are written as JSON",
    )
    return p


def _fail_usage(message: str) -> int:
    print(f"kvpool.oracle: error: {message}", file=sys.stderr)
    return 2


def _load(spec: str) -> list[Target]:
    from .targets import expand, load_target, probe

    targets = []
    for path in expand(spec):
        target = load_target(path)
        probe(target)
        targets.append(target)
    return targets


def run_main(argv: list[str]) -> int:
    args = _run_parser().parse_args(argv)
    from .targets import DEFAULT_TARGET, TargetError

    try:
        targets = _load(args.target or DEFAULT_TARGET)
        args.page_sizes = _flat(args.page_sizes)
        args.need_sort = _flat(args.need_sort)
        for target in targets:
            if getattr(target.factory, "kvpool_capabilities", None) is None:  # undeclared
                target.caps = _declare_from_options(target.caps, args)
            if args.declare:
                target.caps = parse_declaration(args.declare, target.caps)
    except TargetError as err:
        return _fail_usage(str(err))
    except ValueError as err:
        return _fail_usage(f"--declare: {err}")
    plan = [
        (target, config)
        for target in targets
        for config in configs_for(
            target.caps,
            order=args.order,
            page_sizes=args.page_sizes,
            need_sort=args.need_sort,
            device=args.device,
        )
    ]
    if not plan:
        described = "; ".join(f"{t.path}: {t.caps.describe()}" for t in targets)
        return _fail_usage(f"no configuration matches the options ({described})")
    results: list[Result] = []
    start = time.perf_counter()
    for target, config in plan:
        results.append(_run_one(target, config, args))
    _summary(results, time.perf_counter() - start)
    return 0 if all(r.ok for r in results) else 1


def _run_one(target: Target, config: Config, args: argparse.Namespace) -> Result:
    """Run one configuration, print its progress line and, on failure, its report."""
    if args.minutes is not None:
        r = run_for(
            target, config, seconds=args.minutes * 60, seed=args.seed or 0, step_count=args.steps
        )
    else:
        r = run_config(
            target, config, max_examples=args.examples, seed=args.seed, step_count=args.steps
        )
    rate = r.calls / r.seconds if r.seconds else 0.0
    print(
        f"{target.path:46s} {config.label():36s} {r.status():10s} {r.examples:5d} examples "
        f"{r.calls:6d} calls {r.seconds:6.1f} s {rate:6.0f} calls/s",
        flush=True,
    )
    if r.failure is not None:
        stem = f"{target.path}-ps{config.page_size}-ns{int(config.need_sort)}-{config.order}"
        Path(args.trace_dir).mkdir(parents=True, exist_ok=True)
        r.failure.write_json(
            Path(args.trace_dir) / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', stem)}.json"
        )
        print(r.failure.report(), flush=True)
    if r.error is not None:
        print(f"  error: {r.error}", flush=True)
    return r


def _summary(results: list[Result], seconds: float) -> None:
    print("\nsummary")
    print(f"  {'target':46s} {'configuration':36s} {'result':10s} {'examples':>8s} {'calls':>7s}")
    for r in results:
        print(
            f"  {r.target:46s} {r.config.label():36s} {r.status():10s} {r.examples:8d} {r.calls:7d}"
        )
    bad = sum(not r.ok for r in results)
    verdict = "conformant" if not bad else f"{bad} configuration(s) diverge"
    print(
        f"  {len(results)} configurations, {sum(r.calls for r in results)} calls, "
        f"{seconds:.1f} s: {verdict}"
    )


def replay_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="python -m kvpool.oracle replay", description="Replay a JSON trace against a target."
    )
    p.add_argument("trace")
    p.add_argument("--target", default=None, help="module:factory (default: the recorded one)")
    p.add_argument("--order", choices=("exact", "contract"), default=None)
    args = p.parse_args(argv)
    from .replay import replay
    from .targets import TargetError
    from .trace import Trace

    try:
        trace = Trace.from_json(Path(args.trace).read_text())
        targets = _load(args.target or trace.target)
    except (OSError, ValueError, TypeError, KeyError) as err:
        return _fail_usage(f"cannot read trace {args.trace}: {err}")
    except TargetError as err:
        return _fail_usage(str(err))
    if len(targets) != 1:
        return _fail_usage("replay needs exactly one target (module:factory)")
    failure = replay(trace, targets[0], order=args.order)
    if failure is None:
        print(
            f"{targets[0].path}: the trace replays without divergence ({trace.num_calls()} calls)"
        )
        return 0
    print(failure.report())
    return 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "replay":
        return replay_main(argv[1:])
    return run_main(argv)
