"""The verdict rules over one case's answers from the fork server (one per target).

:func:`problems` lists every broken rule (empty: the case passes):

- kvpool's children (``native``, ``numpy``) exit normally with a verdict: no signal death, no
  timeout, no failed setup;
- every raise leaves the state exactly as before the call; every returned slot tensor was
  computed from the pool (:func:`fuzz_exec.result_issues`); the free census is healthy after
  every call that leaves no group open (no silent corruption; an open group's copies are
  judged at its end);
- the two backends raise the same exception class on every call, and where both return they
  return the same values and leave the same state;
- a ``guard`` case: the first raising call among the named ones raises ContractViolation naming
  the clause, and one of them raises.

SGLang's answer is recorded for reference (:func:`sglang_summary`), never required to match.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

KVPOOL_TARGETS = ("numpy", "native")


def repro(case: dict[str, Any], target: str) -> str:
    """A shell command that replays ``case`` on ``target`` in a fresh process."""
    return f"python tests/fuzz/fuzz_exec.py {shlex.quote(json.dumps(case))} {target}"


def _stderr(answer: dict[str, Any]) -> str:
    """The child's stderr tail, with a sanitizer's headline and summary lines first."""
    text = answer["stderr"]
    keys = ("ERROR: AddressSanitizer", "SUMMARY:", "runtime error", "#0 ", "#1 ", "#2 ")
    lines = [line for line in text.splitlines() if any(k in line for k in keys)]
    return "\n".join([*lines[:8], "...", text[-800:]])


def _life(answer: dict[str, Any], target: str) -> list[str]:
    status = answer["status"]
    if status == "signal":
        return [f"{target}: killed by {answer['signal_name']}\n{_stderr(answer)}"]
    if status != "ok":
        return [f"{target}: exit status {answer.get('code')} without a verdict\n"
                f"{_stderr(answer)}"]
    verdict = answer["verdict"]
    if "error" in verdict:
        return [f"{target}: the case did not run: {verdict['error']}"]
    return []


def _own_rules(calls: list[dict[str, Any]], target: str) -> list[str]:
    out = []
    for i, c in enumerate(calls):
        where = f"{target} call {i} {c['method']}"
        if c["raised"] and c["before"] != c["after"]:
            out.append(f"{where}: raised {c['raised']} and changed the state\n"
                       f"  before {c['before']}\n  after  {c['after']}")
        if c.get("issues"):
            out.append(f"{where}: returned slots not computed from the pool: {c['issues']}")
        if c["census"] and c["after"].get("group") is None:  # an open group's copies: its end
            out.append(f"{where}: free census broken after the call "
                       f"({c['raised'] or 'accepted'}): {c['census']}")
    return out


def _agreement(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[str]:
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        where = f"call {i} {x['method']}"
        if x["raised"] != y["raised"]:
            out.append(f"{where}: numpy {x['raised'] or 'returned'} ({x.get('message', '')}) "
                       f"vs native {y['raised'] or 'returned'} ({y.get('message', '')})")
        elif not x["raised"] and (x["result"], x["after"]) != (y["result"], y["after"]):
            out.append(f"{where}: numpy and native disagree\n  numpy  {x['result']} "
                       f"{x['after']}\n  native {y['result']} {y['after']}")
    return out


def _guard(case: dict[str, Any], calls: list[dict[str, Any]], target: str) -> list[str]:
    guard = case.get("guard")
    if not guard:
        return []
    for i in guard["calls"]:
        c = calls[i]
        if c["raised"]:
            if c["raised"] != "ContractViolation" or c["clause"] != guard["clause"]:
                return [f"{target} call {i} {c['method']}: raised {c['raised']} "
                        f"{c['clause']} ({c.get('message')}), expected ContractViolation "
                        f"{guard['clause']}"]
            return []
    return [f"{target}: no call of {guard['calls']} raised; expected ContractViolation "
            f"{guard['clause']} on the unchecked path"]


def problems(case: dict[str, Any], answers: dict[str, dict[str, Any]]) -> list[str]:
    """Every rule the kvpool answers break (see the module docstring)."""
    out: list[str] = []
    for target in KVPOOL_TARGETS:
        if target in answers:
            life = _life(answers[target], target)
            out += life
            if not life:
                calls = answers[target]["verdict"]["calls"]
                out += _own_rules(calls, target) + _guard(case, calls, target)
    if not out and all(t in answers for t in KVPOOL_TARGETS):
        out += _agreement(answers["numpy"]["verdict"]["calls"],
                          answers["native"]["verdict"]["calls"])
    return out


def sglang_summary(answer: dict[str, Any] | None) -> str:
    """A target's outcome per call, one word each (``accepted`` / the exception / the death);
    the failure messages show SGLang's."""
    if answer is None:
        return "not run"
    if answer["status"] != "ok":
        return f"died ({answer.get('signal_name') or answer.get('code')})"
    verdict = answer["verdict"]
    if "error" in verdict:
        return f"not run: {verdict['error'][:80]}"
    return ", ".join(c["raised"] or "accepted" for c in verdict["calls"])
