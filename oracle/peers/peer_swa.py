"""Import SGLang 0.5.23's ``SWATokenToKVPoolAllocator`` on a CPU-only machine.

``allocator/swa.py`` imports ``BaseSWAKVPool`` from ``mem_cache/base_swa_memory_pool.py``, whose
own import of ``mem_cache/memory_pool.py`` pulls in the model configs (``transformers``), the
KV-cache Triton kernels and the attention layers -- none of which the allocator calls. The
allocator needs only the *type* (an ``isinstance`` check in its constructor) and the interface
of the KV pool object it receives (``full_kv_pool``, ``swa_kv_pool``, ``swa_req_ring_size``,
``register_mapping``, ``translate_loc_from_full_to_swa``).

:func:`load_sglang_swa` first tries the real module; when that import fails it registers a
stand-in ``sglang.srt.mem_cache.base_swa_memory_pool`` holding an abstract ``BaseSWAKVPool`` with
the same class attributes and abstract methods, then imports SGLang's unmodified ``swa.py``
(after :func:`~kvpool.oracle.peers.peer_import.load_sglang_allocators`, whose placeholders cover the
rest). :class:`SwaKVPool` is the KV pool object handed to the allocator: it records the mapping
and translates through it exactly as SGLang's ``SWAKVPool`` does.
"""

from __future__ import annotations

import abc
import importlib
import sys
import types
from typing import Any

from .peer_import import PeerUnavailable, load_sglang_allocators

SWA_MODULE = "sglang.srt.mem_cache.allocator.swa"
POOL_MODULE = "sglang.srt.mem_cache.base_swa_memory_pool"

_cached: types.ModuleType | None = None


def _stand_in_pool_module() -> types.ModuleType:
    """A ``base_swa_memory_pool`` with SGLang 0.5.23's ``BaseSWAKVPool`` interface only."""
    module = types.ModuleType(POOL_MODULE)

    class BaseSWAKVPool(abc.ABC):
        """Stand-in of SGLang's ABC (the same class attributes and abstract methods)."""

        swa_kv_pool: Any = None
        swa_req_ring_size: int | None = None
        request_window: Any = None
        swa_uses_full_indices: bool = False

        @abc.abstractmethod
        def register_mapping(self, full_to_swa_index_mapping: Any) -> None: ...

        @abc.abstractmethod
        def translate_loc_from_full_to_swa(self, kv_indices: Any) -> Any: ...

    module.BaseSWAKVPool = BaseSWAKVPool  # type: ignore[attr-defined]
    module.__kvpool_stand_in__ = True  # type: ignore[attr-defined]
    return module


def load_sglang_swa() -> types.ModuleType:
    """SGLang's ``sglang.srt.mem_cache.allocator.swa`` module (imported once, then cached).

    Raises:
        PeerUnavailable: sglang is not installed or ``swa.py`` fails to import.
    """
    global _cached
    if _cached is not None:
        return _cached
    load_sglang_allocators()
    if POOL_MODULE not in sys.modules:
        try:
            importlib.import_module(POOL_MODULE)
        except Exception:  # its import chain needs transformers, Triton kernels, ...
            sys.modules.pop(POOL_MODULE, None)
            sys.modules[POOL_MODULE] = _stand_in_pool_module()
    try:
        _cached = importlib.import_module(SWA_MODULE)
    except Exception as exc:
        raise PeerUnavailable(
            f"cannot import {SWA_MODULE} ({type(exc).__name__}: {exc}); "
            "expected sglang==0.5.23 installed with --no-deps") from exc
    return _cached


def pool_is_stand_in() -> bool:
    """Whether ``BaseSWAKVPool`` is the stand-in (the real module could not be imported)."""
    return bool(getattr(sys.modules.get(POOL_MODULE), "__kvpool_stand_in__", False))


def make_swa_kv_pool() -> Any:
    """A KV pool object for SGLang's allocator: an instance of its ``BaseSWAKVPool``.

    It has no buffers (``full_kv_pool`` / ``swa_kv_pool`` are None, which the allocators accept);
    ``register_mapping`` keeps the mapping tensor and ``translate_loc_from_full_to_swa`` reads it
    as SGLang's ``SWAKVPool`` does (``mapping[kv_indices].to(torch.int32)``).
    """
    base = load_sglang_swa().BaseSWAKVPool

    class SwaKVPool(base):  # type: ignore[misc, valid-type]
        full_kv_pool = None
        swa_kv_pool = None
        swa_req_ring_size = None
        full_to_swa_index_mapping = None
        # No KV buffers, so no CPU copy, whichever BaseSWAKVPool this derives from (the real
        # one, once SGLang's runtime is loaded, has KVCache's raising methods): the oracle's
        # data plane then copies through its own stores in every process.
        get_cpu_copy = None
        load_cpu_copy = None

        def __init__(self) -> None:  # the real KVCache.__init__ sizes buffers; none here
            pass

        def register_mapping(self, full_to_swa_index_mapping: Any) -> None:
            self.full_to_swa_index_mapping = full_to_swa_index_mapping

        def translate_loc_from_full_to_swa(self, kv_indices: Any) -> Any:
            """The mapping indexed by ``kv_indices``, in its dtype (int64), as SGLang's."""
            assert self.full_to_swa_index_mapping is not None
            return self.full_to_swa_index_mapping[kv_indices]

        def get_state_buf_infos(self) -> Any:
            raise NotImplementedError

    for name in list(getattr(SwaKVPool, "__abstractmethods__", ())):
        if not callable(getattr(SwaKVPool, name, None)):
            raise PeerUnavailable(f"BaseSWAKVPool needs {name}")
    SwaKVPool.__abstractmethods__ = frozenset()
    return SwaKVPool()
