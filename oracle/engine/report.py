"""Failures: the clause broken, the shrunk trace, page maps, a pytest function and JSON.

:func:`record_failure` keeps the latest failure of the process; Hypothesis replays the shrunk
example last, so after a run the latest failure is the minimal one.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kvpool.spec.wording import counted

from ..reporting.pagemap import LEGEND, REUSED_NOTE, TARGET_LEGEND
from .calltables import calls_for
from .repro import to_pytest
from .reprocheck import ReproCheck, check_repro
from .trace import Trace

_latest: list[Failure | None] = [None]
_first_at: list[float | None] = [None]  # perf_counter() of the first failure since reset_latest()


class OracleError(RuntimeError):
    """The harness itself is inconsistent (a generated call the spec rejects, a broken factory)."""


@dataclass
class Failure:
    """A divergence found by the oracle, with everything needed to reproduce it."""

    clause: str
    detail: str
    trace: Trace
    before: str
    after: str
    json_path: str | None = None
    hint: str | None = None  # the declaration under which this would not fail (hints.py)
    checked: ReproCheck | None = field(default=None, repr=False, compare=False)

    def headline(self) -> str:
        return f"[{self.clause}] {self.detail}"

    def step_lines(self) -> list[str]:
        """The trace, one call per line, up to the failing step.

        A rejected call shows the clause it raises (``-> raises FREE-3``), a valid call the
        target raised on shows that (``-> raised RuntimeError: ...``); other calls before the
        failing one show the result both sides agreed on. The failing step's result is in the
        headline."""
        end = self.trace.failing_step
        steps = self.trace.steps if end is None else self.trace.steps[: end + 1]
        lines = []
        table = calls_for(self.trace.family)
        for i, s in enumerate(steps):
            args = ", ".join(f"{k}={v!r}" for k, v in s.args.items())
            kind = table[s.call].kind
            if s.raises:
                tail = f" -> raises {s.raises}"
                tail += f"; the target raised {s.raised}" if s.raised else ""
            elif s.raised:
                tail = f" -> raised {s.raised}"
            elif i == end or kind not in ("alloc", "cache"):
                tail = ""
            elif s.call == "evict_to_free_tokens":
                tail = f" -> {counted(s.expect, 'entry', 'entries')} evicted"
            else:
                tail = f" -> {s.expect!r}"
            mark = "  <-- diverges" if i == end else ""
            lines.append(
                f"  {i:2d} {s.call}({args}){' [input reused]' if s.clobber else ''}{tail}{mark}"
            )
        return lines

    def at_constructor(self) -> bool:
        """Whether the constructor itself diverges (the failing step is the trace's first, its
        ``create``): no call ran."""
        steps = self.trace.steps
        return self.trace.failing_step == 0 and bool(steps) and steps[0].call == "create"

    def calls_text(self) -> str:
        """How far the trace got: ``the constructor already diverges``, or its calls after
        the constructor."""
        if self.at_constructor():
            return f"the constructor already diverges: {self.clause}"
        return f"{counted(self.trace.num_calls(), 'call')} after the constructor"

    def pytest_source(self) -> str:
        return to_pytest(self.trace, self.trace.target)

    def repro_check(self) -> ReproCheck:
        """The repro run on the target and on kvpool's correct allocator of its shape
        (:mod:`kvpool.oracle.engine.reprocheck`), once; failures recorded meanwhile are
        forgotten."""
        if self.checked is None:
            with aside():
                self.checked = check_repro(self.trace, lambda path: to_pytest(self.trace, path))
        return self.checked

    def write_json(self, path: str | Path) -> str:
        Path(path).write_text(self.trace.to_json())
        self.json_path = str(path)
        return self.json_path

    def report(self) -> str:
        t = self.trace
        parts = [
            f"kvpool.oracle: {self.headline()}",
            *([f"hint: {self.hint}"] if self.hint else []),
            f"target {t.target} (page_size={t.page_size}, need_sort={t.need_sort}, "
            f"device={t.device}, order={t.order}); {self.calls_text()}",
            "",
            "trace:",
            *self.step_lines(),
            *([f"  {REUSED_NOTE}"] if any(s.clobber for s in t.steps) else []),
            "",
            "page map, one character per page from page 1:",
            f"  {LEGEND}",
            f"  {TARGET_LEGEND}",
            self.before,
            self.after,
            "",
            "reproduce with pytest:",
            self.pytest_source(),
            self.repro_check().line,
        ]
        if self.json_path:
            parts.append(
                f"JSON trace: {self.json_path} (python -m kvpool.oracle replay "
                f"{self.json_path} --target {t.target})"
            )
        return "\n".join(parts)


class OracleFailure(AssertionError):
    """Raised inside a run when the target diverges; carries the :class:`Failure`."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.headline())
        self.failure = failure


def record_failure(failure: Failure) -> None:
    _latest[0] = failure
    if _first_at[0] is None:
        _first_at[0] = time.perf_counter()


def first_failure_at() -> float | None:
    """When the first failure since ``reset_latest()`` was recorded (before any shrinking)."""
    return _first_at[0]


def latest_failure() -> Failure | None:
    return _latest[0]


@contextlib.contextmanager
def aside() -> Iterator[None]:
    """Failures recorded inside the block (a probe's, made to learn something about the
    target) are forgotten after it: the latest failure and the first one's time are as
    before."""
    saved = _latest[0], _first_at[0]
    try:
        yield
    finally:
        _latest[0], _first_at[0] = saved


def reset_latest() -> None:
    _latest[0] = None
    _first_at[0] = None
