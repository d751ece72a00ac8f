"""The oracle's flat module paths from before its subpackages are gone.

``kvpool.oracle.<flat>`` (the keys of ``kvpool.oracle.engine.trace_paths.FLAT_PATHS``) does not
import, and no tracked text file of the repository names one: not as a dotted path
(``kvpool.oracle.<flat>``, also in a ``module:factory`` string), not imported from the package
(``from kvpool.oracle import <flat>``, or a relative import inside ``oracle/`` that resolves to
it), not as a file (``oracle/<flat>.py``) and not as ``oracle.<flat>`` in prose. Only the trace
reader's table and the recorded traces it is tested on (``tests/oracle/data/``) name them.

The oracle's size and import rules (no module over 400 lines, no import cycle, no private name
imported across modules) are the whole package's: ``tests/test_layout.py``.
"""

from __future__ import annotations

import ast
import importlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from kvpool.oracle.engine.trace_paths import FLAT_PATHS, PACKAGE

ROOT = Path(__file__).resolve().parents[2]
# the files allowed to name a flat path: the trace reader's table and the traces recorded with them
ALLOWED = ("oracle/engine/trace_paths.py", "tests/oracle/data/")

_NAMES = "|".join(sorted(map(re.escape, FLAT_PATHS), key=len, reverse=True))
PATTERNS = (
    re.compile(rf"{re.escape(PACKAGE)}\.({_NAMES})(?!\w)"),  # kvpool.oracle.<flat>
    re.compile(rf"(?<![\w./])oracle/({_NAMES})\.py"),  # oracle/<flat>.py
    re.compile(rf"(?<![\w.])oracle\.({_NAMES})(?!\w)"),  # oracle.<flat> (docs, prose)
)


def _tracked_files() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode()
    return [name for name in listed.split("\0") if name and not name.startswith(ALLOWED)]


def _package_of(name: str) -> list[str] | None:
    """The package a module file under ``oracle/`` is in, as dotted parts (None elsewhere)."""
    parts = Path(name).with_suffix("").parts
    if parts[0] != "oracle":
        return None
    return [*PACKAGE.split("."), *parts[1:-1]]  # a package's __init__ is in the package itself


def _imported_flat(name: str, text: str) -> list[str]:
    """The flat paths that ``from X import Y`` statements of a Python file import: ``Y`` of
    ``from kvpool.oracle import Y``, or a relative import in ``oracle/`` resolving to it."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    package = _package_of(name)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 0:
            module = node.module or ""
        elif package is not None and node.level <= len(package):
            base = package[: len(package) - node.level + 1]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            continue
        names = [f"{module}.{alias.name}" for alias in node.names]
        for path in (module, *names):
            head = path.removeprefix(PACKAGE + ".").split(".")[0]
            if path.startswith(PACKAGE + ".") and head in FLAT_PATHS:
                found.append(f"line {node.lineno}: {path}")
    return found


def test_no_tracked_file_names_a_flat_module_path() -> None:
    """Every tracked text file (code, tests, docs, tools, CI) uses the current module paths."""
    offenders = []
    for name in _tracked_files():
        path = ROOT / name
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):  # deleted in the work tree, or not text
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if any(p.search(line) for p in PATTERNS):
                offenders.append(f"{name}:{number}: {line.strip()}")
        if name.endswith(".py"):
            offenders += [f"{name}: {found}" for found in _imported_flat(name, text)]
    assert not offenders, "flat module paths of the oracle (use the current ones):\n" + "\n".join(
        offenders
    )


def test_the_check_finds_each_form_of_a_flat_path() -> None:
    """The patterns and the import check see each form (so the test above can fail)."""
    flat, new = "targets", FLAT_PATHS["targets"]
    for line in (f'"{PACKAGE}.{flat}:kvpool_paged"', f"see `oracle/{flat}.py`",
                 f"(``oracle.{flat}``)"):
        assert any(p.search(line) for p in PATTERNS), line
    for line in (f'"{PACKAGE}.{new}:kvpool_paged"', f"see `oracle/{new.replace('.', '/')}.py`",
                 f"{PACKAGE}.{flat}_more", "self.oracle.targets"):
        assert not any(p.search(line) for p in PATTERNS), line
    assert _imported_flat("tests/x.py", f"from {PACKAGE} import engine, {flat}\n")
    assert _imported_flat("oracle/engine/x.py", f"from .. import {flat}\n")
    assert _imported_flat("oracle/engine/x.py", f"from ..{flat} import load_target\n")
    assert not _imported_flat("oracle/families/single/x.py", f"from . import {flat}\n")
    assert not _imported_flat("tests/x.py", f"from {PACKAGE}.{new} import load_target\n")


def test_flat_module_paths_no_longer_import() -> None:
    """Nothing maps ``kvpool.oracle.<flat>`` to its module any more; the module it names in the
    trace reader's table imports."""
    for flat, new in FLAT_PATHS.items():
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"{PACKAGE}.{flat}")
        importlib.import_module(f"{PACKAGE}.{new}")
