"""Import SGLang 0.5.23's real allocators on a CPU-only machine, without its frontend.

``sglang/__init__.py`` imports the whole frontend (IPython, HF patches, ...), and the allocator
modules import a handful of third-party packages at module level that the allocators never call.
This module loads them anyway, in order:

1. import the real ``torch`` (before any placeholder finder exists);
2. append an allow-list meta-path finder that answers with a permissive placeholder module for
   ``triton``, ``PIL``, ``starlette``, ``requests``, ``orjson``, ``psutil``, ``pybase64``,
   ``zmq``, ``pydantic_core`` and ``packaging`` -- only when the real module cannot be found, and
   for submodules only when the top-level module is itself a placeholder;
3. register a bare ``sglang`` package from ``importlib.util.find_spec`` (its ``__init__`` is not
   run) unless ``sglang`` is already imported;
4. import ``sglang.srt.mem_cache.allocator``.

:func:`load_sglang_runtime` goes further, to SGLang's scheduler-side memory modules (radix cache,
memory pools, allocation helpers, ``ScheduleBatch``): it needs SGLang's CPU-installable runtime
dependencies (the ``sglang`` extra) and adds a placeholder only for ``torchvision`` (PyPI's build
needs a CUDA torch).

``SGLANG_DEBUG_MEMORY_POOL`` defaults to ``"0"`` when unset (set it before the first call to get
SGLang's debug asserts).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
import types
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from .availability import PeerNotInstalled, PeerUnavailable, classify, may_skip

__all__ = [
    "PLACEHOLDER_NAMES",
    "Dummy",
    "PeerNotInstalled",
    "PeerUnavailable",
    "PlaceholderLoader",
    "PlaceholderModule",
    "classify",
    "load_sglang_allocators",
    "load_sglang_runtime",
    "may_skip",
]

ALLOCATOR_MODULE = "sglang.srt.mem_cache.allocator"

# Top-level modules that SGLang's allocator import chain reads at import time but never calls.
PLACEHOLDER_NAMES: frozenset[str] = frozenset(
    {
        "triton",
        "PIL",
        "starlette",
        "requests",
        "orjson",
        "psutil",
        "pybase64",
        "zmq",
        "pydantic_core",
        "packaging",
    }
)

# Added for the scheduler-side chain (``load_sglang_runtime``): PyPI's torchvision is a CUDA build
# tied to a CUDA torch (its ops do not load beside a CPU torch).
RUNTIME_PLACEHOLDER_NAMES: frozenset[str] = frozenset({"torchvision"})
RUNTIME_MODULES = (
    "sglang.srt.mem_cache.memory_pool",
    "sglang.srt.mem_cache.radix_cache",
    "sglang.srt.mem_cache.common",
    "sglang.srt.mem_cache.allocation",
    "sglang.srt.managers.schedule_batch",
    "sglang.srt.mem_cache.kv_cache_configurator",
)

_lock = threading.Lock()
_cached: types.ModuleType | None = None


class _DummyMeta(type):
    """Metaclass that makes the ``Dummy`` class itself permissive (attributes, ``[]``, ``|``)."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return cls

    def __getitem__(cls, item: object) -> Any:
        return cls

    def __or__(cls, other: object) -> Any:
        return cls

    def __ror__(cls, other: object) -> Any:
        return cls

    def __bool__(cls) -> bool:
        return False

    def __iter__(cls) -> Iterator[Any]:
        return iter(())


class Dummy(metaclass=_DummyMeta):
    """Stands in for any attribute of a placeholder module.

    Works as a value, a callable, a decorator (called with one callable it returns it unchanged),
    a base class (accepts any class keywords) and a generic alias (``X[...]``, ``X | Y``). It is
    falsy and iterates as empty; dunder lookups raise ``AttributeError``.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is Dummy and len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]  # used as a decorator: keep the decorated object
        return super().__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __init_subclass__(cls, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return Dummy

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Dummy

    def __getitem__(self, item: object) -> Any:
        return Dummy

    def __bool__(self) -> bool:
        return False

    def __iter__(self) -> Iterator[Any]:
        return iter(())


class PlaceholderModule(types.ModuleType):
    """A module whose every non-dunder attribute is ``Dummy``; a package with no files."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Dummy


class PlaceholderLoader(importlib.abc.Loader):
    """Creates a ``PlaceholderModule`` (``__path__ = []``, ``__version__ = "0.0.0"``) for a spec."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = PlaceholderModule(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0"  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _PlaceholderFinder(importlib.abc.MetaPathFinder):
    """Answers for allow-listed top-level names only when no real module exists.

    Appended to ``sys.meta_path``, so every real finder runs first. Submodules are answered only
    when their top-level module is a placeholder: a real package with a missing submodule is left
    to fail as it would without this finder.
    """

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.loader = PlaceholderLoader()

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        top = fullname.partition(".")[0]
        if top not in self.names or top in sys.stdlib_module_names:
            return None
        if fullname != top:
            parent = sys.modules.get(top)
            if not isinstance(parent, PlaceholderModule):
                return None
        return importlib.machinery.ModuleSpec(fullname, self.loader, is_package=True)


def _install_finder(names: frozenset[str] = PLACEHOLDER_NAMES) -> None:
    """Append the placeholder finder once, or widen the one there to ``names`` (idempotent)."""
    for finder in sys.meta_path:
        if isinstance(finder, _PlaceholderFinder):
            finder.names = finder.names | names
            return
    sys.meta_path.append(_PlaceholderFinder(names))


def _import_without_placeholders(name: str) -> None:
    """Import ``name`` with no placeholder visible (torch's inductor must see no triton)."""
    hidden = {k: m for k, m in sys.modules.items() if isinstance(m, PlaceholderModule)}
    finders = [f for f in sys.meta_path if isinstance(f, _PlaceholderFinder)]
    for key in hidden:
        del sys.modules[key]
    for finder in finders:
        sys.meta_path.remove(finder)
    try:
        importlib.import_module(name)
    finally:
        sys.modules.update(hidden)
        sys.meta_path.extend(finders)


def _register_bare_sglang() -> None:
    """Put a bare ``sglang`` package into ``sys.modules`` without running its ``__init__``.

    Raises:
        PeerUnavailable: sglang is not installed.
    """
    if "sglang" in sys.modules:
        return
    spec = importlib.util.find_spec("sglang")
    if spec is None or spec.submodule_search_locations is None:
        raise PeerNotInstalled(
            "sglang is not installed; install it with `pip install --no-deps sglang==0.5.23` "
            "(see benchmarks/install_peers.sh)"
        )
    pkg = types.ModuleType("sglang")
    pkg.__path__ = list(spec.submodule_search_locations)
    pkg.__file__ = spec.origin
    pkg.__spec__ = spec
    pkg.__package__ = "sglang"
    sys.modules["sglang"] = pkg


def load_sglang_allocators() -> types.ModuleType:
    """Return SGLang's ``sglang.srt.mem_cache.allocator`` module (imported once, then cached).

    Effect: imports torch, installs the placeholder finder (a no-op for modules that are really
    installed), registers a bare ``sglang`` package and sets ``SGLANG_DEBUG_MEMORY_POOL`` to
    ``"0"`` if it is unset. Safe to call repeatedly and from several threads.

    Raises:
        PeerUnavailable: sglang is not installed, or the allocator module fails to import (the
            message names the underlying error).
    """
    global _cached
    if _cached is not None:
        return _cached
    with _lock:
        if _cached is not None:
            return _cached
        import torch  # noqa: F401  -- the real torch, before any placeholder finder exists

        os.environ.setdefault("SGLANG_DEBUG_MEMORY_POOL", "0")
        _install_finder()
        _register_bare_sglang()
        try:
            module = importlib.import_module(ALLOCATOR_MODULE)
        except PeerUnavailable:
            raise
        except Exception as exc:
            raise classify(
                f"cannot import {ALLOCATOR_MODULE} ({type(exc).__name__}: {exc}); "
                "expected sglang==0.5.23 installed with --no-deps",
                exc,
            ) from exc
        _cached = module
        return module


def load_sglang_module(name: str) -> types.ModuleType:
    """SGLang's ``sglang.srt.mem_cache.allocator.<name>`` module (``"mamba"``,
    ``"page_interleave"``, ...), imported on a CPU after :func:`load_sglang_allocators`.

    Raises:
        PeerNotInstalled: sglang is not installed.
        PeerUnavailable: the module fails to import (the message names the underlying error).
    """
    load_sglang_allocators()
    module = f"{ALLOCATOR_MODULE}.{name}"
    try:
        return importlib.import_module(module)
    except PeerUnavailable:
        raise
    except Exception as exc:
        raise classify(f"cannot import {module} ({type(exc).__name__}: {exc}); "
                       "expected sglang==0.5.23", exc) from exc

def load_sglang_runtime() -> dict[str, types.ModuleType]:
    """Import SGLang 0.5.23's scheduler-side memory modules (:data:`RUNTIME_MODULES`) on CPU.

    Needs SGLang's CPU-installable runtime dependencies (``pip install -e ".[sglang]"``); only
    GPU-bound modules get placeholders: the allocator chain's, plus ``torchvision``. Imports
    torch's inductor first with no placeholder visible (SGLang applies ``torch.compile`` at import
    time), then the modules. Returns them by name.

    Raises:
        PeerUnavailable: a module fails to import (the message names the underlying error).
    """
    modules = {}
    with warnings.catch_warnings():  # SGLang's import-time warnings (CUDA-only features)
        warnings.simplefilter("ignore")
        _import_without_placeholders("torch._inductor.compile_fx")
        load_sglang_allocators()
        _install_finder(PLACEHOLDER_NAMES | RUNTIME_PLACEHOLDER_NAMES)
        for name in RUNTIME_MODULES:
            try:
                modules[name] = importlib.import_module(name)
            except Exception as exc:
                raise classify(
                    f"cannot import {name} ({type(exc).__name__}: {exc}); install SGLang's CPU "
                    'runtime dependencies with pip install -e ".[sglang]"',
                    exc,
                ) from exc
    return modules


VLLM_PLACEHOLDERS = (
    "vllm.config",
    "vllm.v1.request",
    "vllm.v1.utils",
    "vllm.multimodal",
    "vllm.v1.metrics.stats",
)


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
    """Return vLLM's ``BlockPool`` class on a CPU-only machine, without vLLM's engine.

    A meta-path finder inserted first answers with placeholder modules for the vLLM-internal
    modules that drag in transformers / fastapi / openai (``VLLM_PLACEHOLDERS`` and everything
    below them); ``BlockPool``'s allocation paths never call them. Shared by the benchmarks and
    the oracle's vLLM adapter (``kvpool.oracle.peers.adapters``).

    Raises:
        PeerUnavailable: vllm is not installed or ``block_pool`` fails to import.
    """
    import sys

    import torch  # noqa: F401  -- real torch first

    if importlib.util.find_spec("vllm") is None:
        raise PeerNotInstalled("vllm is not installed (benchmarks/install_peers.sh)")
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
        raise classify(
            f"cannot import vllm.v1.core.block_pool ({type(exc).__name__}: {exc})", exc
        ) from exc
    finally:
        sys.meta_path.extend(finders)
        for name, placeholder in hidden.items():
            sys.modules.setdefault(name, placeholder)
    return module.BlockPool
