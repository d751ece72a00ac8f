"""The oracle's layout: no module over 400 lines, and no import cycle between its modules.

Every import counts, wherever it stands (module level, inside a function, under
``TYPE_CHECKING``): a cycle hidden behind a lazy import is still a cycle. Importing a package
runs its ``__init__``, so ``from .pkg import name`` is an edge to ``pkg`` (and to ``pkg.name``
when that is a module); the implicit import of a module's own parent packages is not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

ORACLE = Path(__file__).resolve().parents[2] / "oracle"
PACKAGE = "kvpool.oracle"
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    out = {}
    for path in ORACLE.rglob("*.py"):
        parts = list(path.relative_to(ORACLE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([PACKAGE, *parts])] = path
    return out


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _edges(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if _is_package(path) else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            bases = [alias.name for alias in node.names]
            found.update(b for b in bases if b in modules)
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            anchor = package.split(".")
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, *([node.module] if node.module else [])])
        else:
            base = node.module or ""
        if base in modules:
            found.add(base)
        for alias in node.names:
            if f"{base}.{alias.name}" in modules:
                found.add(f"{base}.{alias.name}")
    ancestors = {name.rsplit(".", n)[0] for n in range(1, name.count(".") + 1)}
    return found - ancestors - {name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_between_oracle_modules() -> None:
    modules = _modules()
    graph = {name: _edges(name, path, modules) for name, path in modules.items()}
    assert not _cycles(graph), _cycles(graph)


def test_the_cycle_check_sees_a_lazy_cycle() -> None:
    """The checker itself: a function-level import that closes a loop is reported."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_oracle_module_over_400_lines() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not over, over


def test_module_paths_from_before_the_subpackages_still_import() -> None:
    """``kvpool.oracle.<old>`` is the module that now holds it (the same object), so code
    outside the oracle and recorded traces' target paths keep working."""
    import importlib

    from kvpool.oracle.moved import MOVED

    for old, new in MOVED.items():
        assert importlib.import_module(f"{PACKAGE}.{old}") is importlib.import_module(
            f"{PACKAGE}.{new}"
        ), old
    from kvpool.oracle.families.single.targets import kvpool_paged
    from kvpool.oracle.targets import kvpool_paged as old_path

    assert old_path is kvpool_paged
