"""Import SGLang 0.5.23's HiSparse allocators (``sglang.srt.mem_cache.allocator.hisparse``) on a
CPU-only machine, and the KV pool object they are built with.

``hisparse.py`` imports ``DeepSeekV4TokenToKVPool`` / ``HiSparseC4DevicePool``
(``mem_cache/deepseek_v4_memory_pool.py``) and ``HiSparseDSATokenToKVPool``
(``mem_cache/hisparse_memory_pool.py``), whose own imports pull in the model configs, the
KV-cache kernels and the attention layers -- none of which the allocators call. They need only
the types (annotations; the DeepSeek V4 class's ``isinstance`` checks) and the interface of the
pool they receive (``register_mapping``, ``_translate_loc_to_hisparse_device``).
:func:`load_sglang_hisparse` first tries the real modules; where one fails to import it
registers a stand-in holding empty classes of those names (taken out of ``sys.modules`` again
once ``hisparse.py`` holds them, so that a later import of the real module is not shadowed),
then imports SGLang's unmodified ``hisparse.py`` (after
:func:`~kvpool.oracle.peers.peer_import.load_sglang_allocators`, whose placeholders cover the
rest). :func:`make_hisparse_kvcache` is the pool handed to the
allocator: it keeps the registered mapping and translates through it as SGLang's
``HiSparseDSATokenToKVPool`` does.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from ...peers.peer_import import PeerUnavailable, load_sglang_allocators

HISPARSE_MODULE = "sglang.srt.mem_cache.allocator.hisparse"
STAND_INS = {
    "sglang.srt.mem_cache.deepseek_v4_memory_pool": ("DeepSeekV4TokenToKVPool",
                                                     "HiSparseC4DevicePool"),
    "sglang.srt.mem_cache.hisparse_memory_pool": ("HiSparseDSATokenToKVPool",),
}

_cached: types.ModuleType | None = None


def _stand_in(name: str, classes: tuple[str, ...]) -> types.ModuleType:
    """A module holding an empty class for each name in ``classes``."""
    module = types.ModuleType(name)
    for cls in classes:
        setattr(module, cls, type(cls, (), {"__module__": name}))
    module.__kvpool_stand_in__ = True  # type: ignore[attr-defined]
    return module


def load_sglang_hisparse() -> types.ModuleType:
    """SGLang's ``sglang.srt.mem_cache.allocator.hisparse`` module (imported once, then cached).

    Raises:
        PeerUnavailable: sglang is not installed or ``hisparse.py`` fails to import.
    """
    global _cached
    if _cached is not None:
        return _cached
    load_sglang_allocators()
    made: dict[str, types.ModuleType] = {}
    for name, classes in STAND_INS.items():
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except Exception:  # its import chain needs torchvision, transformers, kernels, ...
            sys.modules.pop(name, None)
            sys.modules[name] = made[name] = _stand_in(name, classes)
    try:
        _cached = importlib.import_module(HISPARSE_MODULE)
    except Exception as exc:
        raise PeerUnavailable(
            f"cannot import {HISPARSE_MODULE} ({type(exc).__name__}: {exc}); "
            "expected sglang==0.5.23 installed with --no-deps") from exc
    finally:  # hisparse.py holds the classes: a later import of the real module may succeed
        for name, module in made.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]
    return _cached


class HiSparseKVCache:
    """The KV pool object of SGLang's ``HiSparseTokenToKVPoolAllocator``: no buffers; it keeps
    the mapping ``register_mapping`` hands it and reads it as SGLang's
    ``HiSparseDSATokenToKVPool`` does (``mapping[indices]``)."""

    full_to_hisparse_device_index_mapping: Any = None

    def register_mapping(self, mapping: Any) -> None:
        self.full_to_hisparse_device_index_mapping = mapping

    def _translate_loc_to_hisparse_device(self, indices: Any) -> Any:
        assert self.full_to_hisparse_device_index_mapping is not None
        return self.full_to_hisparse_device_index_mapping[indices]

    def translate_loc_to_hisparse_device(self, indices: Any) -> Any:
        return self._translate_loc_to_hisparse_device(indices)

    def translate_loc_from_full_to_compressed(self, indices: Any) -> Any:
        return indices


def make_hisparse_kvcache() -> HiSparseKVCache:
    """A fresh :class:`HiSparseKVCache`."""
    return HiSparseKVCache()


def sglang_hisparse_dsv4(*, size: int, size_swa: int, page_size: int, size_hisparse: int,
                         hisparse_page_size: int, c4_logical_size: int,
                         need_sort: bool = False, device: str = "cpu") -> Any:
    """SGLang 0.5.23's ``DeepSeekV4HiSparseTokenToKVPoolAllocator`` over its
    ``SWATokenToKVPoolAllocator`` (the logical side, as SGLang's configurator builds it), on a
    stand-in pool that is both a ``DeepSeekV4TokenToKVPool`` and SGLang's ``BaseSWAKVPool``
    (:func:`kvpool.oracle.peers.peer_swa.make_swa_kv_pool`) and holds a stand-in C4 device pool
    (``size_hisparse`` slots of ``hisparse_page_size``) translating as SGLang's
    ``HiSparseC4DevicePool`` does. Raises PeerUnavailable as :func:`load_sglang_hisparse`."""
    import torch

    from ...peers.peer_swa import load_sglang_swa, make_swa_kv_pool

    module = load_sglang_hisparse()
    swa = load_sglang_swa()
    dsv4 = module  # hisparse.py's own names for the DeepSeek V4 pool classes

    class C4Pool(dsv4.HiSparseC4DevicePool):  # type: ignore[misc, name-defined]
        full_to_hisparse_device_index_mapping: Any = None

        def __init__(self) -> None:  # the real pool sizes KV buffers; none here
            self.size, self.page_size = size_hisparse, hisparse_page_size
            self.dtype, self.device, self.compress_ratio = torch.float16, device, 4

        def register_mapping(self, mapping: Any) -> None:
            self.full_to_hisparse_device_index_mapping = mapping

        def translate_loc_from_full_to_compressed(self, full: Any) -> Any:
            return full[(full + 1) % self.compress_ratio == 0] // self.compress_ratio

        def translate_loc_to_hisparse_device(self, compressed: Any) -> Any:
            return self.full_to_hisparse_device_index_mapping[compressed].to(torch.int32)

        def _translate_loc_to_hisparse_device(self, compressed: Any) -> Any:
            return self.full_to_hisparse_device_index_mapping[compressed]

    class DSV4Pool(type(make_swa_kv_pool()), dsv4.DeepSeekV4TokenToKVPool):  # type: ignore[misc, name-defined]
        pass

    kvcache = DSV4Pool()
    kvcache.c4_kv_pool = C4Pool()
    kvcache.c4_logical_size = c4_logical_size
    logical = swa.SWATokenToKVPoolAllocator(size, size_swa, page_size, torch.float16, device,
                                            kvcache, need_sort)
    return module.DeepSeekV4HiSparseTokenToKVPoolAllocator(logical)
