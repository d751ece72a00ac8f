"""The tester tested per coverage event: the default run catches each event's broken allocator.

Each allocator of ``broken_events.py`` breaks only in the situation one coverage event names.
It is run exactly as ``python -m kvpool.oracle TARGET`` runs a configuration (the default
examples, steps and shrink budget; the run stops at the first failure) and must be caught
within 60,000 calls (a bound the machine's load cannot move) with a trace of at most 8
calls, naming one of the clauses listed for it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from broken_causes import symptom_note
from broken_events import EVENT_BROKEN, OWNERSHIP_BROKEN
from kvpool.oracle.engine.capabilities import capabilities_of
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config, Target
from kvpool.oracle.engine.trace import Trace
from kvpool.oracle.entry.cli import run_main
from kvpool.oracle.families.single import coverage

# A bound in calls, not seconds, so a loaded machine does not fail it (about 60 s of an idle core)
MAX_CALLS_TO_CATCH = 60_000
MAX_TRACE_CALLS = 8


@pytest.mark.parametrize(("event", "broken"), EVENT_BROKEN, ids=[e for e, _ in EVENT_BROKEN])
def test_oracle_default_run_catches_the_event_bug(event: str, broken: object) -> None:
    """The event is one the configuration can reach, and the default run finds the bug."""
    from broken_allocators import Broken

    assert isinstance(broken, Broken)
    caps = capabilities_of(broken.factory)
    assert event in coverage.required(caps, broken.page_size, broken.need_sort)
    target = Target(broken.factory, caps, broken.path)
    result = run_config(target, Config(broken.page_size, broken.need_sort, "cpu", broken.order))
    assert result.error is None, result.error
    failure = result.failure
    assert failure is not None, f"{broken.cls.__name__} not caught by the default run"
    assert failure.clause in broken.clauses, symptom_note(broken) + failure.report()
    assert result.calls <= MAX_CALLS_TO_CATCH, result.calls
    assert failure.trace.num_calls() <= MAX_TRACE_CALLS, failure.report()


# Clauses a whole-matrix CLI run may also report for an event's bug, and why. The page a
# mid-span segment keeps is, in some configurations, the boundary page it shares with the next
# segment of the same free_segments call: there the kept page is indistinguishable from a
# boundary page never released (SEG-5, BoundaryNever's bug); elsewhere it is SEG-2.
ALSO_REPORTED: dict[str, set[str]] = {"seg.mid_span": {"SEG-5"}}


@pytest.mark.parametrize("event", ["seg.mid_span", "cap.check_false"])
def test_oracle_default_cli_run_catches_the_event_bug(event: str, tmp_path: Path) -> None:
    """``python -m kvpool.oracle module:factory`` with no options (its whole matrix, page
    size 1 first) exits 1 within 60,000 calls, every failing configuration naming one of the
    clauses; the first failing configuration's trace has at most 8 calls."""
    broken = dict(EVENT_BROKEN)[event]
    report = tmp_path / "run.json"
    status = run_main([broken.path, "--json", str(report), "--trace-dir", str(tmp_path)])
    assert status == 1
    rows = json.loads(report.read_text())["configurations"]
    assert sum(row["calls"] for row in rows) <= MAX_CALLS_TO_CATCH, rows
    clauses = {row["clause"] for row in rows if row["clause"] is not None}
    assert clauses and clauses <= set(broken.clauses) | ALSO_REPORTED.get(event, set()), rows
    assert set(broken.clauses) & clauses, rows  # at least one configuration names the pin
    traces = [Trace.from_json(p.read_text()) for p in tmp_path.glob("*.json") if p != report]
    assert len(traces) == len([row for row in rows if row["clause"]])
    first = next(row for row in rows if row["clause"])  # the catch: the first failing one
    (trace,) = [
        t for t in traces if (t.page_size, t.need_sort) == (first["page_size"], first["need_sort"])
    ]
    assert trace.num_calls() <= MAX_TRACE_CALLS, trace.to_json()


def test_every_event_class_of_the_issue_list_has_a_broken_allocator() -> None:
    """Large batches, partial shortages, pages freed in pieces, segments from mid-page to
    mid-page, a capacity check that must say no: each has one."""
    named = {e for e, _ in EVENT_BROKEN}
    wanted = {
        "extend.bs_9_32",
        "decode.bs_33_64",
        "alloc.short_partial",
        "decode.short_partial",
        "group.page_in_pieces",
        "seg.mid_span",
        "cap.check_false",
    }
    assert wanted <= named <= set(coverage.EVENTS)


@pytest.mark.parametrize("broken", OWNERSHIP_BROKEN, ids=[b.cls.__name__ for b in OWNERSHIP_BROKEN])
def test_oracle_ownership_probes_catch_kept_tensors(broken: object) -> None:
    """ALIAS-3: a census tensor the allocator keeps; ALIAS-2: an input it reads later."""
    from broken_allocators import Broken

    assert isinstance(broken, Broken)
    target = Target(broken.factory, capabilities_of(broken.factory), broken.path)
    result = run_config(target, Config(broken.page_size, broken.need_sort, "cpu", broken.order))
    assert result.failure is not None, f"{broken.cls.__name__} not caught"
    assert result.failure.clause in broken.clauses, result.failure.report()
    assert result.failure.trace.num_calls() <= MAX_TRACE_CALLS, result.failure.report()
    if "ALIAS-3" not in broken.clauses:
        return
    off = target.caps.replace(ownership=False)  # only the census probe finds a cached census
    quiet = run_config(
        Target(broken.factory, off, broken.path),
        Config(broken.page_size, broken.need_sort, "cpu", broken.order),
        max_examples=40,
    )
    assert quiet.ok, quiet.failure.report() if quiet.failure else quiet.error
