"""The wheel holds every package of the source tree, and each of its modules imports from it.

A copy of what a build reads (pyproject.toml, setup.py, MANIFEST.in, README.md, SPEC.md,
``csrc/`` and the folders pyproject.toml's ``package-dir`` maps, without caches or built
extensions) is built with ``pip wheel --no-deps`` (without build isolation where setuptools
68+ and wheel are installed here, else with it, as ``.ci/run``'s wheel step does). The unpacked
wheel is then the only kvpool a child interpreter sees (``python -S``: this environment's
site-packages on its path without their ``.pth`` files, so an editable install's finder does
not serve the source tree), and it imports every module ``pkgutil.walk_packages`` finds there.
A package that setup.py's discovery left out fails twice: its modules are missing from the
walk, and the modules that import it fail. A subpackage planted in the copy (named by no list)
must ship and import too.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import site
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD_FILES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "SPEC.md")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.egg-info", "build")
# a subpackage the test adds to the copy (oracle/families/wheel_probe/): setup.py must find it
PLANTED = "kvpool.oracle.families.wheel_probe"
# modules run by ``python -m`` and never imported (importing one runs its program)
RUN_ONLY = ("__main__",)

# The child: walk the unpacked wheel's kvpool, import every module, report what failed as JSON.
CHILD = textwrap.dedent("""
    import importlib, json, pkgutil, sys, traceback
    wheel, site_dirs = sys.argv[1], json.loads(sys.argv[2])
    sys.path[:0] = [wheel]
    sys.path += site_dirs
    import kvpool
    out = {"kvpool": kvpool.__file__, "modules": [], "failed": {}, "absent_dependency": {}}
    def failed(name):
        err = sys.exc_info()[1]
        missing = getattr(err, "name", None) or ""
        if isinstance(err, ModuleNotFoundError) and not missing.startswith("kvpool"):
            out["absent_dependency"][name] = missing  # an optional third-party module
        else:
            out["failed"][name] = traceback.format_exc(limit=3)
    for info in pkgutil.walk_packages(kvpool.__path__, "kvpool.", onerror=failed):
        out["modules"].append(info.name)
        if info.name.rsplit(".", 1)[-1] in RUN_ONLY:
            continue
        before = set(sys.modules)
        try:
            importlib.import_module(info.name)
        except Exception:
            failed(info.name)
            # a library that failed half-way is forgotten, so the next import of it fails
            # the same way (its submodules left behind would fail it otherwise)
            tops = {name.partition(".")[0] for name in before}
            for name in set(sys.modules) - before:
                if name.partition(".")[0] not in tops:
                    del sys.modules[name]
    from kvpool.spec.clause_index import clause_prefixes, spec_md_path
    out["spec_md"], out["clause_prefixes"] = str(spec_md_path()), list(clause_prefixes())
    print(json.dumps(out))
""").replace("RUN_ONLY", repr(RUN_ONLY))


def package_dirs() -> dict[str, str]:
    """pyproject.toml's ``package-dir`` mapping (package name -> folder)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with (ROOT / "pyproject.toml").open("rb") as f:
        mapping: dict[str, str] = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    return mapping


def source_modules(mapping: dict[str, str], root: Path = ROOT) -> set[str]:
    """Every module of the packages of the source tree at ``root``, named as installed
    (``oracle/entry/api.py`` -> ``kvpool.oracle.entry.api``): the ``.py`` files of each folder
    with an ``__init__.py`` under a mapped folder, reached through such folders."""
    found: set[str] = set()
    for name, folder in mapping.items():
        stack = [root / folder]
        while stack:
            here = stack.pop()
            package = ".".join([name, *here.relative_to(root / folder).parts])
            found.add(package)
            found.update(f"{package}.{p.stem}" for p in here.glob("*.py") if p.stem != "__init__")
            stack += [p for p in here.iterdir() if (p / "__init__.py").is_file()]
    return found - {"kvpool"}  # the walk starts inside kvpool


def can_build_here() -> bool:
    """Whether this environment has what pyproject.toml's build-system requires (setuptools 68
    or later, wheel), so that the build needs no isolated environment (nor an index)."""
    try:
        major = int(importlib.metadata.version("setuptools").split(".")[0])
        importlib.metadata.version("wheel")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False
    return major >= 68


def build_wheel(tmp_path: Path, mapping: dict[str, str]) -> Path:
    """The wheel of a clean copy of the build's inputs (in ``tmp_path/src``), built into
    ``tmp_path/wheel``."""
    src = tmp_path / "src"
    src.mkdir()
    for name in BUILD_FILES:
        shutil.copy2(ROOT / name, src / name)
    for folder in {"csrc", *mapping.values()}:
        shutil.copytree(ROOT / folder, src / folder, ignore=IGNORED)
    # a subpackage no list names, deep under a mapped folder, and a cache folder that is none
    families = src / mapping["kvpool.oracle"] / "families"
    (families / "wheel_probe").mkdir()
    (families / "wheel_probe" / "__init__.py").write_text("from .value import VALUE\n")
    (families / "wheel_probe" / "value.py").write_text("VALUE = 1\n")
    (families / "__pycache__").mkdir()
    (families / "__pycache__" / "stale.py").write_text("")
    isolated = not can_build_here()
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "wheel"),
           *([] if isolated else ["--no-build-isolation"]), "."]
    r = subprocess.run(cmd, cwd=src, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = (tmp_path / "wheel").glob("kvpool-*.whl")
    return wheel


def test_the_wheel_ships_and_imports_every_module(tmp_path: Path) -> None:
    """Every module of the source tree is in the wheel (SPEC.md too), and each imports from the
    unpacked wheel alone; only a missing third-party module (an optional peer) may stop one."""
    mapping = package_dirs()
    wheel = build_wheel(tmp_path, mapping)
    unpacked = tmp_path / "unpacked"
    zipfile.ZipFile(wheel).extractall(unpacked)
    assert (unpacked / "kvpool" / "spec" / "SPEC.md").read_text() == (ROOT / "SPEC.md").read_text()

    site_dirs = [*site.getsitepackages(), site.getusersitepackages()]
    r = subprocess.run(
        [sys.executable, "-S", "-c", CHILD, str(unpacked), json.dumps(site_dirs)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert Path(out["kvpool"]).is_relative_to(unpacked), out["kvpool"]
    assert Path(out["spec_md"]).is_relative_to(unpacked), out["spec_md"]
    assert out["clause_prefixes"][:2] == ["MODEL", "INV"] and "DATA" in out["clause_prefixes"]
    missing = sorted(source_modules(mapping, tmp_path / "src") - set(out["modules"]))
    assert not missing, f"modules of the source tree missing from {wheel.name}: {missing}"
    assert not out["failed"], "\n".join(f"{k}:\n{v}" for k, v in out["failed"].items())
    # only an optional peer or accelerator library may be absent, never numpy, torch, hypothesis
    assert not set(out["absent_dependency"].values()) & {"numpy", "torch", "hypothesis"}, out
    assert len(out["modules"]) > 100
    assert {PLANTED, f"{PLANTED}.value", "kvpool.oracle.families.unified",
            "kvpool.spec.clause_index"} <= set(out["modules"])
    assert not any("__pycache__" in name for name in zipfile.ZipFile(wheel).namelist())
    print(f"{len(out['modules'])} modules; absent optional libraries: {out['absent_dependency']}")
