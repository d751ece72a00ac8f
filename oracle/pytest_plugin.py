"""pytest plugin (entry point ``pytest11: kvpool``): ``pytest --kvpool-target module:factory``.

Without the option it does nothing and imports nothing beyond pytest. With it, one test item per
target and configuration is added to the session; each runs the oracle and fails with its
report. ``--kvpool-order``, ``--kvpool-examples`` and ``--kvpool-seed`` tune the run.
"""

from __future__ import annotations

from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kvpool", "kvpool allocator conformance (kvpool.oracle)")
    group.addoption(
        "--kvpool-target",
        action="append",
        default=[],
        metavar="MODULE:FACTORY",
        help="run the kvpool conformance oracle against this allocator factory "
        "(repeatable; aliases: kvpool, sglang)",
    )
    group.addoption(
        "--kvpool-order",
        choices=("exact", "contract"),
        default=None,
        help="exact: slot-for-slot against the reference order; contract: any "
        "correct choice (default: what the target declares)",
    )
    group.addoption(
        "--kvpool-examples", type=int, default=None, help="Hypothesis examples per configuration"
    )
    group.addoption("--kvpool-seed", type=int, default=None, help="random seed")


class KvpoolItem(pytest.Item):
    """One target configuration run by the oracle."""

    def __init__(
        self,
        *,
        target: Any,
        kvpool_config: Any,
        examples: int | None,
        seed: int | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.target, self.kvpool_config = target, kvpool_config
        self.examples, self.seed = examples, seed
        self.report_text: str | None = None

    def runtest(self) -> None:
        from .runner import DEFAULT_EXAMPLES, run_config

        result = run_config(
            self.target,
            self.kvpool_config,
            max_examples=self.examples or DEFAULT_EXAMPLES,
            seed=self.seed,
        )
        if result.failure is not None:
            self.report_text = result.failure.report()
        elif result.error is not None:
            self.report_text = f"kvpool.oracle: {self.target.path}: {result.error}"
        if self.report_text is not None:
            raise AssertionError(self.report_text)

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        return self.report_text or str(excinfo.value)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    specs = config.getoption("kvpool_target", default=None)
    if not specs:
        return
    from .runner import configs_for
    from .targets import TargetError, expand, load_target, probe

    for spec in specs:
        for path in expand(spec):
            try:
                target = load_target(path)
                probe(target)
            except TargetError as err:
                raise pytest.UsageError(f"--kvpool-target {path}: {err}") from None
            for cfg in configs_for(target.caps, order=config.getoption("kvpool_order")):
                name = (
                    f"kvpool_conformance[{path}-ps{cfg.page_size}-"
                    f"{'sorted' if cfg.need_sort else 'unsorted'}-{cfg.order}]"
                )
                items.append(
                    KvpoolItem.from_parent(
                        session,
                        name=name,
                        target=target,
                        kvpool_config=cfg,
                        examples=config.getoption("kvpool_examples"),
                        seed=config.getoption("kvpool_seed"),
                    )
                )
