"""The optional compiled CPU hot paths (kvpool.impl._native); everything else is in pyproject.toml.

``optional=True``: where no C compiler is present the build skips the extension and kvpool runs
its numpy backend (``kvpool.impl.native_ops.native_available()`` says which is in use).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("kvpool.impl._native", ["impl/_native.c"], optional=True,
                             extra_compile_args=["-O3"])])
