"""The optional compiled CPU hot paths (kvpool.impl._native); everything else is in pyproject.toml.

``optional=True``: where no C compiler is present the build skips the extension and kvpool runs
its numpy backend (``kvpool.impl.native_ops.native_available()`` says which is in use).
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CompileError

# Loops start on a 64-byte boundary: the page-id and dedup loops are a few instructions each,
# and one that straddles two fetch lines ran a 32k-slot free() 25% slower on an AMD EPYC.
ALIGN_LOOPS = "-falign-loops=64"


class BuildExt(build_ext):
    """Builds with ``ALIGN_LOOPS`` where the compiler takes it, else without it."""

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except CompileError:
            if ALIGN_LOOPS not in ext.extra_compile_args:
                raise
            ext.extra_compile_args = [a for a in ext.extra_compile_args if a != ALIGN_LOOPS]
            super().build_extension(ext)


setup(ext_modules=[Extension("kvpool.impl._native", ["impl/_native.c"], optional=True,
                             extra_compile_args=["-O3", ALIGN_LOOPS])],
      cmdclass={"build_ext": BuildExt})
