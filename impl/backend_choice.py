"""Which backend runs an allocator's arithmetic: :func:`ops_for`, called once at construction."""

from __future__ import annotations

import os
from typing import Any

import torch

from .backend import TorchOps
from .native_ops import NativeOps, native_enabled
from .numpy_ops import NumpyOps


def ops_for(page_size: int, device: Any) -> TorchOps:
    """The backend of one allocator (chosen once, at construction).

    CPU: :class:`~kvpool.impl.native_ops.NativeOps` when the compiled extension is built and
    ``KVPOOL_NATIVE`` is not ``0``, else :class:`~kvpool.impl.numpy_ops.NumpyOps`. CUDA:
    :class:`~kvpool.impl.triton_ops.TritonOps` when ``triton`` imports and ``KVPOOL_TRITON`` is
    not ``0``, else :class:`~kvpool.impl.backend.TorchOps`. Any other device:
    :class:`~kvpool.impl.backend.TorchOps`.
    """
    kind = torch.device(device).type
    if kind == "cpu":
        if native_enabled():
            return NativeOps(page_size, device)
        return NumpyOps(page_size, device)
    if kind == "cuda" and os.environ.get("KVPOOL_TRITON", "1") != "0":
        try:
            from .triton_ops import TritonOps  # the optional ``triton`` extra
        except ImportError:  # not installed
            return TorchOps(page_size, device)
        return TritonOps(page_size, device)
    return TorchOps(page_size, device)
