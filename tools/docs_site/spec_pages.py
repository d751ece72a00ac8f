"""SPEC.md rendered as the site's specification: one page per section, one anchor per clause.

Every clause becomes a heading whose anchor is its ID (``spec/segments/#SEG-5``), followed by
its prose, the source of the ``kvpool.spec`` function that is the rule (read with ``inspect``
at build time), its worked example (its own from ``docs/clause_examples/``, then the lines of
its section's example that call its function) and the tests that name it. Clause IDs in prose
link to their clause; SPEC.md's own ``#section`` links point at the section pages.
"""

from __future__ import annotations

import doctest
import re

from tools.docs_site import clause_examples
from tools.docs_site.clause_examples import ClauseExample, ExampleFile
from tools.docs_site.clause_tests import TestFile
from tools.docs_site.clause_tests import index as test_index
from tools.docs_site.spec_md import CLAUSE, Clause, Section, Spec, rule_source

SPEC_DIR = "spec"
SOURCE_DIR = "source"
# Sources longer than this many lines are shown folded.
FOLD_LINES = 30


def page_path(section: Section) -> str:
    """The page's file in the site's docs (``spec/segments.md``)."""
    return f"{SPEC_DIR}/{section.page_name}.md"


def source_page(path: str) -> str:
    """The generated page that shows a repository file (``source/tests/x/test_y.py.md``)."""
    return f"{SOURCE_DIR}/{path}.md"


Examples = dict[str, tuple[ExampleFile, ClauseExample]]


def render_all(spec: Spec, examples: Examples | None = None) -> dict[str, str]:
    """Every specification page, by its path in the docs: the index, then one per section.

    ``examples`` are the clauses' own worked examples (default: ``docs/clause_examples/``).
    Raises LookupError when a clause names a function that does not exist.
    """
    tests = test_index({c.id for c in spec.clauses()})
    if examples is None:
        examples = clause_examples.by_clause(clause_examples.load())
    pages = {f"{SPEC_DIR}/index.md": render_index(spec)}
    for section in spec.sections:
        pages[page_path(section)] = render_section(spec, section, tests, examples)
    return pages


def render_index(spec: Spec) -> str:
    """The preamble of SPEC.md with its contents list pointing at the section pages."""
    text = _links(spec, spec.preamble, here=None)
    rows = ["| section | clauses |", "|---|---|"]
    for section in spec.sections:
        ids = ", ".join(f"[{c.id}]({section.page_name}.md#{c.id}){{ .nowrap }}"
                        for c in section.clauses)
        rows.append(f"| [{section.title}]({section.page_name}.md) | {ids or '—'} |")
    return text + "\n\n## Sections\n\n" + "\n".join(rows) + "\n"


def render_section(spec: Spec, section: Section, tests: dict[str, list[TestFile]],
                   examples: Examples) -> str:
    """One section's page: its text in SPEC.md's order, each clause as an anchored block."""
    out = [f"# {section.title}", ""]
    lines = section.body.splitlines()
    example = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        match = CLAUSE.match(line)
        if match:
            clause = next(c for c in section.clauses if c.id == match.group(1))
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and lines[i].strip():
                i += 1
            out.append(render_clause(spec, section, clause, tests.get(clause.id, []),
                                     examples.get(clause.id)))
            continue
        if line.startswith("```python") and _is_example(lines, i):
            example += 1
            out.append(f'<a id="example-{example}"></a>')
            out.append("")
        out.append(line if line.startswith(("```", ">>>", "...")) else
                   _links(spec, line, here=section))
        i += 1
    return "\n".join(out).rstrip() + "\n"


def render_clause(spec: Spec, section: Section, clause: Clause, files: list[TestFile],
                  own: tuple[ExampleFile, ClauseExample] | None = None) -> str:
    """A clause's block: heading with the ID as anchor, prose, rule source, worked example
    (``own``, then the section example's lines that call the function), tests."""
    code, where, first = rule_source(clause.function)
    count = code.count("\n")
    title = f"kvpool.spec.{clause.function} ({where}, line {first})"
    fence = code_fence(code)
    block = [f"### {clause.id} {{ #{clause.id} }}", "", _links(spec, clause.prose, here=section),
             "", f"**The rule in code:** [`{clause.function}`]"
             f"({_rel(source_page(where))})", ""]
    if count > FOLD_LINES:
        block += [f'??? note "{title}: {count} lines"', ""]
        block += ["    " + ln if ln else "" for ln in
                  [f'{fence}python linenums="{first}"', *code.splitlines(), fence]]
    else:
        block += [f'{fence}python linenums="{first}" title="{title}"', code.rstrip(), fence]
    block.append("")
    block += _worked_example(spec, section, clause, own)
    block += ["**Tests that name it:**", ""]
    for test_file in files:
        names = test_file.functions.get(clause.id, [])
        named = ", ".join(f"`{n}`" for n in names[:6]) + (" ..." if len(names) > 6 else "")
        path = f"[`{test_file.path}`]({_rel(source_page(test_file.path))})"
        block.append(f"- {path}" + (f": {named}" if named else ""))
    if not files:
        block.append("- none")
    return "\n".join(block) + "\n"


def _worked_example(spec: Spec, section: Section, clause: Clause,
                    own: tuple[ExampleFile, ClauseExample] | None) -> list[str]:
    """The clause's own example (prose, then its file's setup and its doctest lines), then the
    lines of the section's example that call its function, or a link to that example."""
    block: list[str] = []
    if own is not None:
        example_file, example = own
        prose = _links(spec, example.prose, here=section)
        block += [f"**Worked example:** {prose} (`{example_file.path}`, run as a "
                  "doctest by the tests and when the site is built)", "",
                  "```python", *clause_examples.shown(example_file, example), "```", ""]
    if not section.examples():
        return block
    link = "[this section's example](#example-1), run as a doctest when the site is built"
    calls = example_lines(section, clause)
    lead = "Also the lines of" if own is not None else "**Worked example:** the lines of"
    if calls:
        block += [f"{lead} {link}, that call it:", "", "```python", *calls, "```", ""]
    elif own is not None:
        block += [f"See also {link}.", ""]
    else:
        block += [f"**Worked example:** {link}.", ""]
    return block


def example_lines(section: Section, clause: Clause) -> list[str]:
    """The ``>>>`` lines (with their results) of the section's examples that call the clause's
    function: ``name(`` for a function or method, ``Class(`` for a class or its ``__init__``."""
    parts = clause.function.split(".")
    name = parts[-2] if parts[-1] == "__init__" and len(parts) > 2 else parts[-1]
    call = re.compile(rf"(?<![\w]){re.escape(name)}\(")
    shown = []
    for block in section.examples():
        for example in doctest.DocTestParser().get_examples(block):
            if call.search(example.source):
                source = example.source.rstrip("\n").split("\n")
                shown += [">>> " + source[0], *("... " + more for more in source[1:])]
                shown += example.want.rstrip("\n").split("\n") if example.want else []
    return shown


def _is_example(lines: list[str], i: int) -> bool:
    return i + 1 < len(lines) and lines[i + 1].lstrip().startswith(">>>")


def code_fence(code: str) -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", code)), default=2)
    return "`" * max(3, longest + 1)


def _rel(target: str) -> str:
    """A link from a page under ``spec/`` to ``target`` (a path in the docs)."""
    return "../" + target


_CODE_SPAN = re.compile(r"(`[^`]*`)")
_LINK = re.compile(r"\]\(#([^)]+)\)")
_ID = re.compile(r"(?<![\w\[#/-])([A-Z]+-\d+)(?![\w])")


def _links(spec: Spec, text: str, here: Section | None) -> str:
    """SPEC.md's ``(#section)`` links and bare clause IDs outside code spans, as site links."""
    pages = {s.anchor: s for s in spec.sections}
    owner = spec.section_of()

    def page_link(match: re.Match[str]) -> str:
        target = pages.get(match.group(1))
        if target is None:
            return match.group(0)
        return f"]({target.page_name}.md)"

    def clause_link(match: re.Match[str]) -> str:
        clause = match.group(1)
        target = owner.get(clause)
        if target is None:
            return clause
        page = "" if target is here else f"{target.page_name}.md"
        return f"[{clause}]({page}#{clause})"

    parts = _CODE_SPAN.split(_LINK.sub(page_link, text))
    return "".join(p if p.startswith("`") else _ID.sub(clause_link, p) for p in parts)
