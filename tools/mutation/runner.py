"""Run pytest against mutants, at most two at a time, each in its own sandbox copy.

The parent process imports the heavy dependencies once (torch, numpy, Hypothesis, pytest) and
forks one child per run; the child puts its sandbox first on ``sys.path`` and calls
``pytest.main`` with ``-x -q -p no:cacheprovider``, so a run costs the tests only, and it stops
at the first failure. ``kvpool`` itself is never imported by the parent, so each child imports
the (mutated) files of its sandbox afresh; no bytecode is written there.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .config import MARKERS

KILLED, SURVIVED, TIMEOUT, ERROR = "killed", "survived", "timeout", "error"


def preload() -> None:
    """Import what every test run needs, once, before the first fork (not Hypothesis: its
    pytest plugin must be imported by pytest, for assertion rewriting)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import torch

    torch.set_num_threads(1)
    for optional in ("z3", "crosshair"):
        with contextlib.suppress(ImportError):
            __import__(optional)


@dataclass(frozen=True)
class Run:
    """One pytest run: ``tests`` in a sandbox with file ``path`` replaced by ``source``."""

    path: str
    source: bytes
    tests: tuple[str, ...]
    profile: str  # KVPOOL_PROFILE
    seed: int | None  # --hypothesis-seed, None under a derandomized profile
    timeout_s: float
    tag: object = None
    trace: tuple[str, ...] = ()  # target files to trace (baseline runs); writes trace.json


@dataclass(frozen=True)
class Outcome:
    run: Run
    status: str
    seconds: float
    log_tail: str
    trace: dict[str, object] | None = None  # the LineTracer dump of a traced run


def pytest_args(tests: Sequence[str], seed: int | None) -> list[str]:
    # -n 0: in this process (pyproject's addopts asks for xdist workers, which the line tracer
    # and the fork's sandbox path would not see)
    args = ["-x", "-q", "-p", "no:cacheprovider", "-n", "0", "-m", MARKERS, *tests]
    return args if seed is None else [*args, f"--hypothesis-seed={seed}"]


def _child(sandbox: Path, run: Run, log: Path) -> None:  # pragma: no cover - runs in the fork
    os.setpgid(0, 0)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.chdir(sandbox)
    sys.path.insert(0, str(sandbox))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(sandbox), os.environ.get("PYTHONPATH", "")])
    os.environ["KVPOOL_PROFILE"] = run.profile
    import traceback

    import pytest

    plugins: list[object] = []
    if run.trace:
        from .coverage import LineTracer, trace_keys

        paths = {key: rel for rel in run.trace for key in trace_keys(sandbox, rel)}
        plugins.append(LineTracer(paths, sandbox / "trace.json"))
    try:
        rc = int(pytest.main(pytest_args(run.tests, run.seed), plugins=plugins))
    except BaseException:  # any crash of the run is reported as an error
        traceback.print_exc()
        rc = 3
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


def _status(rc: int) -> str:
    if rc == 0:
        return SURVIVED
    if rc == 1:
        return KILLED
    return ERROR  # collection or import error (2), internal error (3), no tests (5)


class Pool:
    """Up to ``jobs`` sandboxes under ``workdir``; runs are spread over them."""

    def __init__(self, root: Path, workdir: Path, jobs: int) -> None:
        from .sandbox import make_sandbox

        self.root = root
        self.sandboxes = [make_sandbox(root, workdir / f"sandbox-{i}") for i in range(jobs)]
        self.logs = workdir / "logs"
        self.logs.mkdir(exist_ok=True)
        self.pristine: dict[tuple[int, str], bytes] = {}

    def run_all(self, runs: Sequence[Run],
                on_done: Callable[[Outcome], None] | None = None) -> list[Outcome]:
        """Every run, in order of submission where sandboxes allow; outcomes in input order."""
        pending = list(enumerate(runs))
        free = list(range(len(self.sandboxes)))
        active: dict[int, tuple[int, int, Run, float]] = {}  # pid -> (slot, index, run, t0)
        outcomes: dict[int, Outcome] = {}
        try:
            self._loop(pending, free, active, outcomes, on_done)
        finally:  # interrupted (SIGTERM, ^C): no child outlives the run
            for cpid in active:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(cpid, signal.SIGKILL)
        return [outcomes[i] for i in range(len(runs))]

    def _loop(self, pending: list[tuple[int, Run]], free: list[int],
              active: dict[int, tuple[int, int, Run, float]], outcomes: dict[int, Outcome],
              on_done: Callable[[Outcome], None] | None) -> None:
        while pending or active:
            while pending and free:
                index, run = pending.pop(0)
                slot = free.pop(0)
                box = self.sandboxes[slot]
                self.pristine.setdefault((slot, run.path), (box / run.path).read_bytes())
                (box / run.path).write_bytes(run.source)
                shutil.rmtree(box / ".hypothesis", ignore_errors=True)
                log = self.logs / f"run-{slot}.log"
                pid = os.fork()
                if pid == 0:  # pragma: no cover - the child; never returns
                    try:
                        _child(box, run, log)
                    finally:
                        os._exit(4)
                active[pid] = (slot, index, run, time.monotonic())
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                now = time.monotonic()
                for cpid, (_, _, run, t0) in list(active.items()):
                    if now - t0 > run.timeout_s:
                        os.killpg(cpid, signal.SIGKILL)
                time.sleep(0.02)
                continue
            slot, index, run, t0 = active.pop(pid)
            seconds = time.monotonic() - t0
            rc = os.waitstatus_to_exitcode(wait_status)
            status = TIMEOUT if rc < 0 and seconds > run.timeout_s else _status(rc)
            log = self.logs / f"run-{slot}.log"
            tail = log.read_text(errors="replace")[-3000:]
            box = self.sandboxes[slot]
            (box / run.path).write_bytes(self.pristine[(slot, run.path)])  # restore the original
            trace = None
            if run.trace:
                trace = json.loads((box / "trace.json").read_text())
                (box / "trace.json").unlink()
            outcome = Outcome(run, status, seconds, tail, trace)
            outcomes[index] = outcome
            free.append(slot)
            if on_done is not None:
                on_done(outcome)
