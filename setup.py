"""The optional compiled CPU hot paths (kvpool.impl._native); everything else is in pyproject.toml.

``optional=True``: where no C compiler is present the build skips the extension and kvpool runs
its numpy backend (``kvpool.impl.native_ops.native_available()`` says which is in use). The
sources are ``csrc/*.c`` with their shared header ``csrc/native.h`` (listed in
``depends``, so a source distribution carries it).
"""

from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
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


setup(ext_modules=[Extension("kvpool.impl._native", SOURCES, depends=HEADERS, optional=True,
                             include_dirs=["csrc"], extra_compile_args=["-O3", *GCC_FLAGS])],
      cmdclass={"build_ext": BuildExt})
