"""A first run that works: inferred capabilities, checked mode with the target's own errors,
usage errors that say what is wrong, and reports that count what ran.

The command line runs in a subprocess where the exit status or the printed report is the point,
in-process (``cli.main``) where only the message is.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import minimal_allocator
import pytest
from kvpool.oracle.engine.capabilities import PAGED, UNDECLARED
from kvpool.oracle.engine.declaration import parse_declaration
from kvpool.oracle.engine.runner import Result, run_config
from kvpool.oracle.engine.target import Config
from kvpool.oracle.entry import cli
from kvpool.oracle.families.single.inference import FactoryError, infer
from kvpool.oracle.families.single.targets import load_target
from kvpool.oracle.reporting import run_report
from test_oracle_cli import _run


def test_oracle_first_run_of_a_minimal_target_passes_with_no_options(tmp_path: Path) -> None:
    """Five methods, FIFO reuse, no declaration: the bare command passes and says why."""
    r = _run(["-m", "kvpool.oracle", "minimal_allocator:make"], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("capabilities in force for minimal_allocator:make: order=contract")
    for item in (
        "checked=false (default)",
        "extend=false (inferred)",
        "clear=true (inferred)",
        "page_sizes=1+4+16 (default)",
        "need_sort=false (inferred)",
    ):
        assert item in first, first
    assert "no resize" in r.stdout and "conformant" in r.stdout
    assert re.search(r"ps=4 need_sort=False cpu contract +ok +150 examples", r.stdout), r.stdout


def test_oracle_infers_capabilities_from_the_methods() -> None:
    """Missing methods switch their rules off; a token allocator is recognised by page size."""
    caps, notes = infer(minimal_allocator.make)
    assert (caps.extend, caps.groups, caps.segments, caps.resize, caps.merge) == (
        False,
        False,
        "none",
        False,
        False,
    )
    assert caps.clear and caps.paged and caps.need_sort == (False,) and not caps.checked
    assert caps.source_of("extend") == "inferred" and caps.source_of("checked") == "default"
    assert any("no alloc_extend" in n for n in notes)
    spec_like, _ = infer(load_target("spec_torch:spec_paged").factory)
    assert spec_like.extend and spec_like.groups and spec_like.capacity_hooks
    assert not spec_like.checked and not spec_like.reference_order  # never assumed


def test_oracle_runs_every_page_size_class_unless_the_factory_rejects_one() -> None:
    """Undeclared page sizes are 1, 4 and 16 (token-like, small, >= 16); a size the factory
    rejects is left out, and the notes say why."""
    caps, _ = infer(minimal_allocator.make)
    assert caps.page_sizes == (1, 4, 16) and caps.source_of("page_sizes") == "default"

    def small_pages_only(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
        if page_size > 8:
            raise ValueError(f"page_size {page_size} > 8")
        return minimal_allocator.make(size=size, page_size=page_size, need_sort=need_sort,
                                      device=device)

    caps, notes = infer(small_pages_only)
    assert caps.page_sizes == (1, 4) and caps.source_of("page_sizes") == "inferred"
    assert any(n.startswith("page size 16 is rejected") for n in notes), notes


def test_oracle_factory_errors_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(FactoryError, match="no pool of"):
        infer(minimal_allocator.make_raises)
    assert cli.main(["minimal_allocator:make_raises"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: no pool of" in err
    assert "kvpool.oracle: error: minimal_allocator:make_raises: the factory raised" in err


def test_oracle_checked_mode_takes_the_targets_own_exception() -> None:
    """checked=ValueError: any ValueError rejects; the state must still be unchanged."""
    target = load_target("minimal_allocator:make_checked")
    target.caps = parse_declaration("checked=ValueError", target.caps)
    ok = run_config(target, Config(4, False, "cpu", "contract"), max_examples=60)
    assert ok.ok, ok.failure.report() if ok.failure else ok.error
    # declared as raising ContractViolation, it raises ValueError: a divergence with a hint
    target.caps = parse_declaration("checked=true", target.caps)
    wrong = run_config(target, Config(4, False, "cpu", "contract"), max_examples=60)
    assert wrong.failure is not None, "ValueError accepted as ContractViolation"
    assert "instead of ContractViolation" in wrong.failure.detail
    assert "--declare checked=ValueError" in wrong.failure.report()
    # the unchecked target declared checked: it accepts the bad call
    plain = load_target("minimal_allocator:make")
    plain.caps = parse_declaration("checked=ValueError", plain.caps)
    found = run_config(plain, Config(4, False, "cpu", "contract"), max_examples=60)
    assert found.failure is not None and "accepted the call" in found.failure.detail
    assert found.failure.hint is not None and "checked=false" in found.failure.hint


def test_oracle_declaration_parses_exception_classes() -> None:
    caps = parse_declaration("checked=ValueError+AssertionError", PAGED)
    assert caps.error_types == (ValueError, AssertionError)
    assert caps.value_text("checked") == "ValueError+AssertionError"
    dotted = parse_declaration("checked=kvpool.spec.errors.ContractViolation", PAGED)
    assert dotted.value_text("checked") == "true" and dotted.source_of("checked") == "option"
    for bad in ("checked=NoSuchError", "checked=os.path", "resize=maybe", "colour=red"):
        with pytest.raises(ValueError):
            parse_declaration(bad, PAGED)
    assert UNDECLARED.error_types == () and PAGED.replace(checked=False).checked == ()


@pytest.mark.parametrize("page_size", ["1", "4"])
def test_oracle_planted_bug_fails_with_a_repro_that_the_fix_passes(
    tmp_path: Path, page_size: str
) -> None:
    """Exit 1, and the printed pytest function fails on the bug and passes on the fix, at
    page size 1 too, where the target is judged as the paged allocator it is (the README's
    failure example): the repro's spec side is a paged model there as well."""
    r = _run(["-m", "kvpool.oracle", "minimal_allocator:make_nodedup", "--page-sizes", page_size],
             tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    source = r.stdout[r.stdout.index("def test_kvpool_repro") : r.stdout.index("JSON trace:")]
    namespace: dict[str, object] = {}
    exec(compile(source, "<repro>", "exec"), namespace)
    with pytest.raises(AssertionError):
        namespace["test_kvpool_repro"]()  # type: ignore[operator]
    fixed = source.replace("import make_nodedup as factory", "import make as factory")
    assert fixed != source
    exec(compile(fixed, "<fixed>", "exec"), namespace)
    namespace["test_kvpool_repro"]()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--examples", "0"], "--examples: must be > 0"),
        (["--examples", "-3"], "--examples: must be > 0"),
        (["--steps", "0"], "--steps: must be > 0"),
        (["--minutes", "0"], "--minutes: must be > 0"),
        (["--device", "cuda:99"], "device 'cuda:99' is not available"),
        (
            ["--page-sizes", "16"],
            "page size 16 is not declared by kvpool.oracle.families.single.targets:kvpool_token",
        ),
        (["--page-sizes", "0"], "page size 0 is invalid"),
        (["--declare", "checked=Nope"], "'Nope' is not an exception class"),
    ],
)
def test_oracle_cli_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing that is the user's mistake is reported as a divergence (exit 2, no run)."""
    try:
        rc = cli.main(["kvpool.oracle.families.single.targets:kvpool_token", *argv])
    except SystemExit as exit_:  # argparse
        rc = int(exit_.code or 0)
    out = capsys.readouterr()
    assert rc == 2, out.out + out.err
    assert message in out.err and "summary" not in out.out


def test_oracle_trace_files_never_overwrite(tmp_path: Path) -> None:
    config = Config(4, False, "cpu", "contract")
    paths = {cli.trace_path(tmp_path, "m:make", config) for _ in range(3)}
    assert len(paths) == 3 and all(p.exists() for p in paths)


def test_oracle_examples_count_what_ran() -> None:
    """The examples column is Hypothesis's count: discarded and shrinking runs are not in it."""
    target = load_target("minimal_allocator:make")
    r = run_config(target, Config(4, False, "cpu", "contract"), max_examples=40)
    assert r.examples == 40 and r.calls > 40
    bug = load_target("minimal_allocator:make_nodedup")
    r = run_config(bug, Config(4, False, "cpu", "contract"), max_examples=40)
    assert r.failure is not None and 1 <= r.examples <= 40


def test_oracle_a_run_without_calls_is_not_conformant(capsys: pytest.CaptureFixture[str]) -> None:
    empty = Result("m:make", Config(4, False))
    assert not empty.ok and empty.status() == "NO CALLS"
    run_report._summary([empty], 0.0)
    assert "no call ran: nothing was tested" in capsys.readouterr().out


DOC = Path(__file__).parents[2] / "docs" / "writing-a-target.md"


def test_oracle_writing_a_target_doc_example_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The doc's complete minimal target runs through the oracle with no option and passes."""
    from kvpool.oracle.entry.plan import plan

    text = DOC.read_text()
    example = text[text.index("## A complete minimal target") :]
    start = example.index("```python\n") + len("```python\n")
    code = example[start : example.index("\n```", start)]
    (tmp_path / "doc_alloc.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    (planned,) = plan("doc_alloc:make")
    assert [c.page_size for c in planned.configs] == [1, 4, 16]
    for config in planned.configs:
        r = run_config(planned.target, config, max_examples=30)
        assert r.ok, r.failure.report() if r.failure else r.error


def test_oracle_writing_a_target_doc_lists_every_capability() -> None:
    """Every Capabilities field, every required method and every exit status is documented."""
    import dataclasses

    from kvpool.oracle.engine.capabilities import META_FIELDS, Capabilities
    from kvpool.oracle.families.single.inference import METHOD_RULES, REQUIRED

    text = DOC.read_text()
    for f in dataclasses.fields(Capabilities):
        if f.name not in META_FIELDS:
            assert f"`{f.name}`" in text, f.name
    for method in (*REQUIRED, *(m for _, _, methods in METHOD_RULES for m in methods)):
        assert f"`{method}(" in text, method
    assert all(f"**{code}**" in text for code in (0, 1, 2))
    assert "exit status:" in cli.EXIT_CODES


def test_oracle_a_rejected_call_must_leave_the_state_unchanged_whatever_it_raises() -> None:
    """checked=ValueError: the ValueError is accepted, the page it took is not (ERR-1)."""
    target = load_target("minimal_allocator:make_dirty_reject")
    target.caps = parse_declaration("checked=ValueError", target.caps)
    r = run_config(target, Config(4, False, "cpu", "contract"), max_examples=100)
    assert r.failure is not None and r.failure.clause == "ERR-1", r.failure or r.error


def test_oracle_repro_of_a_rejected_call_expects_the_declared_type() -> None:
    """A repro's rejected step runs under pytest.raises(ValueError) for a checked=ValueError
    target: it passes on that target, and fails on one that accepts the double free."""
    from kvpool.oracle.engine.repro import to_pytest
    from kvpool.oracle.engine.trace import Trace, TraceStep

    trace = Trace(
        "minimal_allocator:make_checked",
        4,
        False,
        "cpu",
        "contract",
        error_types=["builtins.ValueError"],
    )
    trace.steps = [
        TraceStep("create", {"size": 32, "page_size": 4, "need_sort": False}),
        TraceStep("free", {"free_index": [4]}, raises="FREE-3", available_after=32),
    ]
    trace.failing_step = 1
    source = to_pytest(trace, trace.target)
    assert "with pytest.raises(ValueError) as err:" in source
    namespace: dict[str, Any] = {}
    exec(compile(source, "<repro>", "exec"), namespace)
    namespace["test_kvpool_repro"]()
    from kvpool.oracle.engine.replay import replay

    undeclared = load_target("minimal_allocator:make_checked")
    assert not undeclared.caps.error_types  # inferred unchecked: judged by the trace's types
    assert replay(Trace.from_json(trace.to_json()), undeclared) is None
    accepting = source.replace("import make_checked as factory", "import make as factory")
    exec(compile(accepting, "<accepting>", "exec"), namespace)
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        namespace["test_kvpool_repro"]()


def test_oracle_hint_names_the_declaration_for_a_missing_method() -> None:
    """Declared resize on a target without it: the AttributeError comes with the way out."""
    target = load_target("minimal_allocator:make")
    target.caps = parse_declaration("resize=true", target.caps)
    r = run_config(target, Config(4, False, "cpu", "contract"), max_examples=100)
    assert r.failure is not None and r.failure.clause == "LIFE-2", r.failure or r.error
    assert "hint: if the target does not implement resize: --declare resize=false" in (
        r.failure.report()
    )


def test_oracle_help_states_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "exit status: 0 every configuration conformant" in out and "2 a usage error" in out
    assert "docs/writing-a-target.md" in out
