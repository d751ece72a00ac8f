"""The HiSparse family's DeepSeek V4 variant (targets declaring ``dsv4``, ``HSP-12..16``, SPEC.md
section 20) through the whole oracle: kvpool's ``DeepSeekV4HiSparseAllocator`` and SGLang
0.5.23's ``DeepSeekV4HiSparseTokenToKVPoolAllocator`` are conformant (SGLang's under its
registered divergence) with every reachable event reached; the divergence shows when its rule is
switched back on; each broken allocator of ``broken_hisparse_dsv4`` is reported under exactly
its clause with a trace that replays clean on kvpool's. SGLang's tests skip where it is not
installed (outside CI: ``kvpool.oracle.peers.availability``)."""

from __future__ import annotations

import pytest
from broken_hisparse import BrokenHiSparse
from broken_hisparse_dsv4 import BROKEN_HISPARSE_DSV4
from kvpool.oracle.engine import registry
from kvpool.oracle.engine.families import family
from kvpool.oracle.engine.replay import replay
from kvpool.oracle.engine.repro import to_pytest
from kvpool.oracle.engine.reprocheck import run_source
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config
from kvpool.oracle.entry import cli
from kvpool.oracle.families.hisparse.peer import load_sglang_hisparse
from kvpool.oracle.families.hisparse.targets import DSV4
from kvpool.oracle.peers.divergences import REGISTRY

FAMILY = "hisparse"
CORRECT = "kvpool.oracle.families.hisparse.targets:kvpool_hisparse_dsv4"


def test_the_variant_is_registered_beside_the_plain_pair() -> None:
    record = registry.registered(FAMILY)
    assert {"kvpool-hisparse-dsv4", "sglang-hisparse-dsv4"} <= set(record.aliases)
    fam = family(FAMILY)
    assert fam.target(fam.factory("kvpool-hisparse-dsv4")).caps.dsv4
    assert not fam.target(fam.factory("kvpool-hisparse")).caps.dsv4


def test_kvpool_is_conformant_with_every_event_and_clause(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """kvpool's variant (page sizes 4 and 8, need_sort off and on) passes the coverage gate and
    exercises HSP-12..16."""
    assert cli.main(["--family", FAMILY, "kvpool-hisparse-dsv4", "--require-coverage"]) == 0
    out = capsys.readouterr().out
    assert "coverage gate: every reachable event reached" in out
    assert "5 of 5 expected clauses exercised" in out, out[-2000:]


def test_sglang_is_conformant_under_its_registered_divergence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    load_sglang_hisparse()  # not installed: skipped outside CI (tests/conftest.py)
    assert cli.main(["--family", FAMILY, "sglang-hisparse-dsv4", "--require-coverage"]) == 0
    out = capsys.readouterr().out
    assert "divergences=SGL-HSP-DSV4-DECODE-LEAK" in out
    assert "coverage gate: every reachable event reached" in out


DSV4_ENTRIES = [d for d in REGISTRY if d.target == "sglang-hisparse-dsv4"]


@pytest.mark.parametrize("entry", DSV4_ENTRIES, ids=[d.id for d in DSV4_ENTRIES])
def test_each_sglang_divergence_shows_when_its_rule_is_on(entry: object) -> None:
    """Switching the entry's rule back on makes a run fail under one of its clauses."""
    load_sglang_hisparse()
    fam = family(FAMILY)
    field, _ = entry.excludes  # type: ignore[attr-defined]
    target = fam.target(fam.factory("sglang-hisparse-dsv4"))
    target.caps = target.caps.replace(**{field: getattr(DSV4, field)})
    failure = None
    for page_size in DSV4.page_sizes:
        for need_sort in DSV4.need_sort:
            result = run_config(target, Config(page_size, need_sort), max_examples=60,
                                step_count=25)
            failure = failure or result.failure
    assert failure is not None, f"{entry.id}: no divergence"  # type: ignore[attr-defined]
    assert failure.clause in entry.reported_clauses(), failure.report()  # type: ignore[attr-defined]


@pytest.mark.parametrize("broken", BROKEN_HISPARSE_DSV4,
                         ids=[b.name for b in BROKEN_HISPARSE_DSV4])
def test_each_broken_allocator_is_caught_under_its_clause(broken: BrokenHiSparse) -> None:
    """At the family's default budget; the trace replays clean on kvpool's variant."""
    result = broken.run()
    assert result.error is None, result.error
    failure = result.failure
    assert failure is not None, f"{broken.name} not caught"
    assert failure.clause == broken.clauses[0], failure.report()
    assert failure.trace.family == FAMILY, failure.report()
    fam = family(FAMILY)
    assert replay(failure.trace, fam.target(fam.factory("kvpool-hisparse-dsv4"))) is None


@pytest.mark.parametrize("broken", BROKEN_HISPARSE_DSV4[1:3],
                         ids=[b.name for b in BROKEN_HISPARSE_DSV4[1:3]])
def test_the_printed_repro_fails_on_the_broken_and_passes_on_kvpool(
        broken: BrokenHiSparse) -> None:
    """The report's repro is checked against the family's correct factory (kvpool's variant
    for a DSV4 trace) and does so when run here."""
    failure = broken.run().failure
    assert failure is not None
    assert f"# repro checked: fails on {broken.path}" in failure.report(), failure.report()
    assert run_source(to_pytest(failure.trace, broken.path)) is not None
    assert run_source(to_pytest(failure.trace, CORRECT)) is None
