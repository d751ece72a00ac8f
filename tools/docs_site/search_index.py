"""The built site's search index: a query for a clause ID finds that clause first.

Material's search ranks a page's own entry (its title and opening text) above the page's
sections, so ``FREE-7`` would find the page titled ``7. free and free_full`` before the clause.
``boost_clauses`` gives every clause's entry (``spec/<page>/#<ID>``) of
``search/search_index.json`` a document boost that outweighs this; ``docs/javascripts/
clause-search.js`` makes a query that is one clause ID match that ID's number exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tools.docs_site.spec_pages import SPEC_DIR

INDEX = Path("search") / "search_index.json"
# Above 2.5, the factor by which Material favours a page's own entry over its sections.
CLAUSE_BOOST = 4.0


def boost_clauses(index: dict[str, Any], clause_ids: set[str],
                  boost: float = CLAUSE_BOOST) -> set[str]:
    """Set ``boost`` on every entry of ``index`` (Material's search index, parsed) that is a
    clause's section on a specification page; the clause IDs whose entry was found."""
    found = set()
    for entry in index["docs"]:
        path, _, anchor = entry["location"].partition("#")
        if anchor in clause_ids and path.startswith(f"{SPEC_DIR}/"):
            entry["boost"] = boost
            found.add(anchor)
    return found


def boost_site(site_dir: Path, clause_ids: set[str]) -> set[str]:
    """``boost_clauses`` on the built site's index file, rewritten in place; the clause IDs
    that have no entry of their own (empty when every clause is found)."""
    path = site_dir / INDEX
    index = json.loads(path.read_text(encoding="utf-8"))
    found = boost_clauses(index, clause_ids)
    path.write_text(json.dumps(index, separators=(",", ":")), encoding="utf-8")
    return clause_ids - found
