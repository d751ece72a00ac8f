"""The site's specification pages: every clause of SPEC.md is an anchor with its rule's source.

The pages are rendered in-process by ``tools.docs_site`` (what the MkDocs hook does at build
time), so these checks need no MkDocs: a clause without an anchor, a clause whose function is
missing, or a new section the generator cannot place fails here.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools.docs_site import spec_md, spec_pages  # noqa: E402
from tools.docs_site.clause_tests import index  # noqa: E402


@pytest.fixture(scope="module")
def spec() -> spec_md.Spec:
    return spec_md.load()


@pytest.fixture(scope="module")
def pages(spec: spec_md.Spec) -> dict[str, str]:
    return spec_pages.render_all(spec)


def test_every_clause_of_spec_md_is_parsed(spec: spec_md.Spec) -> None:
    """The parser finds exactly the clause anchors SPEC.md defines (``<a id="X-n">``)."""
    text = spec_md.SPEC_MD.read_text()
    anchors = re.findall(r'<a id="([A-Z]+-\d+)"></a>', text)
    assert [c.id for c in spec.clauses()] == anchors
    assert len(anchors) > 50


def test_every_clause_has_an_anchor_on_its_page(spec: spec_md.Spec,
                                                pages: dict[str, str]) -> None:
    """Each clause is a heading whose anchor is its ID, on its section's page, once."""
    for section in spec.sections:
        page = pages[spec_pages.page_path(section)]
        for clause in section.clauses:
            assert page.count(f"### {clause.id} {{ #{clause.id} }}") == 1, clause.id
    all_text = "".join(pages.values())
    for clause in spec.clauses():
        assert all_text.count(f"{{ #{clause.id} }}") == 1, f"{clause.id} anchored twice"


def test_every_clause_shows_its_function_source(spec: spec_md.Spec,
                                                pages: dict[str, str]) -> None:
    """The block under each clause holds the source of the function SPEC.md names."""
    for section in spec.sections:
        page = pages[spec_pages.page_path(section)]
        for clause in section.clauses:
            code, where, first = spec_md.rule_source(clause.function)
            name = clause.function.rsplit(".", 1)[-1]
            assert re.search(rf"^\s*(def|class) {re.escape(name)}\b", code, re.M), clause.id
            assert (ROOT / where).is_file()
            block = page.split(f"{{ #{clause.id} }}", 1)[1].split("\n### ", 1)[0]
            assert f"{where}, line {first}" in block, clause.id
            assert code.splitlines()[0] in block, clause.id


def test_every_clause_lists_tests_that_name_it(spec: spec_md.Spec,
                                               pages: dict[str, str]) -> None:
    """Each clause links every file under ``tests/`` that names its ID (that one exists at all
    is ``tests/formal/test_formal_spec_md.py``'s check)."""
    found = index({c.id for c in spec.clauses()})
    assert sum(map(bool, found.values())) > 50
    for section in spec.sections:
        page = pages[spec_pages.page_path(section)]
        for clause in section.clauses:
            block = page.split(f"{{ #{clause.id} }}", 1)[1].split("\n### ", 1)[0]
            for test_file in found[clause.id]:
                assert clause.id in spec_md.clause_ids_in((ROOT / test_file.path).read_text())
                assert f"(../source/{test_file.path}.md)" in block, clause.id
            if not found[clause.id]:
                assert "- none" in block


def test_sections_with_examples_link_them(spec: spec_md.Spec, pages: dict[str, str]) -> None:
    """A section's worked example keeps its ``>>>`` lines and an anchor its clauses link to."""
    with_examples = [s for s in spec.sections if s.examples()]
    assert len(with_examples) >= 5
    for section in with_examples:
        page = pages[spec_pages.page_path(section)]
        assert '<a id="example-1"></a>' in page
        assert section.examples()[0].splitlines()[0] in page
        assert page.count("(#example-1)") == len(section.clauses)


def test_a_clause_shows_the_example_lines_that_call_its_function(
        spec: spec_md.Spec, pages: dict[str, str]) -> None:
    """SEG-5's block shows the doctest line calling ``trim_boundary`` with its result; a clause
    whose function the example does not call shows none of its lines, only a link to it."""
    page = pages["spec/segments.md"]
    seg5 = page.split("{ #SEG-5 }", 1)[1].split("\n### ", 1)[0]
    assert ">>> segments.trim_boundary(6, 5, 6, 4)" in seg5
    assert seg5.split(">>> segments.trim_boundary(6, 5, 6, 4)", 1)[1].splitlines()[1] == "2"
    seg4 = page.split("{ #SEG-4 }", 1)[1].split("\n### ", 1)[0]
    assert "that call it" not in seg4 and "(#example-1)" in seg4
    assert ">>> segments.segments_pages" not in seg4


def test_a_missing_function_is_an_error_naming_it() -> None:
    """A clause that names a function kvpool.spec lacks stops the rendering (LookupError)."""
    text = ('# t\n\n## 1. Model\n\n- <a id="MODEL-1"></a>**MODEL-1** (`layout.no_such_rule`) '
            "Some rule.\n")
    with pytest.raises(LookupError, match=r"kvpool\.spec\.layout\.no_such_rule"):
        spec_pages.render_all(spec_md.parse(text))


def test_a_new_section_and_prefix_need_no_generator_change() -> None:
    """A section with a prefix the generator has never seen gets its own page and anchors."""
    text = (spec_md.SPEC_MD.read_text().split("## Clause index")[0]
            + "## 99. A new section\n\nIntro naming SEG-5.\n\n"
            + '- <a id="NEWX-1"></a>**NEWX-1** (`layout.page_slots`) A new rule (MODEL-2).\n'
            + "  Its second line.\n")
    spec = spec_md.parse(text)
    section = spec.sections[-1]
    assert section.page_name == "newx"
    page = spec_pages.render_all(spec)["spec/newx.md"]
    assert "### NEWX-1 { #NEWX-1 }" in page
    assert "A new rule ([MODEL-2](model.md#MODEL-2)). Its second line." in page
    assert "[SEG-5](segments.md#SEG-5)" in page
    assert "def page_slots" in page


def test_clause_ids_inside_code_are_not_linked(pages: dict[str, str]) -> None:
    """Prose links clause IDs; code spans (``[FREE-3] double free``) stay as written."""
    page = pages["spec/caller-errors.md"]
    assert "`[FREE-3] double free: ...`" in page
    assert "[ERR-1](#ERR-1)" not in page.split("{ #ERR-1 }", 1)[0]


def test_index_links_every_section_and_clause(spec: spec_md.Spec,
                                              pages: dict[str, str]) -> None:
    """The specification's index keeps SPEC.md's preamble and lists every section page."""
    page = pages["spec/index.md"]
    for section in spec.sections:
        assert f"]({section.page_name}.md)" in page
        for clause in section.clauses:
            assert f"[{clause.id}]({section.page_name}.md#{clause.id})" in page
    assert "(#1-model)" not in page
