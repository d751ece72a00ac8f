"""Fixtures for the impl tests: force the pure-torch or the numpy backend on CPU.

On CPU the allocators run their hot paths in compiled loops
(:class:`kvpool.impl.native_ops.NativeOps`, when the extension is built) or in numpy
(:class:`kvpool.impl.numpy_ops.NumpyOps`); CUDA uses :class:`kvpool.impl.backend.TorchOps`. Tests
that inspect the torch ops (dispatch guards, op counts) or that check the torch path's results
on a CPU-only machine request ``torch_ops`` so that allocators built inside them use
``TorchOps`` on CPU too; ``numpy_ops`` does the same for ``NumpyOps`` (the backend of an
install without a C compiler).
"""

from __future__ import annotations

from typing import Any

import pytest
from kvpool.impl import base
from kvpool.impl.backend import TorchOps
from kvpool.impl.numpy_ops import NumpyOps


@pytest.fixture
def torch_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    """Allocators constructed while this fixture is active use the torch backend."""

    def torch_only(page_size: int, device: Any) -> TorchOps:
        return TorchOps(page_size, device)

    monkeypatch.setattr(base, "ops_for", torch_only)


@pytest.fixture
def numpy_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    """Allocators constructed while this fixture is active use the numpy backend."""

    def numpy_only(page_size: int, device: Any) -> NumpyOps:
        return NumpyOps(page_size, device)

    monkeypatch.setattr(base, "ops_for", numpy_only)
