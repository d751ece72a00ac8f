"""Sphinx roles in docstrings (``:class:`X```) reach the API pages as code, not as text."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools.docs_site.reference_pages import sphinx_roles  # noqa: E402


def test_a_role_becomes_a_code_span() -> None:
    """The role is dropped; ``~`` shows the last name only, as Sphinx does."""
    html = "A :class:<code>~kvpool.spec.errors.ContractViolation</code>, :func:<code>f</code>."
    assert sphinx_roles(html) == "A <code>ContractViolation</code>, <code>f</code>."


def test_a_target_documented_on_the_page_is_linked() -> None:
    html = ':mod:<code>kvpool.impl.backend</code> <h2 id="kvpool.impl.backend">backend</h2>'
    assert sphinx_roles(html).startswith(
        '<a href="#kvpool.impl.backend"><code>kvpool.impl.backend</code></a> ')


def test_other_text_before_code_is_kept() -> None:
    """Only Sphinx's Python roles are rewritten: ``ps:<code>4</code>`` stays as it is."""
    html = "ps:<code>4</code> :note:<code>x</code> :py:meth:<code>m</code>"
    assert sphinx_roles(html) == "ps:<code>4</code> :note:<code>x</code> <code>m</code>"
