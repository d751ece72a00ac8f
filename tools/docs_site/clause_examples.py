"""Each clause's own worked example: ``docs/clause_examples/<page>.md``, run as doctests.

One Markdown file per SPEC.md section, named like the section's page (``free.md`` for the
``FREE-*`` clauses). Before the first ``## `` heading the file may hold a ``python`` setup block
(imports) that runs before every example of the file and is shown with each. Then one
``## <clause ID>`` heading per clause: a line of prose saying what the example shows, then one
``python`` block of ``>>>`` lines with their outputs. Every example runs on a fresh namespace
(the setup's), so each stands alone, as a reader copies it.
"""

from __future__ import annotations

import doctest
import re
from dataclasses import dataclass, field
from pathlib import Path

from tools.docs_site.spec_md import ROOT

EXAMPLES_DIR = ROOT / "docs" / "clause_examples"
HEADING = re.compile(r"^## (\S+)\s*$", re.M)
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
# ELLIPSIS: an error's message may end in ``...`` after the clause it names.
FLAGS = doctest.ELLIPSIS


@dataclass
class ClauseExample:
    """One clause's example: its prose, its doctest text and where the text starts."""

    clause: str
    prose: str
    code: str
    path: str  # relative to the repository root
    line: int  # 0-based line of the first ``>>>`` line in the file


@dataclass
class ExampleFile:
    """One section's file: its setup block and its examples by clause ID, in file order."""

    path: str
    setup: str = ""
    examples: dict[str, ClauseExample] = field(default_factory=dict)


def parse(text: str, path: str) -> ExampleFile:
    """Read one example file. Raises ValueError naming the file and heading when a heading is
    not a clause ID, is repeated, lacks its prose line or does not hold exactly one
    ``python`` block of ``>>>`` lines."""
    parts = HEADING.split(text)
    head, found = parts[0], ExampleFile(path)
    setup = BLOCK.findall(head)
    found.setup = setup[0] if setup else ""
    offset = head.count("\n")
    for clause, body in zip(parts[1::2], parts[2::2]):
        offset += 1
        where = f"{path}: ## {clause}"
        if not re.fullmatch(r"[A-Z]+-\d+", clause) or clause in found.examples:
            raise ValueError(f"{where}: not a clause ID, or a second example for it")
        blocks = list(BLOCK.finditer(body))
        prose = " ".join(body[: blocks[0].start()].split()) if blocks else ""
        if len(blocks) != 1 or not prose or not blocks[0].group(1).lstrip().startswith(">>>"):
            raise ValueError(f"{where}: needs a prose line and one ```python block of >>> lines")
        line = offset + body[: blocks[0].start(1)].count("\n")
        found.examples[clause] = ClauseExample(clause, prose, blocks[0].group(1), path, line)
        offset += body.count("\n")
    return found


def load(directory: Path = EXAMPLES_DIR) -> dict[str, ExampleFile]:
    """Every example file, keyed by its name without ``.md`` (the section's page name)."""
    return {p.stem: parse(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))
            for p in sorted(directory.glob("*.md"))}


def by_clause(files: dict[str, ExampleFile]) -> dict[str, tuple[ExampleFile, ClauseExample]]:
    """Clause ID -> its file and example. Raises ValueError when two files hold one clause."""
    found: dict[str, tuple[ExampleFile, ClauseExample]] = {}
    for example_file in files.values():
        for clause, example in example_file.examples.items():
            if clause in found:
                raise ValueError(f"{clause} has examples in {found[clause][0].path} and "
                                 f"{example_file.path}")
            found[clause] = (example_file, example)
    return found


def run(example_file: ExampleFile, example: ClauseExample) -> str:
    """Run the file's setup, then the example, on a fresh namespace; the doctest report of
    what failed, empty when every line gives its output."""
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(verbose=False, optionflags=FLAGS)
    report: list[str] = []
    globs: dict[str, object] = {"__name__": "__clause_example__"}
    for name, text, line in ((f"{example_file.path} setup", example_file.setup, 0),
                             (f"{example_file.path} {example.clause}", example.code,
                              example.line)):
        test = parser.get_doctest(text, globs, name, example_file.path, line)
        runner.run(test, out=report.append, clear_globs=False)
        globs = test.globs
    return "".join(report)


def shown(example_file: ExampleFile, example: ClauseExample) -> list[str]:
    """The lines a clause page shows: the file's setup, then the example."""
    return (example_file.setup + example.code).rstrip("\n").split("\n")
