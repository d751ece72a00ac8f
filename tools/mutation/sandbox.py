"""A private copy of the repository where mutants are applied, never the working tree.

The copy holds the tracked files (``git ls-files``) plus a ``kvpool/`` package folder that maps
``kvpool.spec`` / ``kvpool.impl`` / ``kvpool.oracle`` onto the copied ``spec/``, ``impl/`` and
``oracle/`` (symlinks), so that with the copy first on ``sys.path`` every import of ``kvpool``
(tests, the pytest plugin, subprocesses) reads the mutated file.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SUBPACKAGES = ("spec", "impl", "oracle")


def tracked_files(root: Path) -> list[str]:
    """The repository's files as git sees them (tracked, plus untracked ones not ignored)."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=root, check=True, capture_output=True, text=True,
    ).stdout
    return [line for line in out.splitlines() if line and (root / line).is_file()]


def make_sandbox(root: Path, dest: Path) -> Path:
    """Copy ``root``'s files into ``dest`` (created) and add the ``kvpool`` package folder."""
    dest.mkdir(parents=True)
    for rel in tracked_files(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    pkg = dest / "kvpool"
    shutil.copytree(dest / "kvpool_pkg", pkg)
    for sub in SUBPACKAGES:
        (pkg / sub).symlink_to(Path("..") / sub)
    return dest
