"""Targets and configurations: ``module:factory`` strings, kvpool.impl's allocators, SGLang's.

A factory is called as ``factory(size=..., page_size=..., need_sort=..., device=...)`` and
returns an allocator with SGLang's methods; ``factory.kvpool_capabilities`` declares what it
supports. Aliases (the family's record in ``kvpool.oracle.engine.registry``): ``kvpool``
(default: the token and paged allocators of ``kvpool.impl``, checked), ``kvpool-unchecked``
(the same in production mode, no bad input sent), ``sglang`` (the real SGLang 0.5.23
allocators, capabilities from the divergence registry; ``sglang-token`` / ``sglang-paged``
one of them) and ``vllm`` (vLLM 0.33.0's
``BlockPool`` through ``kvpool.oracle.peers.adapters``), ``kvcached-token`` /
``kvcached-paged`` (kvcached 0.1.6's Elastic allocators over its ``KVCacheManager``,
placeholder page mapping: ``kvpool.oracle.peers.kvcached_import``).
A :class:`Target` is a resolved factory; a :class:`Config` is one cell of its configuration matrix
(``configs_for``). Resolving a target loads neither torch nor Hypothesis.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any

from ...engine.capabilities import PAGED, TOKEN, Capabilities, declared_capabilities
from ...engine.registry import FAMILIES
from ...engine.target import Config, Target, TargetError, probe_peer
from ...peers.declared import declared_by_registry

# the family's record: its aliases (alias -> the factories it runs) and its default target
RECORD = FAMILIES["single"]


def configs_for(
    caps: Capabilities,
    *,
    order: str | None = None,
    page_sizes: list[int] | None = None,
    need_sort: list[bool] | None = None,
    device: str = "cpu",
) -> Iterator[Config]:
    """The matrix: declared page sizes x need_sort values (filtered by the requested ones)."""
    mode = order or ("exact" if caps.reference_order else "contract")
    for ps in caps.page_sizes:
        if page_sizes is not None and ps not in page_sizes:
            continue
        for ns in caps.need_sort:
            if need_sort is not None and ns not in need_sort:
                continue
            yield Config(ps, ns, device, mode)


def _dtype() -> Any:
    import torch

    return torch.float16


# -- kvpool.impl -------------------------------------------------------------------------------
def kvpool_token(*, size: int, page_size: int = 1, need_sort: bool, device: str = "cpu") -> Any:
    """``kvpool.impl.TokenToKVPoolAllocator`` in checked mode."""
    from kvpool.impl import TokenToKVPoolAllocator

    return TokenToKVPoolAllocator(size, _dtype(), device, None, need_sort, checked=True)


def kvpool_paged(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    """``kvpool.impl.PagedTokenToKVPoolAllocator`` in checked mode."""
    from kvpool.impl import PagedTokenToKVPoolAllocator

    return PagedTokenToKVPoolAllocator(
        size, page_size, _dtype(), device, None, need_sort, checked=True
    )


def kvpool_token_unchecked(
    *, size: int, page_size: int = 1, need_sort: bool, device: str = "cpu"
) -> Any:
    """``kvpool.impl.TokenToKVPoolAllocator`` in unchecked (production) mode."""
    from kvpool.impl import TokenToKVPoolAllocator

    return TokenToKVPoolAllocator(size, _dtype(), device, None, need_sort, checked=False)


def kvpool_paged_unchecked(
    *, size: int, page_size: int, need_sort: bool, device: str = "cpu"
) -> Any:
    """``kvpool.impl.PagedTokenToKVPoolAllocator`` in unchecked (production) mode."""
    from kvpool.impl import PagedTokenToKVPoolAllocator

    return PagedTokenToKVPoolAllocator(
        size, page_size, _dtype(), device, None, need_sort, checked=False
    )


kvpool_token.kvpool_capabilities = TOKEN  # type: ignore[attr-defined]
kvpool_token_unchecked.kvpool_capabilities = TOKEN.replace(checked=False)  # type: ignore[attr-defined]
kvpool_paged.kvpool_capabilities = PAGED.replace(page_sizes=(1, 4, 32))  # type: ignore[attr-defined]
kvpool_paged_unchecked.kvpool_capabilities = PAGED.replace(  # type: ignore[attr-defined]
    page_sizes=(1, 4, 32), checked=False
)


# -- SGLang 0.5.23 -------------------------------------------------------------------------------
def _sglang() -> Any:
    from ...peers.peer_import import load_sglang_allocators

    return load_sglang_allocators()


def sglang_token(*, size: int, page_size: int = 1, need_sort: bool, device: str = "cpu") -> Any:
    """SGLang 0.5.23 ``TokenToKVPoolAllocator`` (kvcache=None)."""
    return _sglang().TokenToKVPoolAllocator(size, _dtype(), device, None, need_sort)


def sglang_paged(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    """SGLang 0.5.23 ``PagedTokenToKVPoolAllocator`` (kvcache=None, naive CPU kernels)."""
    return _sglang().PagedTokenToKVPoolAllocator(size, page_size, _dtype(), device, None, need_sort)


sglang_token.kvpool_capabilities = declared_by_registry(  # type: ignore[attr-defined]
    TOKEN, "sglang-token", own=False)
sglang_paged.kvpool_capabilities = declared_by_registry(  # type: ignore[attr-defined]
    PAGED.replace(page_sizes=(1, 4, 16)), "sglang-paged", own=False
)
sglang_token.kvpool_probe = sglang_paged.kvpool_probe = _sglang  # type: ignore[attr-defined]


# -- vLLM 0.33.0 (through kvpool.oracle.peers.adapters) ---------------------------------------
def vllm_block_pool(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    """vLLM 0.33.0's ``BlockPool`` through
    ``kvpool.oracle.peers.adapters.VllmBlockPoolAllocator``."""
    from ...peers.adapters import VllmBlockPoolAllocator

    return VllmBlockPoolAllocator(size, page_size, device)


def _vllm() -> Any:
    from ...peers.peer_import import load_vllm_block_pool

    return load_vllm_block_pool()


def _vllm_base() -> Capabilities:
    from ...peers.adapters import VLLM_BASE

    return VLLM_BASE


vllm_block_pool.kvpool_capabilities = declared_by_registry(  # type: ignore[attr-defined]
    _vllm_base(), "vllm", own=False)
vllm_block_pool.kvpool_probe = _vllm  # type: ignore[attr-defined]


# -- kvcached 0.1.6 (through kvpool.oracle.peers.kvcached_import) ----------------------------
def _kvcached() -> Any:
    from ...peers.kvcached_import import load_kvcached_allocators

    return load_kvcached_allocators()


def _kvcache(size: int, page_size: int) -> Any:
    from types import SimpleNamespace

    from ...peers.kvcached_import import new_manager

    return SimpleNamespace(kvcached_allocator=new_manager(size, page_size))


def kvcached_token(*, size: int, page_size: int = 1, need_sort: bool, device: str = "cpu") -> Any:
    """kvcached 0.1.6 ``ElasticTokenToKVPoolAllocator`` over a fresh ``KVCacheManager``."""
    return _kvcached().token(size, _dtype(), device, _kvcache(size, 1), need_sort)


def kvcached_paged(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    """kvcached 0.1.6 ``ElasticPagedTokenToKVPoolAllocator`` over a fresh ``KVCacheManager``."""
    kvcache = _kvcache(size, page_size)
    return _kvcached().paged(size, page_size, _dtype(), device, kvcache, need_sort)


# What the Elastic classes have: alloc / free / counts, free groups (SGLang's base class), clear.
# Not declared: alloc_extend / alloc_decode (Triton kernels, GPU only); segment frees (SGLang's
# base class has them, but the oracle frees segments of rows that alloc_extend builds, which is
# off: undeclared rather than declared and never run); merge_and_sort_free (a no-op in the paged
# class); resize(config) (the base class's; kvcached resizes through KVCacheManager.resize); the
# capacity hooks (the base class's, which need pydantic: see SGL-HOOKS-IMPORT); need_sort
# (kvcached keeps its own free lists).
KVCACHED_BASE = {
    "kvcached-token": TOKEN.replace(
        need_sort=(False,), segments="none", merge=False, resize=False, capacity_hooks=False,
        capacity_context=False,
    ),
    "kvcached-paged": PAGED.replace(
        page_sizes=(1, 4, 16), need_sort=(False,), extend=False, segments="none", merge=False,
        resize=False, capacity_hooks=False, capacity_context=False,
    ),
}
kvcached_token.kvpool_capabilities = declared_by_registry(  # type: ignore[attr-defined]
    KVCACHED_BASE["kvcached-token"], "kvcached-token", own=False)
kvcached_paged.kvpool_capabilities = declared_by_registry(  # type: ignore[attr-defined]
    KVCACHED_BASE["kvcached-paged"], "kvcached-paged", own=False)
kvcached_token.kvpool_probe = kvcached_paged.kvpool_probe = _kvcached  # type: ignore[attr-defined]


# -- resolution ----------------------------------------------------------------------------------
def expand(spec: str | None) -> list[str]:
    """Target strings for a CLI argument: the family's aliases expanded (its registry
    record's), comma lists split; none: the record's default target."""
    out: list[str] = []
    for part in (spec or RECORD.default_target).split(","):
        out += RECORD.aliases.get(part.strip(), [part.strip()])
    return out


def load_target(
    spec: str | Callable[..., Any], caps: Capabilities | None = None, *, device: str = "cpu"
) -> Target:
    """Resolve ``module:factory`` (or a factory object) to a :class:`Target`.

    Its capabilities: ``caps`` if given, else the factory's declaration, where a declaration
    that names some fields only (``Capabilities(checked=X)``) or none takes the others as
    inferred from one instance built on ``device`` (:mod:`.inference`; the inferences become
    the target's ``notes``). Raises :class:`TargetError` with a one-line reason when it cannot
    be imported, :class:`~.inference.FactoryError` when a factory not declaring every field
    cannot be built or lacks a required method.
    """
    if callable(spec):
        factory = spec
        path = f"{spec.__module__}:{spec.__qualname__}"
    else:
        module_name, sep, attr = spec.partition(":")
        if not sep or not module_name or not attr:
            raise TargetError(f"target {spec!r} is not of the form module:factory")
        try:
            module = importlib.import_module(module_name)
        except Exception as err:
            raise TargetError(
                f"cannot import {module_name!r}: {type(err).__name__}: {err}"
            ) from err
        found: Any = module
        for part in attr.split("."):
            found = getattr(found, part, None)
            if found is None:
                raise TargetError(f"{module_name!r} has no attribute {attr!r}")
        if not callable(found):
            raise TargetError(f"{spec!r} is not callable")
        factory, path = found, spec
    notes: list[str] = []
    if caps is None:
        try:
            caps = declared_capabilities(factory)
        except TypeError as err:
            raise TargetError(str(err)) from None
    if caps is None or not caps.complete:
        from .inference import infer  # the fields a partial declaration leaves out

        caps, notes = infer(factory, device=device, declared=caps)
    return Target(factory, caps, path, notes)


def probe(target: Target) -> None:
    """Raise :class:`TargetError` when the target's peer library cannot be imported here."""
    probe_peer(target.factory, target.path)
