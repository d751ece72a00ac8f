"""What pyproject.toml cannot say: the package list found under its ``package-dir`` mapping,
SPEC.md shipped inside ``kvpool.spec``, and the optional compiled CPU hot paths
(kvpool.impl._native). Everything else is in pyproject.toml.

Packages: every folder with an ``__init__.py`` under a folder that pyproject.toml's
``package-dir`` maps (``kvpool.spec`` -> ``spec/``, ...), named from the mapping
(``oracle/families/unified/`` -> ``kvpool.oracle.families.unified``): a new subpackage needs no
entry anywhere. setuptools' own discovery (``packages.find``) names a folder by its path, not
by the mapping, and its automatic discovery of a mapped layout takes every folder
(``__pycache__`` too), hence :class:`MappedPackages`.

SPEC.md: a wheel carries it as ``kvpool/spec/SPEC.md``, where
:func:`kvpool.spec.clause_index.spec_md_path` finds it (a source checkout reads the root's);
MANIFEST.in puts it into a source distribution.

The extension: ``optional=True``: where no C compiler is present the build skips it and kvpool
runs its numpy backend (``kvpool.impl.native_ops.native_available()`` says which is in use). The
sources are ``csrc/*.c`` with their shared header ``csrc/native.h`` (listed in
``depends``, so a source distribution carries it).
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution
from setuptools.errors import CompileError

SOURCES = sorted(str(p.as_posix()) for p in Path("csrc").glob("*.c"))
HEADERS = ["csrc/native.h"]
# Loops start on a 64-byte boundary: the page-id and dedup loops are a few instructions each,
# and one that straddles two fetch lines ran a 32k-slot free() 25% slower on an AMD EPYC. Only
# the module's init function is exported: the files' shared functions stay inside the library.
GCC_FLAGS = ["-falign-loops=64", "-fvisibility=hidden"]


class BuildExt(build_ext):
    """Builds with ``GCC_FLAGS`` where the compiler takes them, else without them."""

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except CompileError:
            if not set(GCC_FLAGS) & set(ext.extra_compile_args):
                raise
            ext.extra_compile_args = [a for a in ext.extra_compile_args if a not in GCC_FLAGS]
            super().build_extension(ext)


def mapped_packages(package_dir: Mapping[str, str], root: Path = Path()) -> list[str]:
    """Every package under the folders ``package_dir`` maps (package name -> folder relative
    to ``root``): each mapped folder and each folder below it that holds an ``__init__.py``,
    reached through such folders only, named from the mapping. Raises FileNotFoundError for a
    mapped folder without an ``__init__.py``."""
    found: list[str] = []
    for name, folder in sorted(package_dir.items()):
        if not name:  # the root mapping ("" -> src/) maps no package of its own
            continue
        base = root / folder
        if not (base / "__init__.py").is_file():
            raise FileNotFoundError(f"package-dir maps {name!r} to {base}, which has no "
                                    "__init__.py")
        stack = [base]
        while stack:
            here = stack.pop()
            found.append(".".join([name, *here.relative_to(base).parts]))
            stack += sorted(p for p in here.iterdir() if (p / "__init__.py").is_file())
    return sorted(found)


class MappedPackages(Distribution):
    """pyproject.toml's settings, then :func:`mapped_packages` of its ``package-dir`` where it
    names no ``packages`` of its own."""

    def parse_config_files(self, *args: Any, **kwargs: Any) -> None:
        super().parse_config_files(*args, **kwargs)
        if self.packages is None and self.package_dir:
            self.packages = mapped_packages(self.package_dir, Path(self.src_root or "."))


class BuildPy(build_py):
    """The packages, then SPEC.md copied into the built ``kvpool.spec`` (not in an editable
    install, which reads the checkout's). Raises FileNotFoundError without SPEC.md."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            self.copy_file("SPEC.md", str(Path(self.build_lib, "kvpool", "spec", "SPEC.md")))


setup(ext_modules=[Extension("kvpool.impl._native", SOURCES, depends=HEADERS, optional=True,
                             include_dirs=["csrc"], extra_compile_args=["-O3", *GCC_FLAGS])],
      cmdclass={"build_ext": BuildExt, "build_py": BuildPy}, distclass=MappedPackages)
