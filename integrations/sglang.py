"""kvpool's allocators as SGLang allocators, built on the installed SGLang's own base class.

:class:`TokenToKVPoolAllocator` and :class:`PagedTokenToKVPoolAllocator` subclass both the
matching :mod:`kvpool.impl` class and SGLang's ``BaseTokenToKVPoolAllocator``. kvpool supplies
what touches the free lists (:data:`KVPOOL_OWNS`: allocation, every kind of free, free groups,
staging, capacity, the census, the layouts and checked mode); every other attribute of the
installed SGLang's base class -- the scheduler-facing hooks such as ``create_prefill_budget``,
``evict_to_free_tokens``, ``check_decode_capacity``, ``prealloc_fits`` -- is SGLang's own, so a
hook that a new SGLang release adds is inherited, not copied.

Debug mode: SGLang's switches mean SGLang's checks (:mod:`kvpool.integrations.sglang_debug`):
``SGLANG_DEBUG_MEMORY_POOL`` (SGLang's own reading of the variable) sets each allocator's
assignable ``debug_mode``, which runs SGLang 0.5.23's debug asserts at the same calls, and
``SGLANG_INVARIANT_CHECK`` runs the hybrid allocator's invariant checks. kvpool's own
``checked=True`` (off unless asked for) is the stricter mode. Every caller error is a
:class:`ContractAssertionError`: a ``ContractViolation`` naming its clause that is also an
``AssertionError``, so SGLang code written for its debug asserts catches it.

Switching SGLang to kvpool (:func:`install`) replaces the token, paged and hybrid (SWA) classes
where SGLang constructs its allocators (``sglang.srt.mem_cache.kv_cache_configurator``); call it
at the top level of the launch script, before the engine starts, so that SGLang's spawned
scheduler processes, which re-import the main module, run it too. Importing this module imports
SGLang.

Tested with SGLang :data:`TESTED_SGLANG_VERSIONS`; on another version the base class is checked
(:func:`incompatibilities`) and an incompatible one raises :class:`UnsupportedSGLangVersion`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import inspect
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from kvpool import impl
from kvpool.impl import PagedTokenToKVPoolAllocator as _ImplPaged
from kvpool.spec.errors import ContractViolation
from sglang.srt.mem_cache.allocator.base import BaseTokenToKVPoolAllocator
from sglang.srt.mem_cache.allocator.base import BaseTokenToKVPoolAllocator as _Base
from sglang.srt.utils import get_bool_env_var

from .sglang_debug import PAGED_DEBUG_CHECKS, ContractAssertionError, DebugSwitch

__all__ = [
    "KVPOOL_OWNS",
    "TESTED_SGLANG_VERSIONS",
    "ContractAssertionError",
    "PagedTokenToKVPoolAllocator",
    "TokenToKVPoolAllocator",
    "UnsupportedSGLangVersion",
    "follow_sglang",
    "incompatibilities",
    "install",
    "installed",
    "uninstall",
    "using_kvpool",
]

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


def _check_sglang(version: str, base: type) -> None:
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


_check_sglang(_installed_version(), BaseTokenToKVPoolAllocator)


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


_saved: dict[str, Any] = {}


def _replaced() -> dict[str, type]:
    """SGLang's class names at the construction site and kvpool's class for each."""
    from .sglang_hybrid import SWATokenToKVPoolAllocator

    return {"TokenToKVPoolAllocator": TokenToKVPoolAllocator,
            "PagedTokenToKVPoolAllocator": PagedTokenToKVPoolAllocator,
            "SWATokenToKVPoolAllocator": SWATokenToKVPoolAllocator}


def install() -> None:
    """Make SGLang construct kvpool's allocators (idempotent).

    Replaces ``TokenToKVPoolAllocator``, ``PagedTokenToKVPoolAllocator`` and (hybrid SWA models)
    ``SWATokenToKVPoolAllocator`` in SGLang's construction module; the other composites
    (pure-SWA, unified, HiSparse, Mamba) keep SGLang's own.
    """
    module = importlib.import_module(CONSTRUCTION_MODULE)
    for name, cls in _replaced().items():
        current = getattr(module, name)
        if current is not cls:
            _saved[name] = current
            setattr(module, name, cls)


def uninstall() -> None:
    """Restore SGLang's own classes (no-op when not installed)."""
    module = importlib.import_module(CONSTRUCTION_MODULE)
    for name, original in list(_saved.items()):
        setattr(module, name, original)
        del _saved[name]


def installed() -> bool:
    """Whether SGLang currently constructs kvpool's allocators."""
    module = importlib.import_module(CONSTRUCTION_MODULE)
    return all(getattr(module, name) is cls for name, cls in _replaced().items())


def __getattr__(name: str) -> Any:
    """``SWATokenToKVPoolAllocator``: the hybrid class of :mod:`.sglang_hybrid` (imported on
    first use: that module builds on this one)."""
    if name == "SWATokenToKVPoolAllocator":
        return _replaced()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@contextlib.contextmanager
def using_kvpool() -> Iterator[None]:
    """``install()`` for the duration of a ``with`` block, then ``uninstall()``."""
    install()
    try:
        yield
    finally:
        uninstall()
