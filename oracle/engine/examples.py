"""How every family's state machine records a finished example on its class.

A family's machine class carries ``stats`` (``examples``, ``calls``, ``failed``), ``coverage``
(a Counter of events) and ``digest`` (a running sha256 of the steps); its teardown calls
:func:`record_example`, and the runner reads them into a
:class:`~kvpool.oracle.engine.runner.Result`.
"""

from __future__ import annotations

from json import dumps
from typing import Any

from hypothesis.errors import StopTest

from .core import Engine
from .report import OracleFailure


def record_example(cls: Any, ex: Engine, in_flight: BaseException | None) -> None:
    """Record one finished example of any family on its machine class: its calls, whether it
    counts (``count_example``), its coverage events, and its steps (call and arguments) in the
    configuration's step hash (``cls.digest``: the same calls give the same hash)."""
    cls.stats["calls"] += ex.num_calls
    count_example(cls.stats, in_flight, failed=ex.failed)
    cls.coverage.update(ex.events)
    for step in ex.trace.steps:
        cls.digest.update(dumps([step.call, step.args], sort_keys=True, default=repr).encode())


def count_example(stats: dict[str, int], in_flight: BaseException | None, *, failed: bool) -> None:
    """Count one example in ``stats["examples"]`` the way ``max_examples`` counts them.

    Hypothesis runs this teardown in a ``finally``, so ``in_flight`` is the exception ending the
    example: ``StopTest`` marks one Hypothesis discards (its choice buffer ran out), which
    ``max_examples`` does not count either. Examples after the first failure are shrinking
    attempts, not examples: counting stops with the failing one.
    """
    if isinstance(in_flight, StopTest) or stats["failed"]:
        return
    stats["examples"] += 1
    if failed or isinstance(in_flight, OracleFailure):
        stats["failed"] = 1
