"""SPEC.md's clause index as data: the clause-ID prefixes (``MODEL``, ``INV``, ..., ``DATA``), in
the index's order, which is the order of SPEC.md's sections.

SPEC.md is the one source of the clauses; this module reads it rather than listing them again.
A wheel carries a copy of SPEC.md beside this module (``kvpool/spec/SPEC.md``, copied there by
``setup.py`` at build time); a source checkout (or an editable install) reads the one at the
repository's root. A new clause prefix therefore needs an entry in SPEC.md's clause index only.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

__all__ = ["INDEX_HEADING", "clause_prefixes", "spec_md_path"]

INDEX_HEADING = "## Clause index"
_ID = re.compile(r"(?<![A-Za-z0-9])([A-Z]+)-\d+")


def spec_md_path() -> Path:
    """The SPEC.md this package reads: the copy shipped beside this module, else the one at the
    root of the source tree this module lies in. Raises FileNotFoundError naming both places
    when neither exists (a build that left SPEC.md out)."""
    here = Path(__file__).resolve()
    shipped, checkout = here.with_name("SPEC.md"), here.parents[1] / "SPEC.md"
    for candidate in (shipped, checkout):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"SPEC.md is neither at {shipped} (a wheel's copy) nor at {checkout} "
                            "(a source checkout's)")


def prefixes_in_index(text: str) -> tuple[str, ...]:
    """The clause prefixes SPEC.md's text ``text`` lists under its clause index heading, each
    once, in the order of their first mention (``MODEL-1..4 · INV-1..4`` -> ``("MODEL",
    "INV")``). Raises ValueError when ``text`` has no clause index or the index names no clause.

    >>> prefixes_in_index("## 1. Model\\n\\n## Clause index\\n\\nMODEL-1..4 · INV-1 · MODEL-2.")
    ('MODEL', 'INV')
    """
    _, sep, index = text.partition(f"\n{INDEX_HEADING}\n")
    if not sep:
        raise ValueError(f"SPEC.md has no {INDEX_HEADING!r} section")
    index = index.split("\n## ", 1)[0]
    found = tuple(dict.fromkeys(_ID.findall(index)))
    if not found:
        raise ValueError(f"SPEC.md's {INDEX_HEADING!r} names no clause")
    return found


@cache
def clause_prefixes() -> tuple[str, ...]:
    """SPEC.md's clause prefixes in its clause index's order (read once per process). Raises
    FileNotFoundError when no SPEC.md is found (:func:`spec_md_path`), ValueError when it has
    no clause index."""
    return prefixes_in_index(spec_md_path().read_text(encoding="utf-8"))
