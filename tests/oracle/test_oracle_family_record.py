"""A family is one record (``kvpool.oracle.engine.registry``): ``--jobs`` and ``--rounds`` run
every family on its default target, the help shows each family's defaults from its record, the
record's paths resolve, and no oracle module outside ``oracle/families/<name>/`` and the
registry branches on a family's name or its default target."""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path

import pytest
from kvpool.oracle.engine import registry
from kvpool.oracle.engine.families import family
from kvpool.oracle.entry import cli
from kvpool.oracle.entry.parallel import pytest_args
from test_oracle_cli import _run
from test_oracle_unified_hint import _load_sglang_in_a_child

ORACLE = Path(__file__).resolve().parents[2] / "oracle"
# modules that still branch on a family, each with the reason: an entry must still do so,
# so that it leaves this list once its branches move out (none left)
EXEMPT: dict[str, str] = {}
TINY = ["--examples", "2", "--steps", "5"]


def _peer_needed(name: str) -> str | None:
    """The peer a family's default target runs (from the record's paths), None for kvpool's."""
    record = registry.FAMILIES[name]
    names = [path.partition(":")[2] for path in record.aliases[record.default_target]]
    return "sglang" if any(n.startswith("sglang") for n in names) else None


def _require_peer(name: str, cwd: Path) -> None:
    """PeerNotInstalled (skipped outside CI by tests/conftest.py) when the family's default
    target needs SGLang and it is not installed; a failure when it is but does not load."""
    if _peer_needed(name) is not None:
        _load_sglang_in_a_child(cwd)


@pytest.mark.parametrize("option", ["--jobs", "--rounds"])
@pytest.mark.parametrize("name", list(registry.FAMILIES))
def test_jobs_and_rounds_run_every_family_on_its_default_target(
    name: str, option: str, tmp_path: Path
) -> None:
    """``--family NAME --jobs 2`` / ``--rounds 2`` with no target: the record's default target
    (its paths as the report names them), every configuration conformant; rounds: two results
    per configuration."""
    pytest.importorskip("xdist")
    _require_peer(name, tmp_path)
    out = tmp_path / "run.json"
    r = _run(["-m", "kvpool.oracle", "--family", name, option, "2", *TINY, "--json", str(out),
              "--trace-dir", str(tmp_path)], tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = json.loads(out.read_text())["configurations"]
    record = registry.FAMILIES[name]
    assert {row["target"] for row in rows} == set(record.aliases[record.default_target])
    assert all(row["status"] == "ok" for row in rows), rows
    per_config = Counter((row["target"], row["page_size"], row["need_sort"]) for row in rows)
    assert set(per_config.values()) == {2 if option == "--rounds" else 1}, per_config


def test_jobs_names_the_default_target_of_the_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pytest session of ``--jobs`` runs the record's default target, whatever family."""
    args = cli._run_parser().parse_args(["--jobs", "2"])
    args.examples, args.steps = 1, 1
    for name, record in registry.FAMILIES.items():
        args.family = name
        argv = pytest_args(args, "/nowhere")
        assert argv[argv.index("--kvpool-target") + 1] == record.default_target
    extra = registry.Registered("m", 1, 1, "x", calls="m:T", aliases={"a": ("m:f",), "b": ("m:g",)},
                                default_target="b")
    monkeypatch.setitem(registry.FAMILIES, "extra", extra)
    args.family = "extra"
    argv = pytest_args(args, "/nowhere")
    assert argv[argv.index("--kvpool-target") + 1] == "b"


def test_help_shows_every_family_with_the_defaults_of_its_record(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``--help`` (and the pytest plugin's) show each registered family's budget, default
    target and aliases, read from its record."""
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    plugin = _run(["-m", "pytest", "-p", "no:cacheprovider", "--help"], tmp_path, timeout=120)
    assert plugin.returncode == 0, plugin.stderr
    plugin_text = " ".join(plugin.stdout.split())
    for name, record in registry.FAMILIES.items():
        assert (f"{name} {record.examples} examples, {record.steps} steps: {record.about}"
                in text.replace("- ", "-"))  # argparse may wrap an about after a hyphen
        others = [a for a in record.aliases if a != record.default_target]
        listed = ", ".join([f"{record.default_target} (default)", *others])
        assert f"targets: {listed}" in text.replace("- ", "-")
        assert f"{name}: {listed}" in plugin_text.replace("- ", "-")
        assert f"{name}: {record.examples} examples, {record.steps} steps" in plugin_text


def test_every_record_resolves() -> None:
    """Each record's call table, repro imports and aliases import; a family's ``Family`` reads
    its defaults from its record."""
    for name, record in registry.FAMILIES.items():
        fam = family(name)
        assert fam.name == name and fam.calls is registry.load(record.calls)
        assert (fam.default_examples, fam.default_steps) == (record.examples, record.steps)
        assert fam.default_target == record.default_target
        if record.repro_imports:
            assert all(line.startswith(("from ", "import "))
                       for line in registry.load(record.repro_imports))
        for paths in record.aliases.values():
            assert all(callable(registry.load(p)) for p in paths)
    with pytest.raises(ValueError, match="not an alias"):
        registry.Registered("m", 1, 1, "x", calls="m:T", aliases={"a": ("m:f",)},
                            default_target="b")


def _names() -> set[str]:
    """Every family's name and default target, as the registry holds them (its other aliases
    include peer names, ``sglang`` and ``vllm``, that the peer loaders compare with rightly)."""
    return {*registry.FAMILIES, *(r.default_target for r in registry.FAMILIES.values())}


def _branch_literals(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """Family names (or default targets) as string literals where code chooses by them: a comparison
    (``==``, ``in``, ...), a ``match`` case, or a key of a dict literal (a table by family)."""
    found: list[tuple[int, str]] = []

    def literals(node: ast.AST) -> list[ast.Constant]:
        return [n for n in ast.walk(node) if isinstance(n, ast.Constant) and n.value in names]

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            hits = literals(node)
        elif isinstance(node, ast.match_case):
            hits = literals(node.pattern)
        elif isinstance(node, ast.Dict):
            hits = [c for key in node.keys if key is not None for c in literals(key)]
        else:
            continue
        found += [(c.lineno, c.value) for c in hits]
    return found


def _outside_families() -> dict[str, Path]:
    return {str(p.relative_to(ORACLE)): p for p in ORACLE.rglob("*.py")
            if p.relative_to(ORACLE).parts[0] != "families"
            and p != ORACLE / "engine" / "registry.py"}


def test_no_module_outside_a_family_and_the_registry_branches_on_a_family() -> None:
    """Outside ``oracle/families/<name>/`` and the registry, no comparison, ``match`` case or
    dict literal holds a family's name or default target (``EXEMPT`` aside, each still doing so)."""
    names = _names()
    found = {rel: hits for rel, path in _outside_families().items()
             if (hits := _branch_literals(ast.parse(path.read_text()), names))}
    assert {rel: hits for rel, hits in found.items() if rel not in EXEMPT} == {}
    present = {rel for rel in EXEMPT if (ORACLE / rel).exists()}
    assert present <= set(found), f"no longer branching on a family: {present - set(found)}"


def test_the_branch_check_sees_a_branch() -> None:
    """The check above is not vacuous: each form it looks for is found."""
    source = ('if args.family == "single": pass\nx = "a" if f in ("hybrid",) else "b"\n'
              'T = {"unified": 1}\nmatch f:\n    case "kvpool-swa": pass\n')
    assert sorted(_branch_literals(ast.parse(source), _names())) == [
        (1, "single"), (2, "hybrid"), (3, "unified"), (5, "kvpool-swa")]
    assert _branch_literals(ast.parse('family: str = "single"\n'), _names()) == []
