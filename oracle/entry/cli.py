"""``python -m kvpool.oracle``: run the conformance matrix of an allocator family, or replay a
JSON trace. ``--family NAME`` (or the older form ``python -m kvpool.oracle NAME TARGET ...``)
runs a registered family (:mod:`kvpool.oracle.engine.registry`: its targets, default target and
budget, all listed in ``--help``) through the same run, report, coverage and clause gate.

Every run starts with the capabilities in force per target (``Capabilities.in_force``) and the
inferences made for an undeclared factory. Exit status (also in ``--help``): 0 every
configuration conformant and at least one call ran; 1 a divergence, a target that crashed, a
run that executed no call, or a coverage gap under ``--require-coverage``; 2 a usage error
(``kvpool.oracle.entry.plan.UsageError``, argparse).
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import sys
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvpool.spec.wording import counted, noun

from ..engine.registry import DEFAULT_FAMILY, FAMILIES, family_help
from ..engine.target import Config, Target

if TYPE_CHECKING:  # the runner (Hypothesis, torch) loads only when a run starts
    from ..engine.runner import Result


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


def _positive(kind: type) -> Any:
    """An argparse type: a number of ``kind`` that must be > 0 (a usage error otherwise)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


SOAK_MINUTES = 2.5  # per configuration under KVPOOL_PROFILE=soak (8 for kvpool: 20 minutes)

EXIT_CODES = """\
exit status:
  0  every configuration conformant (and at least one call ran)
  1  a divergence, a target that crashed, a run that executed no call, or
     (with --require-coverage) an event the capabilities allow never reached
  2  a usage error (bad option, target that cannot be imported or built,
     undeclared page size, unavailable device)"""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Description and epilog as written; an option's help that holds line breaks keeps them
    (each line wrapped on its own), any other help is wrapped as argparse does."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        if "\n" not in text:
            return super()._split_lines(text, width)
        out: list[str] = []
        for line in text.splitlines():
            indent = " " * (len(line) - len(line.lstrip()) + 2)  # a row continues indented
            out += textwrap.wrap(line, width, subsequent_indent=indent) or [""]
        return out


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m kvpool.oracle",
        description="Differential conformance run of a KV-cache allocator against kvpool.spec.\n"
        "TARGET is module:factory or an alias of the family (its targets under --family);\n"
        "none: the family's default target.",
        epilog="replay a trace: python -m kvpool.oracle replay TRACE.json --target TARGET\n"
        "writing a target (methods, capabilities, declarations): docs/writing-a-target.md\n\n"
        + EXIT_CODES,
        formatter_class=_Formatter,
    )
    p.add_argument("target", nargs="*", default=None, help="one or more targets (or a comma list)")
    p.add_argument(
        "--family",
        default=DEFAULT_FAMILY,
        choices=FAMILIES,
        metavar="FAMILY",
        help=family_help() + "\n(its default examples per configuration and steps per example; "
        "--examples and --steps override them)",
    )
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
        help="set capabilities (over the declared or inferred ones), e.g. "
        "checked=ValueError,segments=disjoint,page_sizes=4+16; checked takes true "
        "(ContractViolation), false, or exception classes (ValueError+AssertionError, "
        "mypkg.errors.AllocError), or per call: checked=alloc+free:ValueError (bad input is "
        "sent to those calls only; groups joined by /)",
    )
    budget = p.add_mutually_exclusive_group()
    budget.add_argument(
        "--examples",
        type=_positive(int),
        default=None,
        help="examples per configuration (default: the family's, see --family)",
    )
    budget.add_argument(
        "--minutes",
        type=_positive(float),
        default=None,
        help="time budget per configuration (rounds of fresh seeds until it is spent: how "
        "many depends on the machine; a failure prints its round's --seed); "
        f"KVPOOL_PROFILE=soak sets {SOAK_MINUTES} (a soak: about 10^6 calls in the kvpool matrix)",
    )
    p.add_argument("--seed", type=int, default=None, help="random seed (default: derandomized)")
    p.add_argument(
        "--steps",
        type=_positive(int),
        default=None,
        help="calls per example (default: the family's, see --family)",
    )
    p.add_argument(
        "--require-coverage",
        action="store_true",
        help="fail when an event the target's capabilities allow was never reached "
        "(see the coverage table)",
    )
    p.add_argument(
        "--json", default=None, metavar="PATH", help="write the run report (results, coverage)"
    )
    p.add_argument(
        "--jobs",
        type=_positive(int),
        default=1,
        help="run the configurations in N processes (pytest-xdist, through the pytest plugin: "
        "one merged report); see kvpool.oracle.entry.parallel",
    )
    p.add_argument(
        "--rounds",
        type=_positive(int),
        default=1,
        help="a soak: R rounds of every configuration, round r with seed --seed + r (runs "
        "through the pytest plugin, like --jobs)",
    )
    p.add_argument(
        "--data-plane",
        action="store_true",
        help="also check the KV bytes: a signature written into every slot handed out, read "
        "back after every call (SPEC.md DATA-1..3; kvpool.oracle.engine.dataplane)",
    )
    p.add_argument(
        "--trace-dir",
        default=None,
        help="where failing traces are written as JSON (default: $KVPOOL_HOME/traces, "
        "KVPOOL_HOME defaulting to ~/.cache/kvpool; '.' for the current directory)",
    )
    p.add_argument(
        "--hypothesis-dir",
        default=None,
        help="where Hypothesis keeps its files (default: $HYPOTHESIS_STORAGE_DIRECTORY, else "
        "$KVPOOL_HOME/hypothesis); runs use no example database, so a seeded run replays "
        "no earlier failure",
    )
    return p


def _fail_usage(message: str, trace: str = "") -> int:
    if trace:
        print(trace.rstrip(), file=sys.stderr)
    print(f"kvpool.oracle: error: {message}", file=sys.stderr)
    return 2


def run_main(argv: list[str], *, command_line: bool = False) -> int:
    """A run; ``command_line``: this process is the command (it may point Hypothesis's files
    at the kvpool home; an in-process caller's Hypothesis is left alone unless it passes
    ``--hypothesis-dir``)."""
    args = _run_parser().parse_args(argv)
    from .paths import default_trace_dir, hypothesis_dir, use_hypothesis_dir

    args.trace_dir = args.trace_dir or str(default_trace_dir())
    soak = os.environ.get("KVPOOL_PROFILE") == "soak" and "--examples" not in argv
    if args.minutes is None and soak:
        args.minutes = SOAK_MINUTES
    from ..engine.families import family
    from .plan import UsageError, plan

    fam = family(args.family)
    if args.data_plane:  # every engine of this process and of its workers (the environment)
        from ..engine.dataplane import ENV

        os.environ[ENV] = "1"
    args.examples = args.examples or fam.default_examples
    args.steps = args.steps or fam.default_steps
    if command_line or args.hypothesis_dir:
        use_hypothesis_dir(hypothesis_dir(args.hypothesis_dir))
    if args.jobs > 1 or args.rounds > 1:
        from .parallel import run_parallel

        return run_parallel(args)
    try:
        planned = plan(
            ",".join(args.target) or None,
            order=args.order,
            page_sizes=_flat(args.page_sizes),
            need_sort=_flat(args.need_sort),
            declare=args.declare,
            device=args.device,
            family=args.family,
        )
    except UsageError as err:
        return _fail_usage(str(err), err.trace)
    for p in planned:
        print(p.in_force(), flush=True)
        if p.target.notes:
            print(f"  inferred from the instance: {'; '.join(p.target.notes)}", flush=True)
    from ..reporting.run_report import report_run

    results: list[Result] = []
    start = time.perf_counter()
    for p in planned:
        for config in p.configs:
            results.append(_run_one(p.target, config, args))
    targets = [p.target for p in planned for _ in p.configs]
    code = report_run(
        results,
        targets,
        fam.clauses,
        seconds=time.perf_counter() - start,
        gate=args.require_coverage,
        json_path=args.json,
    )
    if code and args.require_coverage and args.minutes is None and all(r.ok for r in results):
        from .reach import estimate

        print("  how many examples reach them (the same seed, doubled budgets):", flush=True)
        for line in estimate(results, targets, fam.clauses, examples=args.examples,
                             seed=args.seed, step_count=args.steps):
            print(line, flush=True)
    return code


def trace_path(trace_dir: str | Path, target: str, config: Config) -> Path:
    """A new file for one failing run's JSON trace: target, configuration, UTC time and, when
    that name exists already, a counter; an existing trace is never overwritten."""
    stem = f"{target}-ps{config.page_size}-ns{int(config.need_sort)}-{config.order}"
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem) + time.strftime("-%Y%m%dT%H%M%SZ", time.gmtime())
    folder = Path(trace_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        path = folder / (f"{stem}.json" if n == 1 else f"{stem}-{n}.json")
        try:
            path.open("x").close()
        except FileExistsError:
            continue
        return path
    raise AssertionError("unreachable")  # pragma: no cover


def _run_one(target: Target, config: Config, args: argparse.Namespace) -> Result:
    """Run one configuration, print its progress line and, on failure, its report."""
    from ..engine.runner import run_config, run_for

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
        f"{target.path:46s} {config.label():36s} {r.status():10s} {r.examples:5d} "
        f"{noun(r.examples, 'example'):8s} {r.calls:6d} {noun(r.calls, 'call'):5s} "
        f"{r.seconds:6.1f} s {rate:6.0f} calls/s",
        flush=True,
    )
    if r.failure is not None:
        r.failure.write_json(trace_path(args.trace_dir, target.path, config))
        print(r.failure.report(), flush=True)
        if args.minutes is not None:  # the round that failed, without the clock
            print(f"  the failing round again: --seed {r.seed} --examples 100", flush=True)
    if r.error is not None:
        print(f"  error: {r.error}", flush=True)
    return r


def replay_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="python -m kvpool.oracle replay", description="Replay a JSON trace against a target."
    )
    p.add_argument("trace")
    p.add_argument("--target", default=None, help="module:factory (default: the recorded one)")
    p.add_argument("--order", choices=("exact", "contract"), default=None)
    args = p.parse_args(argv)
    from ..engine.replay import replay
    from ..engine.trace import Trace
    from .plan import UsageError, plan

    try:
        trace = Trace.from_json(Path(args.trace).read_text())
    except (OSError, ValueError, TypeError, KeyError) as err:
        return _fail_usage(f"cannot read trace {args.trace}: {err}")
    try:
        planned = plan(args.target or trace.target, device=trace.device, family=trace.family)
        targets = [p.target for p in planned]
    except UsageError as err:
        return _fail_usage(str(err), err.trace)
    if len(targets) != 1:
        return _fail_usage("replay needs exactly one target (module:factory)")
    failure = replay(trace, targets[0], order=args.order)
    if failure is None:
        print(
            f"{targets[0].path}: the trace replays without divergence "
            f"({counted(trace.num_calls(), 'call')})"
        )
        return 0
    print(failure.report())
    return 1


def main(argv: list[str] | None = None) -> int:
    command_line = argv is None
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "replay":
        return replay_main(argv[1:])
    if argv and argv[0] in FAMILIES:  # the older form of --family NAME (``hybrid TARGET``)
        return run_main(["--family", argv[0], *argv[1:]], command_line=command_line)
    return run_main(argv, command_line=command_line)
