"""The harness cannot pass vacuously: crashes, silent exits and broken rules are reported.

A child that aborts, reads address 0 or exits early must come back as a failure of that case
(the fork server survives it and serves the next case); the judge must flag a raise that
changed the state, a backend disagreement and a guard that did not fire; the generator must be
a pure function of the seed.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fuzz_cases import case_for
from fuzz_judge import problems
from fuzz_server import ForkServer

HERE = Path(__file__).resolve().parent


def _paged_case() -> dict[str, Any]:
    """The first generated case on a paged allocator (its setup, any calls)."""
    case = next(c for c in map(case_for, range(100)) if c["alloc"]["kind"] == "paged")
    case.pop("guard", None)
    return case


def _crash_case(method: str) -> dict[str, Any]:
    case = _paged_case()
    case["calls"] = [{"method": method}]
    case.pop("guard", None)
    return case


@pytest.mark.parametrize(("method", "expect"), [("__abort__", "SIGABRT"),
                                                ("__null_read__", "SIGSEGV"),
                                                ("__exit__", "exit status 3")])
def test_a_dying_child_is_a_failure(fork_server: ForkServer, method: str, expect: str) -> None:
    """os.abort(), a read of address 0 and an early exit are reported, and the server lives."""
    case = _crash_case(method)
    answers = {t: fork_server.run(case, t) for t in ("numpy", "native")}
    found = problems(case, answers)
    assert found and all(expect in p for p in found), found
    healthy = case_for(0)
    healthy["calls"] = [{"method": "available_size"}]
    assert not problems(healthy, {t: fork_server.run(healthy, t) for t in ("numpy", "native")})


def test_the_judge_flags_broken_rules(fork_server: ForkServer) -> None:
    """A raise that changed the state, disagreeing backends and a silent guard are findings."""
    case = _paged_case()
    case["calls"] = [{"method": "alloc", "args": [case["alloc"]["page_size"]]}]
    answers = {t: fork_server.run(case, t) for t in ("numpy", "native")}
    assert not problems(case, answers)
    changed = copy.deepcopy(answers)
    call = changed["native"]["verdict"]["calls"][0]
    call.update(raised="RuntimeError", message="planted")
    assert any("changed the state" in p for p in problems(case, changed))
    call["after"] = call["before"]
    assert any("numpy returned" in p for p in problems(case, changed))
    guarded = dict(case, guard={"calls": [0], "clause": "FREE-3"})
    assert any("expected ContractViolation FREE-3" in p for p in problems(guarded, answers))
    garbage = copy.deepcopy(answers)
    garbage["numpy"]["verdict"]["calls"][0]["issues"] = ["planted"]
    assert any("not computed from the pool" in p for p in problems(case, garbage))


def test_cases_are_a_function_of_the_seed() -> None:
    """The same seed gives the same case; different seeds cover every scenario."""
    assert [case_for(s) for s in range(50)] == [case_for(s) for s in range(50)]
    assert len({case_for(s)["scenario"] for s in range(200)}) >= 8


def test_a_case_replays_in_a_fresh_process() -> None:
    """The repro command printed with a failure runs the case on its own."""
    case = case_for(3)
    import json

    out = subprocess.run([sys.executable, str(HERE / "fuzz_exec.py"), json.dumps(case), "numpy"],
                         capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout)["calls"][0]["method"] == case["calls"][0]["method"]
