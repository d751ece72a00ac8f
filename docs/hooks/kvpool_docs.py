"""MkDocs hook: the pages generated from the repository at build time.

- ``spec/``: SPEC.md, one page per section (``tools.docs_site.spec_pages``); the nav entry
  ``Specification`` is expanded into the index and every section, so a new section of SPEC.md
  appears without an edit here or in ``mkdocs.yml``;
- ``reference/divergences.md``: the registry ``kvpool.oracle.peers.divergences.REGISTRY``;
- ``reference/oracle.md``: the oracle's public API, each name from the module defining it;
- ``benchmarks/``: ``benchmarks/README.md`` with the plots of ``benchmarks/results/``;
- ``source/``: the spec modules and test files the clauses link to.

Every clause is its own entry of the search index, boosted so that a search for its ID finds
it first (``tools.docs_site.search_index``); a clause without an entry stops the build.

Sphinx roles left in docstrings (``:class:`X```) are shown as code spans on every page, and
long names in tables may wrap at their dots and slashes
(``tools.docs_site.table_breaks``).

SPEC.md's worked examples and the clauses' own (``docs/clause_examples/``, sources of the
clause pages, not pages themselves) run as doctests first; a failing one or a clause whose
function is missing stops the build (``PluginError``).
"""

from __future__ import annotations

import doctest
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mkdocs.exceptions import PluginError  # noqa: E402
from mkdocs.plugins import event_priority  # noqa: E402
from mkdocs.structure.files import File, Files  # noqa: E402

from tools.docs_site import (  # noqa: E402
    clause_examples,
    clause_tests,
    reference_pages,
    search_index,
    spec_md,
    spec_pages,
    table_breaks,
)

NAV_ENTRY = "Specification"
# mkdocs.yml's mkdocstrings ``paths`` entry: the kvpool package as the wheel lays it out.
PACKAGE_TREE = "build/docs-packages"


@event_priority(100)  # before mkdocstrings' own on_config sets up its search paths
def on_config(config: Any) -> Any:
    """Expand the ``Specification`` nav entry into the spec's index and section pages, and lay
    out the ``kvpool`` package for mkdocstrings (``reference_pages.package_tree``)."""
    reference_pages.package_tree(ROOT / PACKAGE_TREE)
    spec = spec_md.load()
    pages = [{"Overview": f"{spec_pages.SPEC_DIR}/index.md"}]
    pages += [{s.title: spec_pages.page_path(s)} for s in spec.sections]
    for k, entry in enumerate(config["nav"] or []):
        if isinstance(entry, dict) and NAV_ENTRY in entry:
            config["nav"][k] = {NAV_ENTRY: pages}
    return config


def on_pre_build(config: Any) -> None:
    """Run SPEC.md's worked examples; a wrong result stops the build."""
    spec = spec_md.load()
    globs: dict[str, Any] = {}
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(verbose=False)
    for section in spec.sections:
        for n, example in enumerate(section.examples(), start=1):
            test = parser.get_doctest(example, globs, f"SPEC.md {section.title} #{n}",
                                      "SPEC.md", 0)
            report: list[str] = []
            result = runner.run(test, out=report.append, clear_globs=False)
            globs.update(test.globs)  # later examples use earlier imports, as in SPEC.md
            if result.failed:
                raise PluginError(f"SPEC.md: a worked example of '{section.title}' fails:\n"
                                  + "".join(report))
    try:
        examples = clause_examples.by_clause(clause_examples.load())
    except ValueError as exc:
        raise PluginError(str(exc)) from exc
    for clause, (example_file, own) in examples.items():
        failed = clause_examples.run(example_file, own)
        if failed:
            raise PluginError(f"{example_file.path}: the example of {clause} fails:\n{failed}")


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages and images to the build; the clause examples' sources are
    shown on the clause pages, not as pages of their own."""
    examples_dir = clause_examples.EXAMPLES_DIR.relative_to(ROOT / "docs").as_posix() + "/"
    for source in [f for f in files if f.src_uri.startswith(examples_dir)]:
        files.remove(source)
    spec = spec_md.load()
    try:
        generated: dict[str, str | bytes] = dict(spec_pages.render_all(spec))
    except LookupError as exc:
        raise PluginError(f"SPEC.md: {exc}") from exc
    generated["reference/divergences.md"] = reference_pages.divergence_page()
    generated["reference/oracle.md"] = reference_pages.oracle_api_page()
    generated.update(reference_pages.benchmark_pages())
    known = {c.id for c in spec.clauses()}
    linked = [f.path for found in clause_tests.index(known).values() for f in found]
    linked += [spec_md.rule_source(c.function)[1] for c in spec.clauses()]
    generated.update(reference_pages.source_pages(linked))
    for path, content in generated.items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=content))
    return files


@event_priority(-100)  # after the search plugin has written the index
def on_post_build(config: Any) -> None:
    """Boost every clause's entry of the search index; a clause without one stops the build."""
    missing = search_index.boost_site(Path(config["site_dir"]),
                                      {c.id for c in spec_md.load().clauses()})
    if missing:
        raise PluginError(f"search index: no entry of their own for {sorted(missing)}")


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    """Docstrings' Sphinx roles as code spans (``reference_pages.sphinx_roles``); long names
    in tables breakable (``table_breaks.break_long_words``)."""
    return table_breaks.break_long_words(reference_pages.sphinx_roles(html))
