"""pytest plugin (entry point ``pytest11: kvpool``): ``pytest --kvpool-target module:factory``.

Without the option it does nothing and imports nothing beyond pytest. With it, the target is
resolved like the command line does (:func:`kvpool.oracle.plan.plan`, the same options and the
same usage errors), importing from the rootdir as ``python -m pytest`` would; the header names
the capabilities in force; each target becomes a collector ``kvpool_conformance[<target>]``
with one test per configuration (``ps4-unsorted-contract``), counted in "collected N items" and
selectable with ``-k``. Options: ``--kvpool-order``, ``--kvpool-page-sizes 1,16``,
``--kvpool-need-sort false,true``, ``--kvpool-declare KEY=VALUE,...``, ``--kvpool-device``,
``--kvpool-examples``, ``--kvpool-steps``, ``--kvpool-seed``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

_PLAN = pytest.StashKey[list[Any]]()


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
        "(repeatable; aliases: kvpool, kvpool-unchecked, sglang)",
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
    add("--kvpool-examples", type=int, default=None, help="Hypothesis examples per configuration")
    add("--kvpool-steps", type=int, default=None, help="calls per example")
    add("--kvpool-seed", type=int, default=None, help="random seed")


def pytest_configure(config: pytest.Config) -> None:
    specs = config.getoption("kvpool_target", default=None)
    if not specs:
        return
    from .plan import UsageError, plan

    for name in ("kvpool_examples", "kvpool_steps"):
        value = config.getoption(name)
        if value is not None and value < 1:
            raise pytest.UsageError(f"--{name.replace('_', '-')} must be > 0, got {value}")
    root = str(config.rootpath)
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
            )
        except UsageError as err:
            trace = f"\n{err.trace}" if err.trace else ""
            raise pytest.UsageError(f"--kvpool-target {spec}: {err}{trace}") from None
    config.stash[_PLAN] = planned


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
        for cfg in self.planned.configs:
            name = f"ps{cfg.page_size}-{'sorted' if cfg.need_sort else 'unsorted'}-{cfg.order}"
            yield KvpoolItem.from_parent(self, name=name, kvpool_config=cfg)


class KvpoolItem(pytest.Item):
    """One target configuration run by the oracle."""

    def __init__(self, *, kvpool_config: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kvpool_config = kvpool_config
        self.report_text: str | None = None

    def runtest(self) -> None:
        from .runner import DEFAULT_EXAMPLES, DEFAULT_STEPS, run_config

        opt = self.config.getoption
        target = self.parent.planned.target  # type: ignore[union-attr]
        result = run_config(
            target,
            self.kvpool_config,
            max_examples=opt("kvpool_examples") or DEFAULT_EXAMPLES,
            step_count=opt("kvpool_steps") or DEFAULT_STEPS,
            seed=opt("kvpool_seed"),
        )
        if result.failure is not None:
            self.report_text = result.failure.report()
        elif result.error is not None:
            self.report_text = f"kvpool.oracle: {target.path}: {result.error}"
        elif not result.ok:
            self.report_text = f"kvpool.oracle: {target.path}: no call ran, nothing was tested"
        if self.report_text is not None:
            raise AssertionError(self.report_text)

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        return self.report_text or str(excinfo.value)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.nodeid
