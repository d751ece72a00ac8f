"""SPEC.md read as data: its sections, their clauses and worked examples.

SPEC.md is the one source of the clauses. A clause is a list item that opens with
``<a id="X-n"></a>**X-n** (`module.function`)``; a section is a ``## `` heading; a worked
example is a fenced ``python`` block of ``>>>`` lines. New sections and clause prefixes need no
change here: prefixes are read from the anchors.
"""

from __future__ import annotations

import importlib
import inspect
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvpool.spec.clause_index import clause_prefixes

ROOT = Path(__file__).resolve().parents[2]
SPEC_MD = ROOT / "SPEC.md"

CLAUSE = re.compile(r'^- <a id="([A-Z]+-\d+)"></a>\*\*\1\*\* \(`([A-Za-z_][\w.]*)`\)\s*(.*)$')
SECTION = re.compile(r"^## (.+)$")
ID_TOKEN = re.compile(r"(?<![A-Za-z0-9])([A-Z]+)[-_](\d+)(?:\.\.(\d+))?(?!\d)")
# Readable page names (the site's URLs) for the sections whose clauses carry these prefixes;
# any other prefix (a new section) gets its own name in lower case, so a new section needs no
# edit here. The prefixes themselves are SPEC.md's clause index
# (:func:`kvpool.spec.clause_index.clause_prefixes`): :func:`load` refuses a name for a prefix
# the index does not list.
PAGE_NAMES = {
    "MODEL": "model", "INV": "invariants", "ERR": "caller-errors", "ALLOC": "alloc",
    "EXTEND": "alloc-extend", "DECODE": "alloc-decode", "FREE": "free", "SEG": "segments",
    "GROUP": "free-groups", "SORT": "need-sort", "CAP": "capacity-hooks", "LIFE": "lifecycle",
    "ALIAS": "aliasing", "SWA": "hybrid-swa", "UNI": "unified", "MSLOT": "mamba-slots",
    "PINTER": "page-interleave",
    "HSP": "hisparse",
    "UMB": "unified-mamba",
}


@dataclass
class Clause:
    """One clause: its stable ID, the ``kvpool.spec`` function that is the rule, its prose."""

    id: str
    function: str
    prose: str

    @property
    def prefix(self) -> str:
        return self.id.rsplit("-", 1)[0]


@dataclass
class Section:
    """One ``## `` section of SPEC.md: its title, Markdown body and the clauses defined in it."""

    title: str
    body: str
    clauses: list[Clause] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        """The GitHub-style anchor SPEC.md's own contents links use (``#8-free_segment-...``)."""
        slug = re.sub(r"[^\w\- ]", "", self.title.lower()).strip()
        return slug.replace(" ", "-")

    @property
    def page_name(self) -> str:
        """The page's name in the site: from its first clause prefix, else from its title."""
        if self.clauses:
            prefix = self.clauses[0].prefix
            return PAGE_NAMES.get(prefix, prefix.lower())
        words = re.sub(r"^(\d+\.|appendix [a-z]:)\s*", "", self.title.lower())
        return re.sub(r"[^a-z0-9]+", "-", words).strip("-")

    def examples(self) -> list[str]:
        """The section's worked examples: the bodies of its ``python`` blocks with ``>>>``."""
        blocks = re.findall(r"^```python\n(.*?)^```", self.body, re.M | re.S)
        return [b for b in blocks if b.lstrip().startswith(">>>")]


@dataclass
class Spec:
    """SPEC.md split up: the text before the first section, then the sections in order."""

    preamble: str
    sections: list[Section]

    def clauses(self) -> list[Clause]:
        return [c for s in self.sections for c in s.clauses]

    def section_of(self) -> dict[str, Section]:
        """Clause ID -> the section that defines it."""
        return {c.id: s for s in self.sections for c in s.clauses}


def parse(text: str) -> Spec:
    """Split SPEC.md's text into its preamble and sections, collecting each section's clauses.

    A clause's prose is its first line after the function plus the indented lines that follow
    it, joined as Markdown. Raises ValueError if a clause ID is defined twice.
    """
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if SECTION.match(line)]
    preamble = "\n".join(lines[: starts[0]] if starts else lines)
    sections = []
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        body_lines = lines[start + 1 : end]
        section = Section(SECTION.match(lines[start]).group(1).strip(),  # type: ignore[union-attr]
                          "\n".join(body_lines))
        section.clauses = _clauses(body_lines)
        sections.append(section)
    spec = Spec(preamble, sections)
    ids = [c.id for c in spec.clauses()]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"SPEC.md defines these clauses twice: {twice}")
    return spec


def _clauses(lines: list[str]) -> list[Clause]:
    found = []
    for i, line in enumerate(lines):
        match = CLAUSE.match(line)
        if not match:
            continue
        prose = [match.group(3)]
        for more in lines[i + 1 :]:
            if not more.startswith("  ") or not more.strip():
                break
            prose.append(more.strip())
        found.append(Clause(match.group(1), match.group(2), " ".join(prose)))
    return found


def load() -> Spec:
    """SPEC.md of this repository, parsed. Raises ValueError when :data:`PAGE_NAMES` names a
    prefix that SPEC.md's clause index does not list (a renamed or removed clause group)."""
    stale = sorted(set(PAGE_NAMES) - set(clause_prefixes()))
    if stale:
        raise ValueError(f"PAGE_NAMES names clause prefixes SPEC.md's clause index does not list: "
                         f"{stale}")
    return parse(SPEC_MD.read_text(encoding="utf-8"))


def spec_object(path: str) -> Any:
    """The object ``kvpool.spec.<module>.<attr...>`` a clause names; None if it is missing."""
    module_name, _, attr = path.partition(".")
    try:
        found: Any = importlib.import_module(f"kvpool.spec.{module_name}")
    except ImportError:
        return None
    for part in attr.split(".") if attr else ():
        found = getattr(found, part, None)
    return found


def rule_source(path: str) -> tuple[str, str, int]:
    """Source of the function a clause names: (code, file relative to the root, first line).

    A class is shown up to its first method (its header, docstring and fields). Raises
    LookupError naming the path when the object is missing or has no Python source.
    """
    obj = spec_object(path)
    if obj is None or not callable(obj):
        raise LookupError(f"kvpool.spec.{path} does not exist")
    try:
        lines, first = inspect.getsourcelines(obj)
    except (OSError, TypeError) as exc:
        raise LookupError(f"kvpool.spec.{path} has no Python source: {exc}") from exc
    if inspect.isclass(obj):
        lines = _class_head(lines)
    # kvpool.spec's modules are the files of spec/ (pyproject.toml's package-dir)
    where = f"spec/{obj.__module__.rsplit('.', 1)[-1]}.py"
    return textwrap.dedent("".join(lines)).rstrip() + "\n", where, first


def _class_head(lines: list[str]) -> list[str]:
    """The lines of a class's source before its first method or decorator."""
    indent = None
    for i, line in enumerate(lines[1:], start=1):
        stripped = line.lstrip()
        if indent is None and stripped:
            indent = len(line) - len(stripped)
        if indent is not None and len(line) - len(stripped) == indent and \
                stripped.startswith(("def ", "async def ", "@")):
            return lines[:i]
    return lines


def clause_ids_in(text: str) -> set[str]:
    """Clause IDs ``text`` names: ``SEG-5``, ``SEG_5`` in a test name, ranges ``INV-1..4``."""
    found: set[str] = set()
    for prefix, first, last in ID_TOKEN.findall(text):
        found.update(f"{prefix}-{n}" for n in range(int(first), int(last or first) + 1))
    return found
