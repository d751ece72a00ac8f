"""Every clause of SPEC.md has a worked example, and every example runs.

A clause's example is its own (``docs/clause_examples/<section page>.md``, a ``## <ID>``
heading with a prose line and a doctest block) or the lines of its section's example in SPEC.md
that call its function. Each own example runs here as a doctest on a fresh namespace (after its
file's setup), so an example whose output no longer holds fails; a clause with no example at
all fails too, naming it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools.docs_site import clause_examples, spec_md, spec_pages  # noqa: E402

FILES = clause_examples.load()
EXAMPLES = clause_examples.by_clause(FILES)


@pytest.fixture(scope="module")
def spec() -> spec_md.Spec:
    return spec_md.load()


@pytest.mark.parametrize("clause", sorted(EXAMPLES))
def test_example_runs_as_a_doctest(clause: str) -> None:
    """The example's every ``>>>`` line gives the output written under it."""
    example_file, example = EXAMPLES[clause]
    report = clause_examples.run(example_file, example)
    assert not report, f"{example.path} ## {clause} fails:\n{report}"


def test_every_clause_has_a_worked_example(spec: spec_md.Spec) -> None:
    """No clause of SPEC.md is without its own example or section-example lines calling it."""
    missing = [c.id for s in spec.sections for c in s.clauses
               if c.id not in EXAMPLES and not spec_pages.example_lines(s, c)]
    assert not missing, (f"clauses with no worked example (add a '## <ID>' example to "
                         f"docs/clause_examples/<section page>.md): {missing}")


def test_examples_sit_in_their_sections_file(spec: spec_md.Spec) -> None:
    """Each example names a clause SPEC.md defines, in the file named after that clause's
    section page, and each file is a section's."""
    owner = spec.section_of()
    pages = {s.page_name for s in spec.sections}
    assert set(FILES) <= pages, f"files named after no section: {sorted(set(FILES) - pages)}"
    for name, example_file in FILES.items():
        for clause in example_file.examples:
            assert clause in owner, f"{example_file.path}: {clause} is not a clause of SPEC.md"
            home = owner[clause].page_name
            assert home == name, f"{example_file.path}: {clause} belongs in {home}.md"


def test_the_clause_page_shows_its_own_example(spec: spec_md.Spec) -> None:
    """Under each clause with an example, its page shows the prose (clause IDs in it linked),
    the file's setup and every line of the example, in the clause's own block."""
    pages = spec_pages.render_all(spec, EXAMPLES)
    owner = spec.section_of()
    for clause, (example_file, example) in EXAMPLES.items():
        page = pages[spec_pages.page_path(owner[clause])]
        block = page.split(f"{{ #{clause} }}", 1)[1].split("\n### ", 1)[0]
        unlinked = re.sub(r"\[([A-Z]+-\d+)\]\([^)]*\)", r"\1", block)  # IDs in prose link
        assert f"**Worked example:** {example.prose}" in unlinked, clause
        assert "\n".join(clause_examples.shown(example_file, example)) in block, clause


def test_a_wrong_output_is_reported() -> None:
    """An example whose written output is not what the spec returns yields a report naming
    the file and the clause; a right one yields none."""
    text = ("# t\n\n```python\n>>> from kvpool.spec import AllocatorModel\n```\n\n"
            "## NEWX-1\n\nFour pages.\n\n```python\n>>> AllocatorModel(16, 4).num_pages\n5\n```\n"
            "\n## NEWX-2\n\nThe same, right.\n\n```python\n>>> AllocatorModel(16, 4).num_pages\n"
            "4\n```\n")
    parsed = clause_examples.parse(text, "docs/clause_examples/newx.md")
    wrong = clause_examples.run(parsed, parsed.examples["NEWX-1"])
    assert "newx.md NEWX-1" in wrong and "Expected:\n    5\nGot:\n    4" in wrong
    assert parsed.examples["NEWX-1"].line == 11  # the >>> line (0-based), reported as line 12
    assert "line 12" in wrong
    assert clause_examples.run(parsed, parsed.examples["NEWX-2"]) == ""


def test_a_rejected_call_must_name_its_clause() -> None:
    """A written error is compared with the raised one, clause included: the same message
    under another clause ID fails."""
    text = ("## NEWX-1\n\nA rejection.\n\n```python\n"
            ">>> from kvpool.spec import ContractViolation\n"
            '>>> raise ContractViolation("NEWX-2", "double free: page 1")\n'
            "Traceback (most recent call last):\n    ...\n"
            "kvpool.spec.errors.ContractViolation: [NEWX-1] double free: ...\n```\n")
    parsed = clause_examples.parse(text, "x.md")
    report = clause_examples.run(parsed, parsed.examples["NEWX-1"])
    assert "ContractViolation: [NEWX-2] double free: page 1" in report
    right = clause_examples.parse(text.replace("[NEWX-1]", "[NEWX-2]"), "x.md")
    assert clause_examples.run(right, right.examples["NEWX-1"]) == ""


@pytest.mark.parametrize("text", [
    "## NEWX-1\n\n```python\n>>> 1\n1\n```\n",  # no prose line
    "## NEWX-1\n\nProse.\n",  # no block
    "## NEWX-1\n\nProse.\n\n```python\n>>> 1\n1\n```\n\n```python\n>>> 2\n2\n```\n",  # two
    "## new-1\n\nProse.\n\n```python\n>>> 1\n1\n```\n",  # not a clause ID
    "## NEWX-1\n\nA.\n\n```python\n>>> 1\n1\n```\n## NEWX-1\n\nB.\n\n```python\n>>> 1\n1\n```\n",
])
def test_a_malformed_file_is_an_error(text: str) -> None:
    with pytest.raises(ValueError, match=r"x\.md: ## "):
        clause_examples.parse(text, "x.md")


def test_one_clause_in_two_files_is_an_error() -> None:
    one = clause_examples.parse("## NEWX-1\n\nA.\n\n```python\n>>> 1\n1\n```\n", "a.md")
    two = clause_examples.parse("## NEWX-1\n\nB.\n\n```python\n>>> 1\n1\n```\n", "b.md")
    with pytest.raises(ValueError, match=r"NEWX-1 has examples in a\.md and b\.md"):
        clause_examples.by_clause({"a": one, "b": two})
