"""The site's search finds clauses and API names; long names in tables may wrap.

``tools.docs_site.search_index`` boosts each clause's entry of the built search index, and
``tools.docs_site.table_breaks`` marks where long names in tables may break; the search
plugin's ``separator`` in ``mkdocs.yml`` decides which words a page's text is cut into. The
browser check (``tools/docs_check.py``) runs the real search on the built site.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools.docs_site import search_index, spec_md  # noqa: E402
from tools.docs_site.table_breaks import break_long_words  # noqa: E402


def separator() -> re.Pattern[str]:
    """The search plugin's ``separator`` of ``mkdocs.yml`` (a JavaScript regex that Python
    reads the same way)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    search = next(p["search"] for p in config["plugins"] if isinstance(p, dict) and "search" in p)
    return re.compile(search["separator"])


def words(text: str) -> list[str]:
    return [w for w in separator().split(text) if w]


def test_api_names_are_words_of_their_own() -> None:
    """A name inside a dotted path or a signature is a word: ``conformance_test`` finds
    ``kvpool.oracle.entry.api.conformance_test(target, *, caps=None)``."""
    assert words("kvpool.oracle.entry.api.conformance_test(target, *, caps=None)") == [
        "kvpool", "oracle", "entry", "api", "conformance_test", "target", "caps", "None"]
    assert words("target.kvpool_capabilities() -> Capabilities") == [
        "target", "kvpool_capabilities", "Capabilities"]
    assert words("x &lt;= y &amp;&amp; SPEC.md") == ["x", "y", "SPEC", "md"]


def test_clause_ids_split_as_a_query_does() -> None:
    """The search splits a query at ``-``, so the text splits there too (``SEG-5`` is ``SEG``
    and ``5``); a range's dots and a version's are kept apart and whole."""
    assert words("SEG-5 and INV-1..4") == ["SEG", "5", "and", "INV", "1", "4"]
    assert words("SGLang 0.5.23.") == ["SGLang", "0.5.23"]


def test_every_clause_entry_is_boosted() -> None:
    """Each clause's section on its page gets the boost; other anchors and pages do not."""
    ids = {c.id for c in spec_md.load().clauses()}
    index = {"docs": [{"location": "spec/segments/"}, {"location": "spec/segments/#SEG-5"},
                      {"location": "reference/divergences/#seq-sgl-seg-disjoint"},
                      {"location": "source/spec/x.py/#SEG-5"}]}
    assert search_index.boost_clauses(index, ids) == {"SEG-5"}
    boosts = [d.get("boost") for d in index["docs"]]
    assert boosts == [None, search_index.CLAUSE_BOOST, None, None]
    assert search_index.CLAUSE_BOOST > 2.5


def test_long_names_in_tables_may_break_at_dots_and_slashes() -> None:
    html = ("<table><tr><td>see sglang/srt/mem_cache/allocator/base.py@0.5.23 and "
            '<a href="#a.b.c.d.e.f.g.h.i.j.k.l">x</a> <code>capacity_hooks=False</code> '
            "<code>PagedTokenToKVPoolAllocator.alloc_decode</code></td></tr></table>"
            "<p>kvpool.integrations.sglang_replay_hybrid</p>"
            '<table class="highlighttable"><tr><td>kvpool.integrations.sglang_replay</td>'
            "</tr></table>")
    out = break_long_words(html)
    assert "sglang/<wbr>srt/<wbr>mem_cache/<wbr>allocator/<wbr>base.<wbr>py@0.5.23" in out
    assert "<code>PagedTokenToKVPoolAllocator.<wbr>alloc_decode</code>" in out
    assert '<a href="#a.b.c.d.e.f.g.h.i.j.k.l">' in out  # tags are left alone
    assert "<code>capacity_hooks=False</code>" in out  # short words stay whole
    assert out.replace("<wbr>", "") == html
    assert out.count("<wbr>") == 6  # nothing outside Markdown's tables
