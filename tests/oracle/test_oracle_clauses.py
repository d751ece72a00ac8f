"""Per-clause coverage (``kvpool.oracle.reporting.clauses``): every SPEC.md clause is either
mapped to the checks of the default run or listed, with a reason, in
``kvpool.oracle.reporting.unexercised``; kvpool's default matrix expects every mapped clause;
the gate names an expected clause that stayed at zero; the run report carries the clauses.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from kvpool.oracle.engine.core import Engine
from kvpool.oracle.engine.families import FAMILY_MODULES, all_mapped, family
from kvpool.oracle.engine.runner import Result
from kvpool.oracle.engine.target import Config
from kvpool.oracle.entry.cli import run_main
from kvpool.oracle.families.single import clause_map, coverage
from kvpool.oracle.families.single.clause_map import SINGLE
from kvpool.oracle.families.single.targets import configs_for, load_target
from kvpool.oracle.reporting import clauses

ROOT = Path(__file__).resolve().parents[2]


def _spec_clauses() -> set[str]:
    return set(re.findall(r'<a id="([A-Z]+-\d+)"></a>', (ROOT / "SPEC.md").read_text()))


def test_every_spec_clause_is_mapped_or_listed_with_a_reason() -> None:
    """Over every family's clause map (single pool, hybrid SWA-*): no clause is left out."""
    spec, mapped, listed = _spec_clauses(), all_mapped(), set(clauses.NOT_EXERCISED)
    neither = sorted(spec - mapped - listed)
    assert not neither, f"neither exercised nor listed: {neither}"
    assert not mapped & listed, f"mapped and listed: {sorted(mapped & listed)}"
    assert mapped | listed <= spec, f"not in SPEC.md: {sorted((mapped | listed) - spec)}"
    assert all(len(reason) > 40 for reason in clauses.NOT_EXERCISED.values())


def test_the_mapping_names_real_events_and_every_bad_kind() -> None:
    for clause, events in clause_map.CLAUSE_EVENTS.items():
        assert set(events) <= set(coverage.EVENTS), clause
    assert set(clause_map.BAD_CLAUSES) == set(coverage.BAD_NEEDS)
    for name in FAMILY_MODULES:  # every family's map names its own events and bad kinds
        cmap = family(name).clauses
        for clause, events in cmap.clause_events.items():
            assert set(events) <= set(cmap.events), (name, clause)
        assert {f"bad.{kind}" for kind in cmap.bad_clauses} <= set(cmap.events), name


def test_the_hybrid_matrix_expects_every_swa_clause() -> None:
    """The hybrid runs against kvpool's SWA allocator and its pure one (their declared
    matrices) can exercise every SWA clause of SPEC.md: none is exempted from clause
    accounting."""
    hybrid = family("hybrid")
    wanted: set[str] = set()
    for alias in ("kvpool-swa", "kvpool-pure-swa"):  # the two-pool allocator and the pure one
        target = hybrid.target(hybrid.factory(alias))
        for ps in target.caps.page_sizes:
            for ns in target.caps.need_sort:
                wanted |= hybrid.clauses.expected(target.caps, ps, ns, "exact")
    swa = {c for c in _spec_clauses() if c.startswith("SWA-")} - set(clauses.NOT_EXERCISED)
    assert swa <= wanted, sorted(swa - wanted)
    assert wanted == hybrid.clauses.mapped(), sorted(hybrid.clauses.mapped() - wanted)


def test_the_default_matrix_expects_every_mapped_clause() -> None:
    """The default run against kvpool.impl (token and paged, its declared matrix) can exercise
    every clause that is not listed as unexercisable."""
    wanted: set[str] = set()
    for path in ("kvpool.oracle.families.single.targets:kvpool_token",
                 "kvpool.oracle.families.single.targets:kvpool_paged"):
        target = load_target(path)
        for c in configs_for(target.caps):
            wanted |= SINGLE.expected(target.caps, c.page_size, c.need_sort, c.order)
    assert wanted == SINGLE.mapped(), sorted(SINGLE.mapped() - wanted)


def _result(counts: dict[str, int], order: str = "exact") -> Result:
    result = Result("t", Config(4, False, "cpu", order))
    result.coverage = Counter(counts)
    return result


def test_a_rejection_counts_for_its_clause_and_err_1_and_order_clauses_need_exact() -> None:
    counts = {"rejected:FREE-3": 2, "merge.alloc": 1, "alloc.short_empty": 3}
    exact = SINGLE.exercised(counts, "exact")
    assert exact["FREE-3"] == exact["ERR-1"] == 2 and exact["ALLOC-3"] == 3
    assert exact["ALLOC-5"] == exact["SORT-2"] == 1
    contract = SINGLE.exercised(counts, "contract")
    assert not contract["ALLOC-5"] and not contract["SORT-2"] and contract["ALLOC-3"] == 3


def test_the_gate_names_an_expected_clause_left_at_zero() -> None:
    """A bad-input kind that was sent but rejected with another clause leaves its own clause
    expected and unexercised."""
    target = load_target("kvpool.oracle.families.single.targets:kvpool_paged")
    counts = {"bad.unaligned_alloc": 5, "rejected:ALLOC-2": 5}
    (tc,) = clauses.per_target([_result(counts)], [target], SINGLE)
    assert "ALLOC-1" in tc.missing() and "ALLOC-2" not in tc.missing()
    assert "clause gate: t: never exercised" in clauses.report([tc], gate=True)


def test_the_run_prints_and_reports_the_clauses(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    report = tmp_path / "run.json"
    argv = ["kvpool.oracle.families.single.targets:kvpool_paged",
            "--page-sizes", "4", "--need-sort", "true"]
    assert run_main([*argv, "--examples", "60", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "clauses exercised" in out and "not exercised by this run" in out
    data = json.loads(report.read_text())
    (row,) = data["configurations"]
    assert row["clauses"] == dict(sorted(SINGLE.exercised(row["coverage"], "exact").items()))
    assert row["clauses"]["ALLOC-3"] and row["clauses"]["ERR-1"]
    assert set(data["clauses_not_exercised"]) == set(clauses.NOT_EXERCISED)
    assert data["clauses"]["kvpool.oracle.families.single.targets:kvpool_paged"] == row["clauses"]


def test_a_run_lists_only_its_own_familys_unexercised_clauses() -> None:
    """Each unexercised entry names the families it concerns: the single family lists EXTEND-9
    and DATA-3, the Mamba-slot family none (its clause section prints no such line); DATA-3
    concerns exactly the families whose executor checks KV bytes."""
    assert set(clauses.CONCERNS) == set(clauses.NOT_EXERCISED)
    assert set(clauses.unexercised_for("single")) == {"EXTEND-9", "DATA-3"}
    assert clauses.unexercised_for("mamba_slot") == {}
    tc = clauses.TargetClauses("t", Counter({"MSLOT-1": 1}), {"MSLOT-1"})
    assert "not exercised by this run" not in clauses.report([tc], gate=False, family="mamba_slot")
    assert "EXTEND-9" in clauses.report([tc], gate=False, family="single")
    planes = {name for name in FAMILY_MODULES
              if family(name).executor._data_sides is not Engine._data_sides}
    assert set(clauses.CONCERNS["DATA-3"]) == planes
