"""Which tests name which clause: the "Tests" list under every clause of the site.

A test names a clause when the clause ID (``SEG-5``, ``SEG_5`` in a function name, or a range
``SEG-1..6``) appears in its function's name, docstring or body; a file that names it only at
module level (a case table, a broken allocator's registration) is listed without functions.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from tools.docs_site.spec_md import ROOT, clause_ids_in


@dataclass
class TestFile:
    """A file under ``tests/`` and, per clause it names, the test functions that name it."""

    path: str  # relative to the repository root
    functions: dict[str, list[str]] = field(default_factory=dict)
    clauses: set[str] = field(default_factory=set)


def index(known: set[str], root: Path = ROOT) -> dict[str, list[TestFile]]:
    """Clause ID -> the test files that name it (sorted by path); clauses outside ``known``
    are ignored. Files that do not parse are read as plain text (no functions listed)."""
    by_clause: dict[str, list[TestFile]] = {c: [] for c in known}
    for path in sorted((root / "tests").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        named = clause_ids_in(text) & known
        if not named:
            continue
        entry = TestFile(str(path.relative_to(root)), clauses=named)
        for name, source in _test_functions(text):
            for clause in clause_ids_in(source) & known:
                entry.functions.setdefault(clause, []).append(name)
        for clause in named:
            by_clause[clause].append(entry)
    return by_clause


def _test_functions(text: str) -> list[tuple[str, str]]:
    """(qualified name, source) of every ``test_*`` function, classes' methods included."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name.startswith("test"):
                    found.append((f"{node.name}.{item.name}", _source(text, item)))
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test") and \
                node.col_offset == 0:
            found.append((node.name, _source(text, node)))
    return found


def _source(text: str, node: ast.FunctionDef) -> str:
    return node.name + "\n" + (ast.get_source_segment(text, node) or "")
