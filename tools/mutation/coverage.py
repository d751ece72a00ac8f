"""Which tests execute which lines of the mutated files: a line tracer run once per test set.

A mutant can change a test's outcome only if the test executes a mutated line (runs are
deterministic under a fixed seed or a derandomized profile), so each mutant runs only the tests
that reached its lines in the unmutated baseline. Lines executed outside any test (module level
at import: constants, class bodies, decorators, defaults) select the file's whole test set; a
mutant on lines no test executes is a survivor without a run ("not reached").
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Generator, Iterable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

IMPORT = "<import>"


class LineTracer:
    """A pytest plugin: records ``(file, line)`` per test node id for the files in ``paths``."""

    def __init__(self, paths: dict[str, str], out: Path) -> None:
        self.paths = paths  # a co_filename -> repository path of the target file
        self.out = out
        self.lines: dict[str, set[tuple[str, int]]] = {IMPORT: set()}
        self.sink = self.lines[IMPORT]
        self.order: list[str] = []
        self.seconds: dict[str, float] = {}  # nodeid -> traced duration (setup to teardown)
        sys.settrace(self._global)
        threading.settrace(self._global)

    def _global(self, frame: FrameType, event: str, arg: Any) -> Any:
        rel = self.paths.get(frame.f_code.co_filename)
        if rel is None:
            return None
        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "line":
                self.sink.add((rel, frame.f_lineno))
            return local

        self.sink.add((rel, frame.f_lineno))
        return local

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        self.order.append(item.nodeid)
        self.sink = self.lines.setdefault(item.nodeid, set())
        t0 = time.monotonic()
        yield
        self.seconds[item.nodeid] = time.monotonic() - t0
        self.sink = self.lines[IMPORT]

    def pytest_sessionfinish(self) -> None:
        sys.settrace(None)
        threading.settrace(None)
        data = {"order": self.order, "seconds": self.seconds,
                "lines": {k: sorted(v) for k, v in self.lines.items()}}
        self.out.write_text(json.dumps(data))


def trace_keys(sandbox: Path, rel: str) -> list[str]:
    """The ``co_filename`` forms a target file takes in the sandbox (via the ``kvpool`` links)."""
    top, _, rest = rel.partition("/")
    return [str(sandbox / rel), str(sandbox / "kvpool" / top / rest),
            str((sandbox / rel).resolve())]


class CoverageMap:
    """Lines -> the tests that executed them, from a :class:`LineTracer` dump."""

    def __init__(self, dump: dict[str, Any]) -> None:
        self.order: list[str] = dump["order"]
        self.seconds: dict[str, float] = dump.get("seconds", {})
        self.at_import: set[tuple[str, int]] = {tuple(x) for x in dump["lines"][IMPORT]}
        self.tests_of: dict[tuple[str, int], set[str]] = {}
        for nodeid, lines in dump["lines"].items():
            if nodeid == IMPORT:
                continue
            for rel, line in lines:
                self.tests_of.setdefault((rel, line), set()).add(nodeid)

    def select(self, rel: str, lines: Iterable[int]) -> list[str] | None:
        """The tests (in run order) that reach any of ``lines``; None: the whole set (a line
        runs at import); ``[]``: no test reaches them."""
        wanted: set[str] = set()
        for line in lines:
            if (rel, line) in self.at_import:
                return None
            wanted |= self.tests_of.get((rel, line), set())
        return self.fastest_modules_first([t for t in self.order if t in wanted])

    def fastest_modules_first(self, tests: list[str]) -> list[str]:
        """``tests`` grouped by module, the modules in ascending order of their tests' traced
        time, each module's tests in their own order: a run stops at its first failure
        (``-x``), so a mutant a quick module kills is not first made to wait for a slow one.
        The tests run are the same."""
        modules: dict[str, list[str]] = {}
        for t in tests:
            modules.setdefault(t.split("::")[0], []).append(t)
        cost = {m: sum(self.seconds.get(t, 0.0) for t in ts) for m, ts in modules.items()}
        return [t for m in sorted(modules, key=lambda m: cost[m]) for t in modules[m]]

    def timeout_s(self, tests: Iterable[str], whole_set_s: float) -> float:
        """The time limit for a run of ``tests``: five times their traced time plus a minute
        (start-up, collection, load), never more than ``whole_set_s`` (the whole set's limit).
        Traced runs are slower than plain ones, so a healthy run stays far inside it; a
        mutant that loops forever is stopped (and counts as killed) that much sooner."""
        return min(whole_set_s, 5 * sum(self.seconds.get(t, 0.0) for t in tests) + 60)
