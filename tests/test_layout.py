"""The package's layout: short modules, no import cycle, no private name imported across modules.

Across the four packages that ship (``kvpool.spec``, ``kvpool.impl``, ``kvpool.oracle``,
``kvpool.integrations``, from the folders ``spec/``, ``impl/``, ``oracle/``, ``integrations/``):

- no module is over :data:`MAX_LINES` lines;
- no import cycle between modules, inside a package or across two. Every import counts,
  wherever it stands (module level, inside a function, under ``TYPE_CHECKING``): a cycle hidden
  behind a lazy import is still a cycle. Importing a package runs its ``__init__``, so ``from
  .pkg import name`` is an edge to ``pkg`` (and to ``pkg.name`` when that is a module); the
  implicit import of a module's own parent packages is not counted;
- no module imports another module's private name (``from .x import _name``): what a module
  shares is public. A private module (the compiled ``kvpool.impl._native``) may be imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"kvpool.spec": "spec", "kvpool.impl": "impl", "kvpool.oracle": "oracle",
            "kvpool.integrations": "integrations"}
MAX_LINES = 400
# private modules that are not Python files here (compiled extensions)
EXTENSIONS = {"kvpool.impl._native"}


def modules() -> dict[str, Path]:
    """Every module of the four packages: dotted name -> file."""
    out = {}
    for package, folder in PACKAGES.items():
        base = ROOT / folder
        for path in base.rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def _imports(name: str, path: Path) -> list[tuple[str, list[str]]]:
    """Each import of the module ``name``: (the module imported from, the names it takes)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            found.append((base, [alias.name for alias in node.names]))
    return found


def edges(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that the module ``name`` imports (see the module docstring)."""
    found: set[str] = set()
    for base, names in _imports(name, path):
        if base in known:
            found.add(base)
        found.update(f"{base}.{n}" for n in names if f"{base}.{n}" in known)
    ancestors = {name.rsplit(".", n)[0] for n in range(1, name.count(".") + 1)}
    return found - ancestors - {name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
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
        for w in sorted(graph.get(v, ())):
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


def private_imports(name: str, path: Path, known: dict[str, Path]) -> list[str]:
    """``base._name`` for every private name the module takes from a module of ``known``
    (a private module, or a dunder, is not a private name)."""
    out = []
    for base, names in _imports(name, path):
        if base not in known:
            continue
        for n in names:
            target = f"{base}.{n}"
            dunder = n.startswith("__") and n.endswith("__")
            private = n.startswith("_") and not dunder
            if private and target not in known and target not in EXTENSIONS:
                out.append(target)
    return out


def test_no_module_over_400_lines() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules().items()}
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not over, over


def test_no_import_cycle() -> None:
    known = modules()
    graph = {name: edges(name, path, known) for name, path in known.items()}
    assert not cycles(graph), cycles(graph)


def test_no_private_name_imported_across_modules() -> None:
    known = modules()
    found = {name: private_imports(name, path, known) for name, path in known.items()}
    assert not {name: names for name, names in found.items() if names}


def test_the_checks_see_what_they_refuse(tmp_path: Path) -> None:
    """The checkers themselves: a function-level import that closes a loop is a cycle, and
    ``from .b import _hidden`` inside a function is a private import; a private module and an
    alias of a public name are not."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("def f():\n    from .b import _hidden, shown as _alias\n    from . import _ext\n")
    b.write_text("from .a import f\n_hidden = shown = 1\n")
    known = {"pkg.a": a, "pkg.b": b}
    graph = {name: edges(name, path, known) for name, path in known.items()}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]
    assert private_imports("pkg.a", a, {**known, "pkg._ext": a}) == ["pkg.b._hidden"]
    assert private_imports("pkg.b", b, known) == []
