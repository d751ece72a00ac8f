"""pytest plugin (entry point ``pytest11: kvpool``): ``pytest --kvpool-target module:factory``.

Without the option it does nothing and imports nothing beyond pytest and the family registry
(its options' help lists the families and their default budgets). With it, the target is
resolved like the command line does (:func:`kvpool.oracle.entry.plan.plan`, the same options and the
same usage errors), importing from the rootdir as ``python -m pytest`` would; the header names
the capabilities in force; each target becomes a collector ``kvpool_conformance[<target>]``
with one test per configuration (``ps4-unsorted-contract``), counted in "collected N items" and
selectable with ``-k``. Options: ``--kvpool-order``, ``--kvpool-page-sizes 1,16``,
``--kvpool-need-sort false,true``, ``--kvpool-declare KEY=VALUE,...``, ``--kvpool-device``,
``--kvpool-examples``, ``--kvpool-steps``, ``--kvpool-seed``, ``--kvpool-family hybrid``.

Parallel and soak runs (pytest-xdist): ``-n auto`` spreads the items over workers;
``--kvpool-rounds R`` makes R items per configuration, round ``r`` with the seed
``--kvpool-seed`` + ``r`` (round 0 of a one-round run is derandomized), so every item is
reproducible on its own whatever worker or machine runs it. Each item hands its result (counts,
coverage, step hash, status) to the controlling process, which prints one merged report (summary,
coverage table, clause table) as ``python -m kvpool.oracle`` does, writes it with
``--kvpool-json PATH``, and fails the session on a gap under ``--kvpool-require-coverage``. A
failing item's report holds its trace and repro; ``--kvpool-trace-dir DIR`` also writes the
JSON trace there.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .engine.registry import DEFAULT_FAMILY, FAMILIES, family_help, target_help

_PLAN = pytest.StashKey[list[Any]]()
_ROWS = pytest.StashKey[list[dict[str, Any]]]()  # results handed in by the items (any worker)
_VERDICT = pytest.StashKey[int]()
_RESULTS = pytest.StashKey["_Results"]()
_REPORT = pytest.StashKey[str]()
_PROPERTY = "kvpool_result"


def _csv(kind: str) -> Any:
    def parse(text: str) -> list[Any]:
        parts = [p.strip().lower() for p in text.replace("+", ",").split(",") if p.strip()]
        if kind == "int":
            return [int(p) for p in parts]
        if any(p not in ("true", "false", "1", "0") for p in parts):
            raise ValueError(f"{text!r}: need_sort values are true/false")
        return [p in ("true", "1") for p in parts]

    parse.__name__ = f"{kind} list"
    return parse


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kvpool", "kvpool allocator conformance (kvpool.oracle)")
    add = group.addoption
    add(
        "--kvpool-target",
        action="append",
        default=[],
        metavar="MODULE:FACTORY",
        help="run the kvpool conformance oracle against this allocator factory "
        f"(repeatable): {target_help('--kvpool-family')}",
    )
    add(
        "--kvpool-order",
        choices=("exact", "contract"),
        default=None,
        help="exact: slot-for-slot against the reference order; contract: any "
        "correct choice (default: what the target declares)",
    )
    add("--kvpool-page-sizes", type=_csv("int"), default=None, metavar="PS,...")
    add("--kvpool-need-sort", type=_csv("bool"), default=None, metavar="BOOL,...")
    add(
        "--kvpool-declare",
        default=None,
        metavar="KEY=VALUE,...",
        help="capabilities, as python -m kvpool.oracle --declare (e.g. checked=ValueError)",
    )
    add("--kvpool-device", default="cpu")
    add("--kvpool-examples", type=int, default=None,
        help="Hypothesis examples per configuration (default: the family's, see --kvpool-family)")
    add("--kvpool-steps", type=int, default=None,
        help="calls per example (default: the family's, see --kvpool-family)")
    add("--kvpool-seed", type=int, default=None, help="random seed (rounds: the first round's)")
    add("--kvpool-family", default=DEFAULT_FAMILY, choices=list(FAMILIES),
        help=family_help(one_line=True))
    add("--kvpool-rounds", type=int, default=1, help="items per configuration, one seed each")
    add("--kvpool-json", default=None, metavar="PATH", help="write the merged run report")
    add("--kvpool-require-coverage", action="store_true", help="fail on a coverage gap")
    add("--kvpool-trace-dir", default=None, metavar="DIR", help="write failing traces here")
    add("--kvpool-data-plane", action="store_true",
        help="also check the KV bytes of every live slot (SPEC.md DATA-1..3)")


def pytest_configure(config: pytest.Config) -> None:
    specs = config.getoption("kvpool_target", default=None)
    if not specs:
        return
    from .entry.plan import UsageError, plan

    if config.getoption("kvpool_data_plane"):  # the engines of this process and its workers
        from .engine.dataplane import ENV

        os.environ[ENV] = "1"
    for name in ("kvpool_examples", "kvpool_steps", "kvpool_rounds"):
        value = config.getoption(name)
        if value is not None and value < 1:
            raise pytest.UsageError(f"--{name.replace('_', '-')} must be > 0, got {value}")
    for root in (str(config.rootpath), str(config.invocation_params.dir)):
        if root not in sys.path:  # import the user's module as `python -m pytest` would
            sys.path.insert(0, root)
    planned: list[Any] = []
    for spec in specs:
        try:
            planned += plan(
                spec,
                order=config.getoption("kvpool_order"),
                page_sizes=config.getoption("kvpool_page_sizes"),
                need_sort=config.getoption("kvpool_need_sort"),
                declare=config.getoption("kvpool_declare"),
                device=config.getoption("kvpool_device"),
                family=config.getoption("kvpool_family"),
            )
        except UsageError as err:
            trace = f"\n{err.trace}" if err.trace else ""
            raise pytest.UsageError(f"--kvpool-target {spec}: {err}{trace}") from None
    config.stash[_PLAN] = planned
    config.stash[_ROWS] = []
    config.stash[_RESULTS] = _Results(config)
    config.pluginmanager.register(config.stash[_RESULTS], "kvpool-results")


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [p.in_force() for p in config.stash.get(_PLAN, [])]


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """The session's own collection gains one collector per target (counted like files)."""
    report: Any = yield
    planned = collector.config.stash.get(_PLAN, [])
    if isinstance(collector, pytest.Session) and planned and report.passed:
        report.result.extend(KvpoolTarget.for_plan(collector, p) for p in planned)
    return report  # type: ignore[no-any-return]


class KvpoolTarget(pytest.Collector):
    """One target: a test per configuration of its matrix."""

    planned: Any

    @classmethod
    def for_plan(cls, session: pytest.Session, planned: Any) -> KvpoolTarget:
        name = f"kvpool_conformance[{planned.target.path}]"
        node = cls.from_parent(session, name=name, nodeid=name)
        node.planned = planned
        return node

    def collect(self) -> Iterator[pytest.Item]:
        rounds, seed = self.config.getoption("kvpool_rounds"), self.config.getoption("kvpool_seed")
        for cfg in self.planned.configs:
            name = f"ps{cfg.page_size}-{'sorted' if cfg.need_sort else 'unsorted'}-{cfg.order}"
            for r in range(rounds):
                round_seed = seed if rounds == 1 else (seed or 0) + r
                yield KvpoolItem.from_parent(
                    self, name=name + (f"-r{r}" if rounds > 1 else ""), kvpool_config=cfg,
                    kvpool_seed=round_seed,
                )


class KvpoolItem(pytest.Item):
    """One target configuration (one round of it) run by the oracle."""

    def __init__(self, *, kvpool_config: Any, kvpool_seed: int | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kvpool_config = kvpool_config
        self.kvpool_seed = kvpool_seed
        self.report_text: str | None = None

    def runtest(self) -> None:
        from .engine.families import family
        from .engine.runner import run_config
        from .entry.cli import trace_path
        from .reporting.run_report import result_row

        opt = self.config.getoption
        target = self.parent.planned.target  # type: ignore[union-attr]
        fam = family(target.family)
        result = run_config(
            target,
            self.kvpool_config,
            max_examples=opt("kvpool_examples") or fam.default_examples,
            step_count=opt("kvpool_steps") or fam.default_steps,
            seed=self.kvpool_seed,
        )
        row = result_row(result, target, fam.clauses) | {"seed": self.kvpool_seed}
        self.user_properties.append((_PROPERTY, json.dumps(row)))
        if result.failure is not None and opt("kvpool_trace_dir"):
            where = trace_path(opt("kvpool_trace_dir"), target.path, self.kvpool_config)
            result.failure.write_json(where)
        if result.failure is not None:
            self.report_text = result.failure.report()
        elif result.error is not None:
            self.report_text = f"kvpool.oracle: {target.path}: {result.error}"
        elif not result.ok:
            self.report_text = f"kvpool.oracle: {target.path}: no call ran, nothing was tested"
        if self.report_text is not None:
            if self.kvpool_seed is not None:  # a soak round: the seed that replays it
                self.report_text += (f"\n  this round again: --seed {self.kvpool_seed} (one "
                                     f"round, the same examples and steps)")
            raise AssertionError(self.report_text)

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        return self.report_text or str(excinfo.value)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.nodeid


class _Results:
    """Collects each item's result where the session is controlled (with xdist: the
    controller, to which the workers send their reports, user properties included)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.start = time.perf_counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == _PROPERTY and report.when == "call":
                self.config.stash[_ROWS].append(json.loads(str(value)))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Merge the results into one report; a coverage gap under the gate fails the session."""
    config = session.config
    rows = config.stash.get(_ROWS, [])
    if not rows or hasattr(config, "workerinput"):  # an xdist worker: the controller merges
        return
    text, status = _merged_report(config, rows)
    config.stash[_VERDICT] = status
    config.stash[_REPORT] = text
    if status and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    text = terminalreporter.config.stash.get(_REPORT, None)
    if text:
        terminalreporter.write_sep("=", "kvpool.oracle merged report")
        for line in text.splitlines():
            terminalreporter.write_line(line)


def _merged_report(config: pytest.Config, rows: list[dict[str, Any]]) -> tuple[str, int]:
    from .engine.families import family
    from .reporting.run_report import report_run, result_from_row

    targets = {p.target.path: p.target for p in config.stash.get(_PLAN, [])}
    rows = sorted(rows, key=lambda r: (r["target"], r["page_size"], r["need_sort"],
                                       r["order"], r["seed"] if r["seed"] is not None else -1))
    results = [result_from_row(r) for r in rows]
    chosen = [targets[r["target"]] for r in rows]
    fam = family(chosen[0].family)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = report_run(
            results, chosen, fam.clauses,
            seconds=time.perf_counter() - config.stash[_RESULTS].start,
            gate=config.getoption("kvpool_require_coverage"),
            json_path=config.getoption("kvpool_json"),
        )
    return out.getvalue(), status
