"""Load the implementations under test: kvpool, SGLang 0.5.23 and vLLM 0.33.0's ``BlockPool``.

Each loader returns ``None`` (and a one-line reason) when the library is missing, so that the
benchmark skips it instead of failing. The peers are imported by the oracle's shims
(``kvpool.oracle.peers.peer_import``), so the benchmarks and the conformance runs load the same
code.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kvpool.oracle.peers.peer_import import (
    PeerUnavailable,
    load_sglang_allocators,
    load_vllm_block_pool,
)


@dataclass
class Peers:
    """Allocator classes found in this environment, plus why any are missing."""

    kvpool: Any | None
    sglang: Any | None
    vllm_block_pool: Any | None
    versions: dict[str, str]
    missing: dict[str, str]


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def load_peers(skip: Sequence[str] = ()) -> Peers:
    """Import every implementation that is present; record a reason for each one that is not."""
    import torch

    missing: dict[str, str] = {name: "left out by --skip" for name in skip}
    kv: Any | None = None
    sg: Any | None = None
    vl: Any | None = None
    if "kvpool" not in skip:
        try:
            impl = importlib.import_module("kvpool.impl")
            impl.TokenToKVPoolAllocator  # noqa: B018
            impl.PagedTokenToKVPoolAllocator  # noqa: B018
            kv = impl
        except Exception as exc:
            missing["kvpool"] = (f"kvpool.impl does not provide the allocators "
                                 f"({type(exc).__name__}: {exc})")
    if "vllm" not in skip:
        try:
            vl = load_vllm_block_pool()
        except PeerUnavailable as exc:
            missing["vllm"] = str(exc)
    if "sglang" not in skip:
        try:
            sg = load_sglang_allocators()
        except PeerUnavailable as exc:
            missing["sglang"] = str(exc)
    versions = {
        "torch": torch.__version__,
        "kvpool": _version("kvpool"),
        "sglang": _version("sglang"),
        "vllm": _version("vllm"),
    }
    return Peers(kv, sg, vl, versions, missing)
