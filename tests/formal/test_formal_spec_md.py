"""SPEC.md stays honest: its clause IDs, the spec code and the tests name the same rules.

- every clause defined in SPEC.md (an ``<a id="..."></a>`` anchor) is named in ``spec/`` code
  and in at least one test file under ``tests/``;
- every clause-ID-looking token in ``spec/`` or ``tests/`` is defined in SPEC.md;
- every clause names, right after its ID, the one ``kvpool.spec`` function that is the rule
  (``module.function`` or ``module.Class.method``); it exists and its source cites the clause;
- the clause index at the end of SPEC.md lists exactly the defined clauses;
- the Contents line links every numbered section and appendix, each to its heading's anchor;
- the ``>>>`` examples of SPEC.md run (doctest).

Test names may spell an ID with an underscore (``test_alloc_ALLOC_3``); ``INV-1..4`` names a
range.
"""

from __future__ import annotations

import doctest
import inspect
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from kvpool.spec.clause_index import clause_prefixes, spec_md_path

ROOT = Path(__file__).resolve().parents[2]
SPEC_MD = ROOT / "SPEC.md"
PREFIXES = "|".join(clause_prefixes())  # SPEC.md's clause index, as the package reads it
TOKEN = re.compile(rf"(?<![A-Za-z0-9])({PREFIXES})[-_](\d+)(?:\.\.(\d+))?(?![\d])")
ANCHOR = re.compile(r'<a id="([A-Z]+-\d+)"></a>\*\*\1\*\*')
RULE = re.compile(r'<a id="([A-Z]+-\d+)"></a>\*\*\1\*\* \(`([A-Za-z_][\w.]*)`\)')


def ids_in(text: str) -> set[str]:
    """Clause IDs named in ``text``, ranges expanded, underscores read as dashes."""
    found: set[str] = set()
    for prefix, first, last in TOKEN.findall(text):
        for number in range(int(first), int(last or first) + 1):
            found.add(f"{prefix}-{number}")
    return found


def defined() -> set[str]:
    return set(ANCHOR.findall(SPEC_MD.read_text()))


def files(folder: str, pattern: str = "*.py") -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob(pattern) if ".venv" not in p.parts)


def test_spec_md_defines_clauses() -> None:
    """SPEC.md defines clauses, each once, and its index lists exactly those."""
    text = SPEC_MD.read_text()
    anchors = ANCHOR.findall(text)
    assert len(anchors) > 50
    assert len(anchors) == len(set(anchors)), "a clause is defined twice"
    index = text.split("## Clause index", 1)[1]
    assert ids_in(index) == set(anchors)


def test_clause_prefixes_are_the_sections_in_order() -> None:
    """The package reads this SPEC.md; the clause groups its index lists (``clause_prefixes``)
    are the prefixes of the defined clauses, in the order of the sections that define them."""
    assert spec_md_path().read_text() == SPEC_MD.read_text()
    by_section = tuple(dict.fromkeys(clause.split("-")[0] for clause in ANCHOR.findall(
        SPEC_MD.read_text())))
    assert clause_prefixes() == by_section
    assert {"MODEL", "SWA", "UNI", "DATA"} <= set(by_section)


def test_clause_groups_of_the_reports_and_the_site_are_the_index(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run report orders clauses by the index's groups; the docs site's page names name only
    groups the index lists (its ``load`` refuses a stale one)."""
    from kvpool.oracle.reporting import clauses

    assert clause_prefixes() == clauses.CLAUSE_GROUPS
    ordered = sorted(["DATA-1", "UNI-2", "MODEL-3", "INV-1", "MODEL-1"], key=clauses.clause_key)
    assert ordered == ["MODEL-1", "MODEL-3", "INV-1", "UNI-2", "DATA-1"]
    sys.path.insert(0, str(ROOT))
    from tools.docs_site import spec_md

    assert set(spec_md.PAGE_NAMES) <= set(clause_prefixes())
    spec_md.load()
    monkeypatch.setattr(spec_md, "PAGE_NAMES", {**spec_md.PAGE_NAMES, "GONE": "gone"})
    with pytest.raises(ValueError, match="GONE"):
        spec_md.load()


def test_every_clause_is_named_in_spec_code() -> None:
    """Each clause of SPEC.md is named somewhere in ``spec/*.py``."""
    named = set().union(*(ids_in(p.read_text()) for p in files("spec")))
    missing = sorted(defined() - named)
    assert not missing, f"clauses of SPEC.md never named in spec/: {missing}"


def test_every_clause_has_a_test() -> None:
    """Each clause of SPEC.md is named by at least one test file under ``tests/``."""
    named = set().union(*(ids_in(p.read_text()) for p in files("tests", "test_*.py")))
    missing = sorted(defined() - named)
    assert not missing, f"clauses of SPEC.md that no test names: {missing}"


def test_no_undefined_clause_ids() -> None:
    """Every clause ID used in ``spec/`` or ``tests/`` is defined in SPEC.md."""
    known = defined()
    unknown = {
        f"{p.relative_to(ROOT)}: {sorted(ids_in(p.read_text()) - known)}"
        for p in files("spec") + files("tests")
        if ids_in(p.read_text()) - known
    }
    assert not unknown, f"clause IDs not defined in SPEC.md: {sorted(unknown)}"


def test_spec_md_examples_run() -> None:
    """The worked examples of SPEC.md (``>>>`` blocks) give the results shown."""
    result = doctest.testfile(str(SPEC_MD), module_relative=False, verbose=False)
    assert result.attempted >= 10
    assert result.failed == 0


def test_spec_md_cites_only_what_the_repository_holds() -> None:
    """No path outside the repository; every bug ID and version name is defined in §14."""
    text = SPEC_MD.read_text()
    cited = re.findall(r"`([\w./-]+\.(?:md|py|txt))`", text)
    missing = [c for c in cited if "/" in c and not (ROOT / c).exists()]
    assert not missing, f"SPEC.md cites files the repository does not hold: {missing}"
    section = text[text.index("## 14.") : text.index("## Appendix A")]
    bug_rows = set(re.findall(r"^\| (B\d+) \|", section, re.M))
    used = set(re.findall(r"\bB(\d+)[a-z]?\b", text))
    assert {f"B{n}" for n in used} <= bug_rows, sorted({f"B{n}" for n in used} - bug_rows)
    version_rows = set(re.findall(r"^\| (E\d+b?|\d+\.\d+\.\d+) \|", section, re.M))
    assert {"E1", "E2", "E2b", "E3", "E4", "0.5.23"} <= version_rows
    assert set(re.findall(r"\bE\d+b?\b", text)) <= version_rows


def test_spec_md_shows_the_call_forms_the_oracle_uses() -> None:
    """§5/§6 give SGLang's signatures with the ``*_cpu`` host copies, as the oracle calls them."""
    import inspect

    from kvpool.impl import PagedTokenToKVPoolAllocator

    text = SPEC_MD.read_text()
    for name in ("alloc_extend", "alloc_decode"):
        params = list(inspect.signature(getattr(PagedTokenToKVPoolAllocator, name)).parameters)
        form = f"`{name}({', '.join(p for p in params[1:] if p != 'num_new_pages')}"
        assert form in " ".join(text.split()), form


def _spec_object(path: str) -> Any:
    """``module.function`` / ``module.Class.method`` inside ``kvpool.spec``; None if absent."""
    sys.path.insert(0, str(ROOT))
    from tools.docs_site.spec_md import spec_object  # the site's generator reads it the same way

    return spec_object(path)


def test_every_clause_names_the_function_that_is_the_rule() -> None:
    """SPEC.md gives ``module.function`` for every clause; it exists and cites the clause."""
    rules = dict(RULE.findall(SPEC_MD.read_text()))
    assert set(rules) == defined(), f"clauses without a function: {sorted(defined() - set(rules))}"
    problems = []
    for clause, path in sorted(rules.items()):
        obj = _spec_object(path)
        if obj is None or not callable(obj):
            problems.append(f"{clause}: kvpool.spec.{path} does not exist")
        elif clause not in ids_in(inspect.getsource(obj)):
            problems.append(f"{clause}: kvpool.spec.{path} does not cite {clause}")
    assert not problems, problems


def _github_anchor(title: str) -> str:
    """The anchor GitHub gives a heading (``17. KV bytes: the data plane`` ->
    ``17-kv-bytes-the-data-plane``), the one the Contents line links."""
    return re.sub(r"[^\w\- ]", "", title.lower()).strip().replace(" ", "-")


def test_contents_line_lists_every_section() -> None:
    """Every numbered ``## N.`` section and every ``## Appendix X:`` is linked from the Contents
    line, and every link there reaches a heading."""
    text = SPEC_MD.read_text()
    headings = re.findall(r"^## (.+)$", text, re.M)
    numbered = [h for h in headings if re.match(r"(\d+\.|Appendix [A-Z]:) ", h)]
    assert len(numbered) >= 18, numbered
    contents = re.search(r"^Contents: (.*?)(?:\n\n|\Z)", text, re.M | re.S)
    assert contents, "SPEC.md has no Contents line"
    links = re.findall(r"\]\(#([^)]+)\)", contents.group(1))
    missing = [h for h in numbered if _github_anchor(h) not in links]
    assert not missing, f"sections the Contents line does not list: {missing}"
    anchors = {_github_anchor(h) for h in headings}
    dangling = [link for link in links if link not in anchors]
    assert not dangling, f"Contents links that reach no heading: {dangling}"
