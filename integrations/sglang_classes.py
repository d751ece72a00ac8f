"""kvpool's token and paged allocators as SGLang allocators, on the installed SGLang's base class.

:class:`TokenToKVPoolAllocator` and :class:`PagedTokenToKVPoolAllocator` subclass both the
matching :mod:`kvpool.impl` class and SGLang's ``BaseTokenToKVPoolAllocator``; :func:`follow_sglang`
takes every attribute of SGLang's classes that kvpool does not own (:data:`KVPOOL_OWNS`).
Importing this module checks the installed SGLang (:func:`incompatibilities`; an untested,
incompatible version raises :class:`UnsupportedSGLangVersion`). The public names are
re-exported by :mod:`kvpool.integrations.sglang`, which also switches SGLang to them.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import warnings
from collections.abc import Callable
from typing import Any

from kvpool import impl
from kvpool.impl import PagedTokenToKVPoolAllocator as _ImplPaged
from kvpool.spec.errors import ContractViolation
from sglang.srt.mem_cache.allocator.base import BaseTokenToKVPoolAllocator
from sglang.srt.mem_cache.allocator.base import BaseTokenToKVPoolAllocator as _Base
from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator as _SglangPaged
from sglang.srt.mem_cache.allocator.token import TokenToKVPoolAllocator as _SglangToken
from sglang.srt.utils import get_bool_env_var

from .sglang_debug import PAGED_DEBUG_CHECKS, ContractAssertionError, DebugSwitch

TESTED_SGLANG_VERSIONS = ("0.5.23",)
CONSTRUCTION_MODULE = "sglang.srt.mem_cache.kv_cache_configurator"
DEBUG_ENV = "SGLANG_DEBUG_MEMORY_POOL"

# What kvpool implements over its own free lists; every other name of SGLang's base is SGLang's.
KVPOOL_OWNS: frozenset[str] = frozenset({
    "__init__", "clear", "resize", "alloc", "alloc_extend", "alloc_decode", "free",
    "free_full", "free_segment", "free_segments", "free_page_ids", "free_group_begin",
    "free_group_end", "merge_and_sort_free", "available_size", "get_all_free_pages",
    "free_pages", "release_pages", "verify_byte_accounting", "debug_print", "get_cpu_copy",
    "load_cpu_copy", "check_invariants",
})


class UnsupportedSGLangVersion(ImportError):
    """The installed SGLang is untested and its allocator base class changed incompatibly."""


def incompatibilities(base: type) -> list[str]:
    """How ``base`` (an SGLang ``BaseTokenToKVPoolAllocator``) departs from what kvpool serves.

    Reports abstract methods kvpool does not implement, and parameters of a kvpool-owned method
    on ``base`` that kvpool's method does not accept. Empty when compatible.
    """
    problems = [f"abstract method {name!r} is not implemented by kvpool"
                for name in sorted(getattr(base, "__abstractmethods__", ()))
                if name not in KVPOOL_OWNS]
    for name in sorted(KVPOOL_OWNS & set(vars(base))):
        theirs, ours = vars(base)[name], getattr(impl.PagedTokenToKVPoolAllocator, name, None)
        if not (inspect.isfunction(theirs) and inspect.isfunction(ours)):
            continue
        ours_params = inspect.signature(ours).parameters
        if name == "__init__" or any(p.kind is p.VAR_KEYWORD for p in ours_params.values()):
            continue  # constructors differ by class; **kwargs accepts anything
        variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        missing = [p.name for p in list(inspect.signature(theirs).parameters.values())[1:]
                   if p.name not in ours_params and p.kind not in variadic]
        problems += [f"{name}() takes {p!r}, which kvpool's {name}() does not" for p in missing]
    return problems


def check_sglang(version: str, base: type) -> None:
    """Raise UnsupportedSGLangVersion for an untested, incompatible SGLang; warn if untested."""
    if version in TESTED_SGLANG_VERSIONS:
        return
    problems = incompatibilities(base)
    tested = ", ".join(TESTED_SGLANG_VERSIONS)
    if problems:
        raise UnsupportedSGLangVersion(
            f"kvpool.integrations.sglang is tested with SGLang {tested}; the installed SGLang "
            f"{version} changed BaseTokenToKVPoolAllocator incompatibly: " + "; ".join(problems))
    warnings.warn(f"kvpool.integrations.sglang is tested with SGLang {tested}, not {version}; "
                  "its allocator base class looks compatible", stacklevel=3)


def _sglang_errors(method: Callable[..., Any]) -> Callable[..., Any]:
    """Re-raise a ContractViolation as a ContractAssertionError (same clause and detail)."""
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except ContractViolation as exc:
            if isinstance(exc, AssertionError):
                raise
            raise ContractAssertionError(exc.clause, exc.detail) from exc
    return wrapper


def follow_sglang(owns: frozenset[str], *sources: type,
                  skip: frozenset[str] = frozenset()) -> Callable[[type], type]:
    """Class decorator: take every attribute of SGLang's ``sources`` (the first that defines a
    name wins) that is not in ``owns`` or ``skip`` (SGLang's hooks win over kvpool's versions),
    and wrap kvpool's methods in ``owns`` so caller errors are also AssertionErrors."""
    def decorate(cls: type) -> type:
        taken: set[str] = set()
        for source in sources:
            for name, value in vars(source).items():
                dunder = name.startswith("__") and name.endswith("__")
                if (name in owns or name in skip or name in taken or dunder
                        or name.startswith("_abc")):
                    continue
                taken.add(name)
                setattr(cls, name, value)
        for name in owns - {"__init__"}:
            value = inspect.getattr_static(cls, name, None)
            if inspect.isfunction(value):
                setattr(cls, name, _sglang_errors(value))
        return cls
    return decorate


_follow_sglang = follow_sglang(KVPOOL_OWNS, BaseTokenToKVPoolAllocator)


def _installed_version() -> str:
    """SGLang's distribution version, or ``"unknown"`` (a source tree without metadata)."""
    try:
        return importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


check_sglang(_installed_version(), BaseTokenToKVPoolAllocator)


@_follow_sglang
class TokenToKVPoolAllocator(DebugSwitch, impl.TokenToKVPoolAllocator, _Base):  # type: ignore[misc]
    """SGLang's ``TokenToKVPoolAllocator`` on kvpool's FIFO slot list (same signature).

    ``debug_mode`` follows ``SGLANG_DEBUG_MEMORY_POOL`` (SGLang 0.5.23's token allocator has no
    debug checks, so it adds none); ``checked=True`` is kvpool's checked mode.
    """

    def __init__(self, size: int, dtype: Any, device: Any, kvcache: Any, need_sort: bool,
                 *, checked: bool = False) -> None:
        super().__init__(size, dtype, device, kvcache, need_sort, checked=checked)
        self.debug_mode = get_bool_env_var(DEBUG_ENV)


@_follow_sglang
class PagedTokenToKVPoolAllocator(DebugSwitch, _ImplPaged, _Base):  # type: ignore[misc]
    """SGLang's ``PagedTokenToKVPoolAllocator`` on kvpool's LIFO page stack (same signature).

    ``debug_mode`` follows ``SGLANG_DEBUG_MEMORY_POOL`` and runs SGLang's paged debug checks
    (:data:`~kvpool.integrations.sglang_debug.PAGED_DEBUG_CHECKS`); ``checked=True`` is
    kvpool's checked mode.
    """

    DEBUG_CHECKS = PAGED_DEBUG_CHECKS

    def __init__(self, size: int, page_size: int, dtype: Any, device: Any, kvcache: Any,
                 need_sort: bool, *, checked: bool = False) -> None:
        super().__init__(size, page_size, dtype, device, kvcache, need_sort, checked=checked)
        self.debug_mode = get_bool_env_var(DEBUG_ENV)


# SGLang's code tells its allocators apart by class (``isinstance``): each kvpool class counts
# as the SGLang class it stands for (SGLang's allocator classes are ABCs: a registration).
_SglangToken.register(TokenToKVPoolAllocator)
_SglangPaged.register(PagedTokenToKVPoolAllocator)
