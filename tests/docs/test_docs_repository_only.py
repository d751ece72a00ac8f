"""Project files cite only what the repository holds.

No tracked text file points into a folder beside the repository (a parent-relative path to
the shared material) or at a ``reference/*.md`` page the site does not have
(``docs/reference/`` plus the generated ``divergences.md`` and ``oracle.md``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT = (".py", ".md", ".sh", ".toml", ".yml", ".yaml", ".txt", ".c", ".h")
GENERATED = {"divergences.md", "oracle.md"}  # made by docs/hooks/kvpool_docs.py at build time


def _tracked_text() -> dict[str, str]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    found = {}
    for name in names:
        path = ROOT / name
        if (name.endswith(TEXT) or name.startswith(".ci/")) and path.is_file():
            found[name] = path.read_text(encoding="utf-8", errors="replace")
    return found


def test_no_path_outside_the_repository() -> None:
    outside = re.compile(r"(?:\.\./)+shared\b|(?<![\w/])shared/(?:reference|seed)/")
    bad = [name for name, text in _tracked_text().items() if outside.search(text)]
    assert not bad, f"files citing a folder outside the repository: {bad}"


def test_reference_pages_cited_exist() -> None:
    have = {p.name for p in (ROOT / "docs" / "reference").glob("*.md")} | GENERATED
    bad = sorted(
        f"{name}: {page}"
        for name, text in _tracked_text().items()
        for page in re.findall(r"(?<![\w-])reference/([\w-]+\.md)", text)
        if page not in have
    )
    assert not bad, f"reference pages that do not exist: {bad}"
