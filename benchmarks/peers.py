"""Load the implementations under test: kvpool, SGLang 0.5.23 and vLLM 0.33.0's ``BlockPool``.

Each loader returns ``None`` (and a one-line reason) when the library is missing, so that the
benchmark skips it instead of failing. vLLM's ``BlockPool`` is imported with the recipe of
``reference/baseline-on-cpu.md`` section 3.3: a meta-path finder inserted first answers with
placeholder modules for the vLLM-internal modules that drag in transformers / fastapi / openai
(``vllm.config``, ``vllm.v1.request``, ``vllm.v1.utils``, ``vllm.multimodal``,
``vllm.v1.metrics.stats`` and everything below them); ``BlockPool``'s allocation paths never call
them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kvpool.oracle.peer_import import (
    PeerUnavailable,
    PlaceholderLoader,
    PlaceholderModule,
    load_sglang_allocators,
)

VLLM_PLACEHOLDERS = (
    "vllm.config",
    "vllm.v1.request",
    "vllm.v1.utils",
    "vllm.multimodal",
    "vllm.v1.metrics.stats",
)


@dataclass
class Peers:
    """Allocator classes found in this environment, plus why any are missing."""

    kvpool: Any | None
    sglang: Any | None
    vllm_block_pool: Any | None
    versions: dict[str, str]
    missing: dict[str, str]


class _VllmPlaceholderFinder(importlib.abc.MetaPathFinder):
    """Answers for ``VLLM_PLACEHOLDERS`` and their submodules with placeholder packages."""

    loader = PlaceholderLoader()

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        for name in VLLM_PLACEHOLDERS:
            if fullname == name or fullname.startswith(name + "."):
                return importlib.machinery.ModuleSpec(fullname, self.loader, is_package=True)
        return None


def load_vllm_block_pool() -> Any:
    """Return vLLM's ``BlockPool`` class.

    Raises:
        PeerUnavailable: vllm is not installed or ``block_pool`` fails to import.
    """
    import sys

    import torch  # noqa: F401  -- real torch first

    if importlib.util.find_spec("vllm") is None:
        raise PeerUnavailable("vllm is not installed (benchmarks/install_peers.sh)")
    if not any(isinstance(f, _VllmPlaceholderFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _VllmPlaceholderFinder())
    # vllm/__init__ imports torch._inductor, which breaks on SGLang's placeholder ``triton``:
    # hide SGLang's placeholder modules and finder while vLLM imports, then put them back.
    hidden = {k: m for k, m in sys.modules.items() if isinstance(m, PlaceholderModule)}
    finders = [f for f in sys.meta_path if type(f).__name__ == "_PlaceholderFinder"]
    for name in hidden:
        del sys.modules[name]
    for finder in finders:
        sys.meta_path.remove(finder)
    try:
        module = importlib.import_module("vllm.v1.core.block_pool")
    except Exception as exc:
        raise PeerUnavailable(
            f"cannot import vllm.v1.core.block_pool ({type(exc).__name__}: {exc})"
        ) from exc
    finally:
        sys.meta_path.extend(finders)
        for name, placeholder in hidden.items():
            sys.modules.setdefault(name, placeholder)
    return module.BlockPool


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
