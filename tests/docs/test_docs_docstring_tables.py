"""Tables in docstrings are Markdown tables, which the API pages render as tables.

mkdocstrings renders docstrings as Markdown: a reST simple table (its borders are runs of
``=`` side by side) or grid table (``+----+----+``) comes out as one paragraph of ``====``
text. Every docstring of the ``kvpool`` package (each folder ``pyproject.toml`` maps into it,
what the API pages are rendered from) is read here with ``ast``, without importing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
REST_TABLE = re.compile(r"^\s*(=+(\s+=+)+|\+(-+\+){2,}|\+(=+\+){2,})\s*$", re.M)


def package_folders() -> list[Path]:
    """The folders of the ``kvpool`` package by ``pyproject.toml``'s ``package-dir``."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    mapping = config["tool"]["setuptools"]["package-dir"]
    return sorted({ROOT / folder for folder in mapping.values()})


def docstrings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of the module's docstring and of every class's and function's."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in [tree, *ast.walk(tree)]:
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node, clean=False)
            if text:
                found.append((getattr(node, "lineno", 1), text))
    return found


def rest_tables(text: str) -> list[str]:
    """The lines of ``text`` that are borders of a reST simple or grid table."""
    return [m.group(0).strip() for m in REST_TABLE.finditer(text)]


def test_rest_table_borders_are_recognised() -> None:
    assert rest_tables("a\n    =====  ====\n    x      y\n")
    assert rest_tables("+----+----+\n| a  | b  |\n+====+====+\n")
    assert not rest_tables("| a | b |\n|---|---|\n| 1 | 2 |\n")
    assert not rest_tables("Title\n=====\n")  # one run: a heading's underline, not a table


def test_no_docstring_holds_a_rest_table() -> None:
    """Every table in the package's docstrings is a Markdown (pipe) table."""
    folders = package_folders()
    assert any(folder.name == "impl" for folder in folders)
    bad = [f"{path.relative_to(ROOT)}:{line}: {rest_tables(text)[0]}"
           for folder in folders for path in sorted(folder.rglob("*.py"))
           for line, text in docstrings(path) if rest_tables(text)]
    assert not bad, "reST tables in docstrings (write them as Markdown pipe tables):\n" + \
        "\n".join(bad)
