"""The HiSparse family (``HSP-1..11``, SPEC.md section 20) through the whole oracle: kvpool's
``HiSparseTokenToKVPoolAllocator`` and SGLang 0.5.23's are conformant under their declarations
with every reachable event reached; each registered SGLang divergence shows when its rule is
switched back on; each broken allocator of ``broken_hisparse`` is reported under exactly its
clause at the family's default budget, with a short trace that replays clean on kvpool's; the
command line (in a subprocess), JSON traces and replay, and printed repros that fail on a broken
allocator and pass on kvpool's. SGLang's tests skip where it is not installed (outside CI:
``kvpool.oracle.peers.availability``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from broken_hisparse import BROKEN_HISPARSE, BrokenHiSparse
from kvpool.oracle.engine import registry
from kvpool.oracle.engine.families import family
from kvpool.oracle.engine.replay import replay
from kvpool.oracle.engine.repro import to_pytest
from kvpool.oracle.engine.reprocheck import run_source
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config
from kvpool.oracle.entry import cli
from kvpool.oracle.families.hisparse.peer import load_sglang_hisparse
from kvpool.oracle.families.hisparse.targets import FULL
from kvpool.oracle.peers.divergences import REGISTRY
from test_oracle_toy_family import _oracle

HERE = Path(__file__).parent
FAMILY = "hisparse"
CORRECT = "kvpool.oracle.families.hisparse.targets:kvpool_hisparse"
BROKEN = {b.clauses[0]: b for b in BROKEN_HISPARSE}


@pytest.fixture
def broken_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """``broken_hisparse`` importable in the processes a test starts."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))


def test_the_family_is_registered_with_kvpool_as_its_default() -> None:
    record = registry.registered(FAMILY)
    assert record.default_target == "kvpool-hisparse"
    assert {"kvpool-hisparse", "sglang-hisparse"} <= set(record.aliases)
    assert "hisparse" in registry.family_help()


def test_kvpool_is_conformant_with_every_event_and_clause(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The default run (``--family hisparse``, kvpool's allocator, page sizes 1 and 4, need_sort
    off and on) passes the coverage gate and exercises HSP-1..11 and ERR-1."""
    assert cli.main(["--family", FAMILY, "--require-coverage"]) == 0
    out = capsys.readouterr().out
    assert "coverage gate: every reachable event reached" in out
    assert "12 of 12 expected clauses exercised" in out, out[-2000:]


def test_sglang_is_conformant_under_its_registered_divergences(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SGLang's class, with the rules its registry entries name switched off, conforms to
    everything else with every reachable event reached."""
    load_sglang_hisparse()  # not installed: skipped outside CI (tests/conftest.py)
    assert cli.main(["--family", FAMILY, "sglang-hisparse", "--require-coverage"]) == 0
    out = capsys.readouterr().out
    assert "divergences=SGL-HSP-UNCHECKED+SGL-HSP-DECODE-PS1" in out
    assert "coverage gate: every reachable event reached" in out


HSP_ENTRIES = [d for d in REGISTRY if d.target == "sglang-hisparse"]


@pytest.mark.parametrize("entry", HSP_ENTRIES, ids=[d.id for d in HSP_ENTRIES])
def test_each_sglang_divergence_shows_when_its_rule_is_on(entry: object) -> None:
    """Switching the entry's rule back on makes a run fail under one of its clauses."""
    load_sglang_hisparse()
    fam = family(FAMILY)
    field, _ = entry.excludes  # type: ignore[attr-defined]
    target = fam.target(fam.factory("sglang-hisparse"))
    target.caps = target.caps.replace(**{field: getattr(FULL, field)})
    failure = None
    for page_size in (1, 4):
        result = run_config(target, Config(page_size, False), max_examples=60, step_count=25)
        failure = result.failure
        if failure is not None:
            break
    assert failure is not None, f"{entry.id}: no divergence"  # type: ignore[attr-defined]
    assert failure.clause in entry.reported_clauses(), failure.report()  # type: ignore[attr-defined]


@pytest.mark.parametrize("broken", BROKEN_HISPARSE, ids=[b.name for b in BROKEN_HISPARSE])
def test_each_broken_allocator_is_caught_under_its_clause(broken: BrokenHiSparse) -> None:
    """At the family's default budget, with a trace of at most 4 calls after the
    constructor; the trace replays clean on kvpool's allocator."""
    result = broken.run()
    assert result.error is None, result.error
    failure = result.failure
    assert failure is not None, f"{broken.name} not caught"
    assert failure.clause == broken.clauses[0], failure.report()
    assert failure.trace.num_calls() <= 4 and failure.trace.family == FAMILY, failure.report()
    fam = family(FAMILY)
    assert replay(failure.trace, fam.target(fam.factory("kvpool-hisparse"))) is None


@pytest.mark.parametrize("clause", ["HSP-3", "HSP-7", "HSP-8"])
def test_the_printed_repro_fails_on_the_broken_and_passes_on_kvpool(clause: str) -> None:
    """The report's repro is checked (fails on the broken allocator, passes on kvpool's) and
    does so when run here."""
    broken = BROKEN[clause]
    failure = broken.run().failure
    assert failure is not None
    report = failure.report()
    correct = registry.FAMILIES[FAMILY].correct["paged"].name  # kvpool's HiSparse allocator
    assert f"# repro checked: fails on {broken.path}, passes on {correct}" in report, report
    assert run_source(to_pytest(failure.trace, broken.path)) is not None
    assert run_source(to_pytest(failure.trace, CORRECT)) is None


@pytest.mark.usefixtures("broken_on_path")
def test_the_command_line_runs_replays_and_prints_a_repro(tmp_path: Path) -> None:
    """``python -m kvpool.oracle --family hisparse broken_hisparse:freelogicalonly``: FAIL
    HSP-8 with a trace file; the trace replays failing, and clean with
    ``--target kvpool-hisparse``."""
    r = _oracle(["--family", FAMILY, "broken_hisparse:freelogicalonly", "--trace-dir",
                 str(tmp_path)], tmp_path)
    assert r.returncode == 1 and "FAIL HSP-8" in r.stdout, r.stdout + r.stderr
    assert "reproduce with pytest:" in r.stdout
    trace = sorted(tmp_path.glob("*.json"))[0]
    assert json.loads(trace.read_text())["family"] == FAMILY
    again = _oracle(["replay", str(trace)], tmp_path)
    assert again.returncode == 1 and "[HSP-8]" in again.stdout, again.stdout + again.stderr
    clean = _oracle(["replay", str(trace), "--target", "kvpool-hisparse"], tmp_path)
    assert clean.returncode == 0 and "replays without divergence" in clean.stdout, clean.stderr

