"""A run's report, the same for the command line, the pytest plugin and a parallel run's
merged results: the summary, the coverage table and gate, the clause table and gate, and the
JSON form (``--json``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from kvpool.spec.wording import counted

from ..engine.clausemap import ClauseMap
from ..engine.runner import Result
from ..engine.target import Config, Target
from . import clauses, coverage_table


def result_row(r: Result, t: Target, cmap: ClauseMap) -> dict[str, Any]:
    """One configuration's result as the run report (and a parallel run's worker) writes it."""
    return {
        "target": r.target,
        "family": t.family,
        "capabilities": t.caps.describe(),
        "page_size": r.config.page_size,
        "need_sort": r.config.need_sort,
        "device": r.config.device,
        "order": r.config.order,
        "status": r.status(),
        "examples": r.examples,
        "calls": r.calls,
        "seconds": round(r.seconds, 3),
        "step_hash": r.step_hash,
        "clause": r.failure.clause if r.failure else None,
        "error": r.error,
        "coverage": dict(sorted(r.coverage.items())),
        "clauses": dict(sorted(cmap.exercised(r.coverage, r.config.order).items())),
    }


def result_from_row(row: dict[str, Any]) -> Result:
    """The :class:`Result` a worker's ``result_row`` stands for (its failure as its status)."""
    config = Config(row["page_size"], row["need_sort"], row["device"], row["order"])
    return Result(
        row["target"], config, row["examples"], row["calls"], row["seconds"],
        error=row["error"], coverage=Counter(row["coverage"]), step_hash=row["step_hash"],
        reported=row["status"],
    )


def report_run(
    results: list[Result],
    targets: list[Target],
    cmap: ClauseMap,
    *,
    seconds: float,
    gate: bool = False,
    json_path: str | None = None,
) -> int:
    """Print a run's summary, coverage table and clause table (the gate's verdicts with
    ``gate``), write its JSON report to ``json_path``; the exit status: 0 conformant and some
    call ran, 1 otherwise (or a gap under ``gate``). ``results[i]`` ran ``targets[i]``."""
    _summary(results, seconds)
    found = _coverage(results, targets, gate, cmap)
    per_clause = clauses.per_target(results, targets, cmap)
    family = targets[0].family if targets else None
    print(clauses.report(per_clause, gate, family))
    if json_path:
        write_report(Path(json_path), results, targets, found, per_clause, cmap)
    gaps = any(tc.missing() for tc in found) or any(tc.missing() for tc in per_clause)
    failed = not all(r.ok for r in results) or (gate and gaps)
    return 1 if failed or not results else 0


def _coverage(
    results: list[Result], targets: list[Target], gate: bool, cmap: ClauseMap
) -> list[coverage_table.TargetCoverage]:
    """Print the coverage table and the gate's verdict; return the coverage per target."""
    per_target: dict[str, coverage_table.TargetCoverage] = {}
    for r, t in zip(results, targets):
        needed = cmap.required(t.caps, r.config.page_size, r.config.need_sort)
        tc = per_target.setdefault(
            r.target, coverage_table.TargetCoverage(r.target, [], events=cmap.events)
        )
        tc.columns.append((_short(r), r.coverage, needed))
    found = list(per_target.values())
    print("\ncoverage (how often each event was reached; - = this configuration cannot reach "
          "it; 0! = it can, no configuration did, and --require-coverage fails on it)")
    for r in results:
        print(f"  {_short(r):6s} = {r.target} {r.config.label()}")
    print(coverage_table.table(found))
    for tc in found:
        if tc.missing() and gate:
            print(f"  coverage gate: {tc.target}: never reached {', '.join(tc.missing())} "
                  "(the capabilities allow them; more examples, --examples N, may reach them)")
    if gate and not any(tc.missing() for tc in found):
        print("  coverage gate: every reachable event reached")
    return found


def _short(r: Result) -> str:
    """A configuration's column label, what it ran: ``tok`` (a token allocator, page size 1)
    or ``pg4``, ``pg16``, ... (paged), ``s`` appended for ``need_sort``."""
    ps = r.config.page_size
    return f"{'tok' if ps == 1 else f'pg{ps}'}{'s' if r.config.need_sort else ''}"


def write_report(
    path: Path,
    results: list[Result],
    targets: list[Target],
    found: list[coverage_table.TargetCoverage],
    per_clause: list[clauses.TargetClauses],
    cmap: ClauseMap,
) -> None:
    """The run as JSON: per configuration its result, counts, coverage and clauses exercised;
    per target the events and the expected clauses the gate found missing, and the clauses
    exercised in all; the family's clauses no such run exercises (with the reason)."""
    rows = [result_row(r, t, cmap) for r, t in zip(results, targets)]
    gate = {tc.target: tc.missing() for tc in found}
    report = {
        "kvpool_run": 1,
        "configurations": rows,
        "coverage_missing": gate,
        "clauses": {tc.target: dict(sorted(tc.found.items())) for tc in per_clause},
        "clauses_missing": {tc.target: tc.missing() for tc in per_clause},
        "clauses_not_exercised": clauses.unexercised_for(targets[0].family if targets else None),
    }
    path.write_text(json.dumps(report, indent=1))


def _summary(results: list[Result], seconds: float) -> None:
    print("\nsummary")
    print(f"  {'target':46s} {'configuration':36s} {'result':10s} {'examples':>8s} {'calls':>7s}")
    for r in results:
        print(
            f"  {r.target:46s} {r.config.label():36s} {r.status():10s} {r.examples:8d} {r.calls:7d}"
        )
    calls = sum(r.calls for r in results)
    print(f"  {counted(len(results), 'configuration')}, {counted(calls, 'call')}, "
          f"{seconds:.1f} s: {verdict(results)}")


def verdict(results: list[Result]) -> str:
    """The run in a few words: conformant; the constructor already diverges (naming the
    clauses) when no call got past it; no call ran and nothing failed; or how many
    configurations diverge or ran no call."""
    at_create = list(dict.fromkeys(c for r in results if (c := r.constructor_clause())))
    constructor = f"the constructor already diverges: {', '.join(at_create)}"
    bad = sum(not r.ok for r in results)
    if sum(r.calls for r in results) == 0:
        return constructor if at_create else "no call ran: nothing was tested"
    if not bad:
        return "conformant"
    text = counted(bad, "configuration diverges", "configurations diverge") + " or ran no call"
    return f"{text} ({constructor})" if at_create else text
