"""What a first run reads: the help lists every family the registry holds with its default
budget, a constructor that already diverges is named as such (with its clause), the coverage
columns say what ran (``tok`` at page size 1, ``pg4`` ...), and every count agrees with its
noun (``1 page was needed``, ``1 example``)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from kvpool.oracle.engine import registry
from kvpool.oracle.engine.families import FAMILY_MODULES, family
from kvpool.oracle.engine.runner import Result
from kvpool.oracle.engine.target import Config
from kvpool.oracle.entry import cli
from kvpool.oracle.families.single.targets import load_target
from kvpool.oracle.reporting import run_report
from kvpool.spec import AllocatorModel
from kvpool.spec.contract import Divergence, accept_alloc
from kvpool.spec.wording import counted, noun
from test_oracle_cli import _run

# a count of one followed by a plural noun (or "were"): never printed
ONE_PLURAL = re.compile(r"(?<![\d.+-])1 (pages|calls|examples|slots|tokens|requests|holes|"
                        r"configurations|clauses|entries|were)\b")


def _help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def _family_rows(text: str) -> dict[str, str]:
    """The --family help's row of each family: ``name  N examples, M steps: ...``."""
    found = re.findall(r"^\s+(\w+)\s+(\d+ examples, \d+ steps):", text, re.MULTILINE)
    return dict(found)


def test_help_lists_every_registered_family_with_its_default_budget(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each family of the registry, with the budget its ``Family`` record runs by default."""
    rows = _family_rows(_help(capsys))
    assert set(rows) == set(FAMILY_MODULES)
    for name in FAMILY_MODULES:
        fam = family(name)
        assert rows[name] == f"{fam.default_examples} examples, {fam.default_steps} steps"
    assert rows["unified"] == "30 examples, 30 steps"


def test_help_reads_the_registry_not_a_written_list(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A family added to the registry is in the help (and accepted by --family) at once."""
    single = registry.FAMILIES["single"]
    extra = registry.Registered("kvpool.oracle.families.single.machine", 7, 3, "a test family",
                                calls=single.calls, aliases={"extra-target": ("m:f",)},
                                default_target="extra-target")
    monkeypatch.setitem(registry.FAMILIES, "extra", extra)
    text = _help(capsys)
    assert _family_rows(text)["extra"] == "7 examples, 3 steps"
    assert "a test family" in text and "targets: extra-target (default)" in text


def test_pytest_plugin_help_lists_every_family_with_its_default_budget(tmp_path: Path) -> None:
    r = _run(["-m", "pytest", "-p", "no:cacheprovider", "--help"], tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "--kvpool-family={" + ",".join(FAMILY_MODULES) + "}" in text
    for name in FAMILY_MODULES:
        fam = family(name)
        assert f"{name}: {fam.default_examples} examples, {fam.default_steps} steps" in text


def test_a_constructor_that_diverges_is_named_with_its_clause(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No call ran because the constructor already breaks INV-3: the report and the summary
    say so and name the clause (not "nothing was tested")."""
    assert cli.main(["minimal_allocator:make_page0", "--page-sizes", "4", "--examples", "5"]) == 1
    out = capsys.readouterr().out
    assert "the constructor already diverges: INV-3" in out.split("summary")[0]  # the report
    summary = out.split("summary")[1]
    assert "1 configuration, 0 calls" in summary
    assert ": the constructor already diverges: INV-3" in summary
    assert "nothing was tested" not in out


def test_the_summary_tells_a_constructor_failure_from_a_run_without_calls() -> None:
    """A worker's row (no failure object) counts too: FAIL and no call is the constructor."""
    row = Result("m:make", Config(4, False), examples=1, reported="FAIL INV-3")
    empty = Result("m:make", Config(4, False))
    ran = Result("m:make", Config(16, False), examples=3, calls=40)
    assert run_report.verdict([row]) == "the constructor already diverges: INV-3"
    assert run_report.verdict([empty]) == "no call ran: nothing was tested"
    assert run_report.verdict([ran]) == "conformant"
    assert run_report.verdict([ran, row]) == (
        "1 configuration diverges or ran no call (the constructor already diverges: INV-3)")


def test_coverage_columns_say_what_ran(capsys: pytest.CaptureFixture[str]) -> None:
    """``tok`` at page size 1, ``pg4`` / ``pg16`` paged, ``s`` for need_sort; never ``pg1``."""
    target = load_target("minimal_allocator:make")
    configs = [Config(1, False), Config(4, False), Config(16, True)]
    results = [Result(target.path, c, examples=1, calls=5, coverage=Counter({"alloc.ok": 1}))
               for c in configs]
    run_report.report_run(results, [target] * 3, family("single").clauses, seconds=0.0)
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if line.split()[:2] == ["event", "clause"])
    assert head.split()[2:] == ["tok", "pg4", "pg16s", "all"]
    assert "  tok    = minimal_allocator:make ps=1" in out and not re.search(r"\bpg1\b", out)


def test_counts_agree_with_their_nouns() -> None:
    assert [counted(n, "page") for n in (0, 1, 2)] == ["0 pages", "1 page", "2 pages"]
    assert counted(1, "page was", "pages were") == "1 page was"
    assert noun(3, "entry", "entries") == "entries"
    model = AllocatorModel(size=32, page_size=4)
    model.free_pages = model.free_pages[:1]  # one page left
    with pytest.raises(Divergence, match="1 page was needed and 1 is free or staged") as err:
        accept_alloc(model, 4, None)
    assert not ONE_PLURAL.search(err.value.detail)


def test_a_one_example_run_prints_no_count_of_one_with_a_plural(tmp_path: Path) -> None:
    """Progress line, failure report and summary of a run of one example, one configuration."""
    args = ["-m", "kvpool.oracle", "--page-sizes", "4", "--examples", "1", "--steps", "1"]
    for target in ("minimal_allocator:make", "minimal_allocator:make_page0"):
        r = _run([*args, target, "--trace-dir", str(tmp_path)], tmp_path)
        assert r.returncode in (0, 1), r.stderr
        assert re.search(r" 1 example +\d+ call", r.stdout), r.stdout
        assert "1 configuration," in r.stdout
        assert not ONE_PLURAL.search(r.stdout), ONE_PLURAL.search(r.stdout)
