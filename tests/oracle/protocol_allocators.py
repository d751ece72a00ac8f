"""Allocators for the tree-cache protocols, the capacity hooks' keywords and failing calls.

Correct ones speak another SGLang release's protocol (``evict_for_alloc(EvictParams)``, the
old ``evict(int)``), or evict more than the shortfall (contract-conformant, not the reference
order). ``raising(call)`` builds a spec-backed allocator whose ``call`` raises on its first use
with non-empty input, so every call kind's generated repro can be checked.
"""

from __future__ import annotations

from typing import Any

import torch
from kvpool.oracle.engine.capabilities import PAGED
from kvpool.oracle.families.single.treecache import EvictParams
from spec_torch import SpecTorchAllocator


class EvictForAlloc(SpecTorchAllocator):
    """SGLang 0.5.23's form: ask ``supports_prefix_sharing()``, then ``evict_for_alloc``."""

    def evict_to_free_tokens(self, tree_cache: Any, num_tokens: int) -> None:
        if tree_cache is None or not tree_cache.supports_prefix_sharing():
            return
        shortfall = num_tokens - self.available_size()
        if shortfall > 0:
            tree_cache.evict_for_alloc(EvictParams(num_tokens=shortfall))


class EvictParamsObject(SpecTorchAllocator):
    """``evict(EvictParams)``: any object with ``num_tokens`` is accepted by the cache."""

    def evict_to_free_tokens(self, tree_cache: Any, num_tokens: int) -> None:
        shortfall = num_tokens - self.available_size()
        if tree_cache is not None and shortfall > 0:
            tree_cache.evict(EvictParams(num_tokens=shortfall))


class EvictEverythingAsked(SpecTorchAllocator):
    """Correct in contract order: asks the cache for all ``num_tokens`` (more than needed)."""

    def evict_to_free_tokens(self, tree_cache: Any, num_tokens: int) -> None:
        if tree_cache is not None and num_tokens > self.available_size():
            tree_cache.evict_for_alloc(EvictParams(num_tokens=num_tokens))


class EvictTooLittle(SpecTorchAllocator):
    """CAP-1 in any order: evicts one page's worth less than the shortfall."""

    def evict_to_free_tokens(self, tree_cache: Any, num_tokens: int) -> None:
        shortfall = num_tokens - self.available_size() - self.page_size
        if tree_cache is not None and shortfall > 0:
            tree_cache.evict(shortfall)


class NoCapacityContext(SpecTorchAllocator):
    """``check_decode_capacity`` without SGLang 0.5.23's ``requests=`` / ``spec_algorithm=``."""

    def check_decode_capacity(self, *, num_tokens: int, tree_cache: Any) -> bool:  # type: ignore[override]
        self.evict_to_free_tokens(tree_cache, num_tokens)
        return self.available_size() >= num_tokens


def _factory(cls: type[SpecTorchAllocator], name: str, **caps: Any) -> Any:
    def factory(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
        return cls(size, page_size, need_sort, device, paged=True)

    factory.__name__ = factory.__qualname__ = name
    factory.kvpool_capabilities = PAGED.replace(**caps)  # type: ignore[attr-defined]
    return factory


evictforalloc = _factory(EvictForAlloc, "evictforalloc")
evictparams = _factory(EvictParamsObject, "evictparams")
evicteverything = _factory(EvictEverythingAsked, "evicteverything", reference_order=False)
evicttoolittle = _factory(EvictTooLittle, "evicttoolittle", reference_order=False)
nocontext = _factory(NoCapacityContext, "nocontext")
nocontext_declared = _factory(NoCapacityContext, "nocontext_declared", capacity_context=False)

# Calls that get a target-side raise planted, with an argument that makes the call non-trivial.
RAISING_CALLS = (
    "alloc",
    "alloc_extend",
    "alloc_decode",
    "free",
    "free_segment",
    "free_segments",
    "free_group_begin",
    "free_group_end",
    "merge_and_sort_free",
    "clear",
    "resize",
    "evict_to_free_tokens",
    "check_decode_capacity",
    "translate_kv_indices_for_transfer",
)


def _planted(name: str) -> Any:
    def method(self: SpecTorchAllocator, *args: Any, **kwargs: Any) -> Any:
        values = [a for a in (*args, *kwargs.values()) if isinstance(a, (torch.Tensor, int))]
        busy = name not in ("alloc", "free", "free_segment") or any(
            (v.numel() if isinstance(v, torch.Tensor) else v) for v in values
        )
        if busy:
            raise RuntimeError(f"planted failure in {name}")
        return getattr(SpecTorchAllocator, name)(self, *args, **kwargs)

    return method


def raising(call: str) -> Any:
    """A module-level factory ``raising_<call>`` whose allocator raises in ``call``."""
    cls = type(f"Raising_{call}", (SpecTorchAllocator,), {call: _planted(call)})
    return _factory(cls, f"raising_{call}", checked=False)  # only valid calls raise


for _call in RAISING_CALLS:
    globals()[f"raising_{_call}"] = raising(_call)
