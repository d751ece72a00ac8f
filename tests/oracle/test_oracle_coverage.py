"""Coverage events: each classifier on hand-made calls, the table, and the gate of the CLI."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from kvpool.oracle.engine.capabilities import PAGED, TOKEN
from kvpool.oracle.engine.trace import TraceStep
from kvpool.oracle.entry.cli import main
from kvpool.oracle.families.single import coverage
from kvpool.oracle.reporting import coverage_table
from kvpool.spec import AllocatorModel


def _events(model: AllocatorModel, call: str, **args: object) -> list[str]:
    """Run ``call`` on the model and classify it the way the executor does."""
    before = coverage.snapshot(model)
    result = getattr(model, call)(**args)
    return coverage.events_of(TraceStep(call, dict(args)), before, model, result)


def test_shortage_kinds_partial_and_empty_alloc_3() -> None:
    """ALLOC-3 / EXTEND-6: a None with pages still free is a partial shortage, else empty."""
    m = AllocatorModel(16, 4, paged=True)
    assert "alloc.short_partial" in _events(m, "alloc", need_size=20)
    assert "alloc.ok" in _events(m, "alloc", need_size=16)
    assert "alloc.short_empty" in _events(m, "alloc", need_size=4)
    m = AllocatorModel(16, 4, paged=True)
    found = _events(
        m,
        "alloc_extend",
        prefix_lens=[0] * 9,
        seq_lens=[2] * 9,
        last_loc=[-1] * 9,
        extend_num_tokens=18,
    )
    assert "extend.short_partial" in found and "extend.bs_9_32" in found


def test_merge_events_need_staged_pages_and_a_short_free_list_sort_2() -> None:
    """ALLOC-5: an alloc that needs more than the free list while pages are staged merges."""
    m = AllocatorModel(16, 4, paged=True, need_sort=True)
    slots = m.alloc(16)
    assert slots is not None
    assert "free.staged" in _events(m, "free", free_index=slots[:8])
    assert "merge.alloc" in _events(m, "alloc", need_size=8)


def test_group_pieces_and_segment_shapes_group_6_seg_5() -> None:
    """GROUP-6: a page named by two free() calls of one group; SEG-5 trims; SEG-2 spans."""
    m = AllocatorModel(64, 4, paged=True)
    row = m.alloc(32)
    assert row is not None
    m.free_group_begin()
    assert "group.page_in_pieces" not in _events(m, "free", free_index=row[0:2])
    assert "group.page_in_pieces" in _events(m, "free", free_index=row[2:6])
    m.free_group_end()
    found = _events(
        m,
        "free_segments",
        segments=[(row[8:11], 8), (row[11:12], 11), (row[12:14], 12), (row[14:31], 14)],
    )
    assert {"seg.trim", "seg.inside", "seg.mid_span"} <= set(found)


def test_every_event_is_reachable_by_some_configuration_of_kvpool() -> None:
    """The table has no dead rows: each event is required by a token or a paged configuration."""
    reachable = set()
    for caps, sizes in ((TOKEN, (1,)), (PAGED, (1, 4, 32))):
        for ps in sizes:
            for ns in (False, True):
                reachable |= set(coverage.required(caps, ps, ns))
    assert reachable == set(coverage.EVENTS)


def test_target_coverage_gate_sums_configurations() -> None:
    """The gate asks each event once per target, reached in any of its configurations."""
    a = ("pg4", Counter({"alloc.ok": 2}), ["alloc.ok", "seg.trim"])
    b = ("pg4s", Counter({"seg.trim": 1}), ["alloc.ok", "seg.trim", "merge.alloc"])
    tc = coverage_table.TargetCoverage("t", [a, b], coverage.EVENTS)
    assert tc.missing() == ["merge.alloc"]
    text = coverage_table.table([tc])
    row = next(line for line in text.splitlines() if line.strip().startswith("merge.alloc"))
    assert row.split()[-3:] == ["-", "0", "0!"]


def test_cli_require_coverage_fails_a_run_too_short_to_reach_everything(
    tmp_path: Path, capsys: object
) -> None:
    """A run of 2 examples is conformant but cannot reach every event: the gate fails it (rc 1)
    and names what was missing, in the printed table and in the JSON report."""
    report = tmp_path / "run.json"
    target = "kvpool.oracle.families.single.targets:kvpool_paged"
    args = [target, "--page-sizes", "4", "--need-sort", "false", "--examples", "2",
            "--json", str(report), "--trace-dir", str(tmp_path)]
    assert main(args) == 0
    assert main([*args, "--require-coverage"]) == 1
    data = json.loads(report.read_text())
    missing = data["coverage_missing"][target]
    assert missing and set(missing) <= set(coverage.EVENTS)
    row = data["configurations"][0]
    assert row["status"] == "ok" and sum(row["coverage"].values()) > 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert f"coverage gate: {target}: never reached" in out
