"""A private copy of the repository where mutants are applied, never the working tree.

The copy holds the tracked files (``git ls-files``), the compiled extensions built in place in the
package folders (``impl/_native*.so``), plus a ``kvpool/`` package folder laid out
as ``pyproject.toml``'s ``package-dir`` says (``kvpool`` from ``kvpool_pkg/``, ``kvpool.spec``
a symlink to the copied ``spec/``, ...), so that with the copy first on ``sys.path`` every import
of ``kvpool`` (tests, the pytest plugin, subprocesses) reads the mutated file.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import tomllib


def package_dirs(root: Path) -> dict[str, str]:
    """``pyproject.toml``'s ``[tool.setuptools] package-dir``: package -> folder."""
    data = tomllib.loads((root / "pyproject.toml").read_text())
    dirs: dict[str, str] = data["tool"]["setuptools"]["package-dir"]
    return dirs


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
    dirs = package_dirs(root)
    for folder in set(dirs.values()):  # compiled extensions built in place (ignored by git)
        for built in (root / folder).glob("*.so"):
            shutil.copy2(built, dest / folder / built.name)
    pkg = dest / "kvpool"
    shutil.copytree(dest / dirs["kvpool"], pkg)
    for name, folder in dirs.items():
        if name.startswith("kvpool."):
            (pkg / name.removeprefix("kvpool.")).symlink_to(Path("..") / folder)
    return dest
