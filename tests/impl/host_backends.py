"""The CPU host backends under test: numpy always, the compiled one where it is built.

``.ci/run`` sets ``KVPOOL_REQUIRE_NATIVE=1`` so that a CI install that failed to compile the
extension fails ``test_impl_native.py`` instead of testing one backend only.
"""

from __future__ import annotations

from kvpool.impl.native_ops import NativeOps, native_available
from kvpool.impl.numpy_ops import NumpyOps

HOST_OPS: tuple[type[NumpyOps], ...] = (NumpyOps, NativeOps) if native_available() else (
    NumpyOps,)
