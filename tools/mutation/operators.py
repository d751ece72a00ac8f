"""Mutants of one Python source file: one small AST change at a time, applied as a text edit.

Each :class:`Mutant` replaces one node's source span (byte offsets of the UTF-8 text) by the
unparsed mutated node, so comments, docstrings and layout elsewhere stay as they were. The
operators:

- ``binop``: ``+``/``-`` swapped, ``*`` -> ``//``, ``//`` -> ``*``, ``%`` -> ``//``, ``&``/``|``
  swapped, ``<<``/``>>`` swapped (also in augmented assignments);
- ``compare``: ``<``/``<=``, ``>``/``>=``, ``==``/``!=``, ``in``/``not in``, ``is``/``is not``
  (one operator of a chain at a time);
- ``boolop``: ``and``/``or`` swapped; ``not``: ``not x`` -> ``x``;
- ``const``: an int ``n`` -> ``n + 1``, ``True``/``False`` swapped;
- ``minmax``: ``min``/``max`` and ``np.minimum``/``np.maximum`` swapped;
- ``stmt``: a call statement, an augmented assignment, an attribute assignment or a ``raise``
  replaced by ``pass``; ``continue``/``break`` swapped.

Not mutated: docstrings, f-strings and other string constants, annotations, and any line that
carries ``# pragma: no mutate``.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from dataclasses import dataclass

BINOP_SWAP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd,
    ast.LShift: ast.RShift, ast.RShift: ast.LShift,
}
CMP_SWAP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
MINMAX = {"min": "max", "max": "min", "minimum": "maximum", "maximum": "minimum"}
SYMBOL = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%", ast.BitAnd: "&",
    ast.BitOr: "|", ast.LShift: "<<", ast.RShift: ">>", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
    ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in",
    ast.Is: "is", ast.IsNot: "is not", ast.And: "and", ast.Or: "or",
}
NO_MUTATE = "pragma: no mutate"


@dataclass(frozen=True)
class Mutant:
    """One change to one file.

    ``key`` names the mutant independently of line numbers (file, enclosing function, what
    changed, the stripped source line, and an occurrence count when that repeats), so the
    equivalents file survives edits elsewhere in the file.
    """

    path: str
    line: int
    end_line: int
    qualname: str
    description: str
    source_line: str
    start: int  # byte offsets into the UTF-8 source
    end: int
    replacement: str
    key: str

    def apply(self, source: bytes) -> bytes:
        """The mutated file's bytes."""
        return source[: self.start] + self.replacement.encode() + source[self.end :]


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant):
            ids.add(id(body[0]))
    return ids


def _annotation_nodes(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        anns: list[ast.AST | None] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            anns.append(node.returns)
            args = node.args
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if a is not None:
                    anns.append(a.annotation)
        elif isinstance(node, ast.AnnAssign):
            anns.append(node.annotation)
        for ann in anns:
            if ann is not None:
                ids.update(id(n) for n in ast.walk(ann))
    return ids


class _Collector(ast.NodeVisitor):
    """Walks the tree in source order and yields (node, description, replacement node/text)."""

    def __init__(self, skip: set[int]) -> None:
        self.skip = skip
        self.stack: list[str] = []
        # node, qualname, description, replacement text
        self.found: list[tuple[ast.expr | ast.stmt, str, str, str]] = []

    def _add(self, node: ast.expr | ast.stmt, desc: str, new: ast.AST | str) -> None:
        text = new if isinstance(new, str) else ast.unparse(new)
        if isinstance(node, ast.expr):
            text = f"({text})"
        self.found.append((node, ".".join(self.stack) or "<module>", desc, text))

    def visit(self, node: ast.AST) -> None:
        if id(node) in self.skip or isinstance(node, ast.JoinedStr):
            return
        super().visit(node)

    def _scope(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _scope

    def visit_BinOp(self, node: ast.BinOp) -> None:
        new_op = BINOP_SWAP.get(type(node.op))
        if new_op is not None:
            new = copy.copy(node)
            new.op = new_op()
            self._add(node, f"binop {SYMBOL[type(node.op)]} -> {SYMBOL[new_op]}", new)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        new_op = BINOP_SWAP.get(type(node.op))
        if new_op is not None:
            new = copy.copy(node)
            new.op = new_op()
            self._add(node, f"binop {SYMBOL[type(node.op)]}= -> {SYMBOL[new_op]}=", new)
        self._add(node, "stmt removed", "pass")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        for i, op in enumerate(node.ops):
            new_op = CMP_SWAP.get(type(op))
            if new_op is None:
                continue
            new = copy.copy(node)
            new.ops = [*node.ops[:i], new_op(), *node.ops[i + 1 :]]
            self._add(node, f"compare {SYMBOL[type(op)]} -> {SYMBOL[new_op]} (#{i})", new)
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        new = copy.copy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        self._add(node, f"boolop {SYMBOL[type(node.op)]} -> {SYMBOL[type(new.op)]}", new)
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            self._add(node, "not removed", node.operand)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, bool):
            self._add(node, f"const {node.value} -> {not node.value}", ast.Constant(not node.value))
        elif isinstance(node.value, int):
            self._add(node, f"const {node.value} -> {node.value + 1}", ast.Constant(node.value + 1))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else (
            func.attr if isinstance(func, ast.Attribute) else None)
        if name in MINMAX:
            new = copy.copy(node)
            if isinstance(func, ast.Name):
                new.func = ast.Name(MINMAX[name], ast.Load())
            else:
                assert isinstance(func, ast.Attribute)
                new.func = ast.Attribute(func.value, MINMAX[name], ast.Load())
            self._add(node, f"minmax {name} -> {MINMAX[name]}", new)
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Call):
            self._add(node, "stmt removed", "pass")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(isinstance(t, ast.Attribute) for t in node.targets):
            self._add(node, "stmt removed", "pass")
        self.generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> None:
        self._add(node, "raise removed", "pass")
        self.generic_visit(node)

    def visit_Continue(self, node: ast.Continue) -> None:
        self._add(node, "continue -> break", "break")

    def visit_Break(self, node: ast.Break) -> None:
        self._add(node, "break -> continue", "continue")


def mutants_of(path: str, source: bytes) -> Iterator[Mutant]:
    """Every mutant of ``source`` (the bytes of the file at repository path ``path``)."""
    text = source.decode()
    lines = text.splitlines(keepends=True)
    line_starts = [0]
    for line in lines:
        line_starts.append(line_starts[-1] + len(line.encode()))
    tree = ast.parse(text)
    skip = _docstring_nodes(tree) | _annotation_nodes(tree)
    collector = _Collector(skip)
    collector.visit(tree)
    seen: dict[str, int] = {}
    for node, qualname, desc, replacement in collector.found:
        lineno, end_lineno = node.lineno, node.end_lineno
        assert end_lineno is not None and node.end_col_offset is not None
        if any(NO_MUTATE in lines[i - 1] for i in range(lineno, end_lineno + 1)):
            continue
        source_line = lines[lineno - 1].strip()
        base = f"{path} | {qualname} | {desc} | {source_line}"
        seen[base] = seen.get(base, 0) + 1
        key = base if seen[base] == 1 else f"{base} | #{seen[base]}"
        start = line_starts[lineno - 1] + node.col_offset
        end = line_starts[end_lineno - 1] + node.end_col_offset
        yield Mutant(path, lineno, end_lineno, qualname, desc, source_line, start, end,
                     replacement, key)
