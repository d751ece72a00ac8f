"""The parts of SGLang's allocator surface that do not touch the free lists.

Capacity hooks (``CAP-1``, ``CAP-2``), kvcache delegation and the identity transfer
translation (``LIFE-3``), shared by both torch allocators as a mixin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from kvpool.spec.census import decode_capacity_ok, eviction_shortfall
from kvpool.spec.model import TreeCache


@dataclass(frozen=True)
class EvictRequest:
    """What ``evict_for_alloc`` is asked for: the fields of SGLang 0.5.23's ``EvictParams``
    (a cache reads them by name, so no SGLang import is needed)."""

    num_tokens: int = 0
    swa_num_tokens: int = 0
    mamba_num: int = 0


class SglangSurface:
    """Mixin: needs ``size``, ``_kvcache`` and ``available_size()`` from the allocator."""

    size: int
    _kvcache: Any

    def available_size(self) -> int:
        raise NotImplementedError

    @property
    def size_full(self) -> int:
        """Slots of the full-attention pool: ``size`` for a single pool."""
        return self.size

    def get_kvcache(self) -> Any:
        """The KV cache object given to the constructor."""
        return self._kvcache

    def translate_kv_indices_for_transfer(self, kv_indices: torch.Tensor) -> torch.Tensor:
        """Identity: slot ids address the buffers directly (``LIFE-3``)."""
        return kv_indices

    def get_cpu_copy(self, indices: Any, *args: Any, **kwargs: Any) -> Any:
        """Delegates to the KV cache; NotImplementedError without one."""
        if self._kvcache is None:
            raise NotImplementedError("get_cpu_copy needs a kvcache")
        return self._kvcache.get_cpu_copy(indices, *args, **kwargs)

    def load_cpu_copy(self, kv_cache_cpu: Any, indices: Any, *args: Any, **kwargs: Any) -> Any:
        """Delegates to the KV cache; NotImplementedError without one."""
        if self._kvcache is None:
            raise NotImplementedError("load_cpu_copy needs a kvcache")
        return self._kvcache.load_cpu_copy(kv_cache_cpu, indices, *args, **kwargs)

    # -- capacity hooks (CAP-*) ------------------------------------------------------------
    def evict_to_free_tokens(self, tree_cache: TreeCache | None, num_tokens: int) -> None:
        """Ask ``tree_cache`` to evict ``num_tokens - available_size()`` if positive (``CAP-1``).

        A cache that offers SGLang's ``evict_for_alloc`` is asked with an :class:`EvictRequest`
        (``EvictParams(num_tokens=shortfall)``); one that says it does not share prefixes
        (``supports_prefix_sharing()`` false) is not asked; the spec's protocol gets
        ``evict(shortfall)``.
        """
        if tree_cache is None:
            return
        sharing = getattr(tree_cache, "supports_prefix_sharing", None)
        if sharing is not None and not sharing():
            return
        shortfall = eviction_shortfall(num_tokens, self.available_size())
        if shortfall == 0:
            return
        evict_for_alloc = getattr(tree_cache, "evict_for_alloc", None)
        if evict_for_alloc is not None:
            evict_for_alloc(EvictRequest(num_tokens=shortfall))
        else:
            tree_cache.evict(shortfall)

    def check_decode_capacity(self, *, num_tokens: int, tree_cache: TreeCache | None,
                              requests: Any = None, spec_algorithm: Any = None) -> bool:
        """Evict for ``num_tokens``, then whether they fit (``CAP-2``). ``requests`` and
        ``spec_algorithm`` (SGLang's request-level context) do not change a single pool's
        demand and are accepted for its scheduler's call."""
        self.evict_to_free_tokens(tree_cache, num_tokens)
        fits: bool = decode_capacity_ok(num_tokens, self.available_size())
        return fits
