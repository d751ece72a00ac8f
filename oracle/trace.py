"""Traces: the calls of one run at the spec level, as JSON and as a pytest function.

A :class:`TraceStep` is one call in the spec's signature (plain ints and lists), its expected
result under the spec (``expect``) or the clause of the ContractViolation it must raise
(``raises``), and the expected ``available_size()`` / free census after it. Any implementation
can replay the JSON form (:mod:`kvpool.oracle.replay`); :func:`to_pytest` prints the steps as
plain torch calls against the same target.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from .calltables import REPRO_IMPORTS, calls_for
from .repro import raises_block, shortage_block

TRACE_FORMAT = 1


@dataclass
class TraceStep:
    """One call. ``args`` maps argument names to plain values (see ``Executor.call``)."""

    call: str
    args: dict[str, Any] = field(default_factory=dict)
    expect: Any = None
    raises: str | None = None
    clobber: bool = False  # the caller overwrote its input tensor(s) right after the call
    raised: str | None = None  # what the target raised on this valid call ("Type: message")
    short_raised: str | None = None  # the declared type it raised for a None (shortage_raises)
    probe: bool = False  # the caller then wrote into the result and the census (ALIAS-3)
    evicted: int | None = None  # the spec's cache evictions where a CAP-1 repro checks them
    available_after: int | None = None
    census_after: list[int] | None = None  # sorted multiset of get_all_free_pages()
    free_after: list[int] | None = None  # exact get_all_free_pages() (reference order only)


@dataclass
class Trace:
    """The steps of one run plus what is needed to rebuild the target."""

    target: str
    page_size: int
    need_sort: bool
    device: str
    order: str
    steps: list[TraceStep] = field(default_factory=list)
    clause: str | None = None
    detail: str | None = None
    failing_step: int | None = None
    final_asserts: list[str] = field(default_factory=list)  # python lines checking the failure
    error_types: list[str] = field(default_factory=list)  # checked mode's types (dotted names)
    shortage_types: list[str] = field(default_factory=list)  # shortage_raises (dotted names)
    family: str = "single"  # the allocator family whose call table the steps use (calltables)

    def to_json(self) -> str:
        data = asdict(self)
        data["kvpool_trace"] = TRACE_FORMAT
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str) -> Trace:
        data = json.loads(text)
        if data.pop("kvpool_trace", None) != TRACE_FORMAT:
            raise ValueError("not a kvpool trace (missing or unknown 'kvpool_trace' format)")
        data.pop("got", None)  # written by earlier versions, never read
        steps = [TraceStep(**s) for s in data.pop("steps")]
        return cls(steps=steps, **data)

    def num_calls(self) -> int:
        """Calls up to the failing step (or all), not counting the constructor."""
        end = len(self.steps) if self.failing_step is None else self.failing_step + 1
        return sum(1 for s in self.steps[:end] if s.call != "create")


def result_asserts(step: TraceStep, var: str, family: str = "single") -> list[str]:
    """Python asserts that the result bound to ``var`` is ``step.expect`` (none for most calls)."""
    checks = calls_for(family)[step.call].checks
    return [] if checks is None else checks(step.args, step.expect, var)


def call_source(step: TraceStep, var: str, family: str = "single") -> list[str]:
    """The torch-level call(s) of one step as Python source; results are bound to ``var``."""
    call = calls_for(family)[step.call]
    lines = call.source(step.args, var)
    return lines + ([call.reuse] if step.clobber and call.reuse else [])


def to_pytest(trace: Trace, factory_path: str, *, name: str = "test_kvpool_repro") -> str:
    """A self-contained pytest function replaying ``trace`` on ``factory_path`` (module:attr).

    Steps before the failing one assert their spec results (so the path is the same); the
    failing step ends with ``final_asserts`` (:mod:`kvpool.oracle.repro`); a rejected step runs
    under ``pytest.raises`` of the target's declared error types.
    """
    module, _, attr = factory_path.partition(":")
    fail = trace.failing_step if trace.failing_step is not None else len(trace.steps) - 1
    head = f"[{trace.clause}] {trace.detail}" if trace.clause else "replay"
    body = [
        f'"""{head}',
        "",
        f"kvpool.oracle, {trace.order} order, page_size={trace.page_size}, "
        f'need_sort={trace.need_sort}."""',
        "import pytest",
        "import torch",
        "",
        "from kvpool.oracle.treecache import TinyTreeCache",
        "from kvpool.spec import ContractViolation, ResizeConfig",
        f"from {module} import {attr} as factory",
        *REPRO_IMPORTS[trace.family],
        "{imports}",
        "",
        f"DEVICE = {trace.device!r}",
        "",
        "def t(values):",
        "    return torch.tensor(values, dtype=torch.int64, device=DEVICE)",
        "",
    ]
    imports: set[str] = set()
    table = calls_for(trace.family)
    for i, step in enumerate(trace.steps[: fail + 1]):
        var = f"r{i}"
        calls = call_source(step, var, trace.family)
        if step.raises is not None:
            lines, needed = raises_block(trace, step, calls)
            body += lines
            imports |= needed
            continue
        short = step.short_raised is not None or (i == fail and step.expect is None)
        if short and trace.shortage_types and table[step.call].kind == "alloc":
            lines, needed = shortage_block(trace.shortage_types, calls, var)
            body += lines
            imports |= needed
        else:
            body += calls
        body += result_asserts(step, var, trace.family) if i < fail else trace.final_asserts
        body += probe_lines(step, var, trace.family)
    last = trace.steps[fail] if trace.steps else None
    if last is not None and last.available_after is not None:
        body.append(f"assert a.available_size() == {last.available_after}")
    if last is not None and last.census_after is not None:
        body.append(f"assert sorted(a.get_all_free_pages().tolist()) == {last.census_after!r}")
    if last is not None and last.free_after is not None:
        body.append(f"assert a.get_all_free_pages().tolist() == {last.free_after!r}")
    slot = body.index("{imports}")
    body[slot : slot + 1] = sorted(imports)
    return f"def {name}():\n" + "\n".join(("    " + line) if line else "" for line in body) + "\n"


def probe_lines(step: TraceStep, var: str, family: str = "single") -> list[str]:
    """The caller's writes after a probed call: garbage into the tensor it got back and into
    ``get_all_free_pages()``'s result (``ALIAS-3``: the allocator must not see them)."""
    if not step.probe:
        return []
    # Only an allocation that handed out slots binds a tensor to ``var``; a capacity hook's
    # answer (a bool or an eviction count) is no tensor to write into.
    kind = calls_for(family)[step.call].kind
    got_slots = kind == "alloc" and isinstance(step.expect, list) and step.expect
    lines = [f"{var}.fill_(-1)  # ALIAS-3: the caller owns this result"] if got_slots else []
    if family != "single":  # only a single pool's census is a tensor the caller gets
        return lines
    return [*lines, "a.get_all_free_pages().fill_(-1)  # ALIAS-3: and this census"]
