"""The README for a first visit: short, its commands and example real, its links alive.

- at most 80 lines, with the two set-up commands exactly as CI runs them;
- its usage example runs and ends in the ``ContractViolation`` its comment shows;
- its failure report is what the oracle prints for that allocator today;
- every relative link of the README and of ``docs/*.md`` names a file the repository holds.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
COMMANDS = ('pip install -e . && python -m kvpool.oracle', 'pip install -e ".[test]" && pytest')


def _block(text: str, after: str, lang: str) -> str:
    part = text[text.index(after):]
    start = part.index(f"```{lang}\n") + len(f"```{lang}\n")
    return part[start : part.index("\n```", start)]


def test_readme_is_short_and_keeps_the_setup_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 80
    setup = _block(text, "## Set up", "bash")
    for command in COMMANDS:
        assert command in setup
    assert re.search(r'pip install (-q )?-e "\.\[test\]" && pytest$',
                     (ROOT / ".ci" / "run").read_text(), re.M)


def test_readme_usage_example_raises_the_error_it_shows() -> None:
    """The example runs to its last line, which raises the ContractViolation in its comment."""
    from kvpool.spec import ContractViolation

    code = _block(README.read_text(), "## Usage", "python")
    *body, last = code.splitlines()
    shown = re.search(r"raises ContractViolation: (\[(\S+)\] .*)$", last)
    assert shown is not None
    scope: dict[str, object] = {}
    exec("\n".join(body), scope)
    with pytest.raises(ContractViolation) as caught:
        exec(last.split("#")[0], scope)
    assert caught.value.clause == shown.group(2)
    assert str(caught.value) == shown.group(1)


def test_readme_failure_report_is_the_oracles(tmp_path: Path) -> None:
    """The shortened report is what the oracle prints for that allocator: the same verdicts,
    the same message up to its details, a trace whose last call is the diverging ``free``
    (shrinking is time-bounded, so the exact trace may differ on a loaded machine)."""
    text = README.read_text()
    report = _block(text, "## What a failure looks like", "text").splitlines()
    command = report[0].removeprefix("$ ").split()
    assert command[:3] == ["python", "-m", "kvpool.oracle"]
    run = subprocess.run([sys.executable, *command[1:], "--trace-dir", str(tmp_path)],
                         cwd=ROOT / "tests" / "oracle", capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    for line in report[1:3]:  # the verdicts, cut after the example count
        assert line.rsplit(" ", 3)[0] in run.stdout, line
    message = next(line for line in report if line.startswith("kvpool.oracle:"))
    assert message.split(":", 2)[1] + ":" in run.stdout, message
    for line in report:
        if line.startswith(("trace:", "reproduce with pytest:", "def test_kvpool_repro")):
            assert line in run.stdout.splitlines(), line
    call = re.compile(r"^ +\d+ \w+\(")
    shown = [line for line in report if call.match(line)]
    printed = [line for line in run.stdout.splitlines() if call.match(line)]
    assert [line.split("(")[0] for line in (shown[0], shown[-1])] == \
        [line.split("(")[0] for line in (printed[0], printed[-1])]
    assert printed[-1].endswith("<-- diverges") and shown[-1].endswith("<-- diverges")


@pytest.mark.parametrize("page", [README, *sorted((ROOT / "docs").glob("*.md"))],
                         ids=lambda p: p.name)
def test_relative_links_name_files_in_the_repository(page: Path) -> None:
    """A relative link resolves to a file or folder in the repository (site pages generated
    under ``docs/spec``, ``docs/reference``, ``docs/benchmarks`` count when the site makes them)."""
    generated = ("spec/", "reference/divergences.md", "reference/oracle.md", "benchmarks/")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        if page.parent.name == "docs" and target.startswith(generated):
            continue
        assert (page.parent / target).exists(), f"{page.name}: {target}"
