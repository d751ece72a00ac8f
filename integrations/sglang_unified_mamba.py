"""kvpool's unified full + Mamba pool as SGLang's ``UnifiedMambaTokenToKVPoolAllocator``.

:class:`UnifiedMambaTokenToKVPoolAllocator` is :class:`kvpool.impl.unified_mamba.
UnifiedMambaAllocator` with SGLang 0.5.23's constructor (``unified_buffer=``, ``kvcache=``, ...),
built over SGLang's own ``UnifiedKVPool`` and the ``HybridLinearKVPool`` that
``init_unified_mamba_pools`` builds: every full page copy and zeroing goes through its
``full_kv_pool`` (``move_physical_pages`` / ``zero_physical_pages``), every state slot copy
through its ``mamba_pool``, so SGLang's attention backends and Mamba layers read the bytes kvpool
placed. The state end is ``mamba_allocator``, a
:class:`~kvpool.integrations.sglang_state_end.SGLangStateEnd` that SGLang's request pool
(``UnifiedMambaSlotAllocator``) drives; ``full_attn_allocator`` answers what SGLang asks of the
full side (:class:`~kvpool.integrations.sglang_unified.SideTranslator`). kvpool owns the
allocation, frees, groups, translations, capacity views and compaction; the hooks of SGLang's
base class it does not define (the prefill budget, ``evict_to_free_tokens``,
``check_decode_capacity``, the prealloc checks, ...) are SGLang's own, as for SGLang's composite,
which inherits them too.

``install()`` (:mod:`kvpool.integrations.sglang`) makes SGLang's ``init_unified_mamba_pools``
build this class. Importing this module registers it as a virtual subclass of SGLang's
``UnifiedMambaTokenToKVPoolAllocator``, which SGLang's index translator, scheduler policy and
KV-cache configurator test for. Off the CPU and under decode context parallelism
(``attn_dcp_size > 1``) the class builds SGLang's own composite and warns
(:class:`~kvpool.integrations.sglang_fallback.SGLangWhereKvpoolCannot`).
"""

from __future__ import annotations

from typing import Any, cast

import torch
from kvpool.impl.unified_external import ExternalKVStore
from kvpool.impl.unified_mamba import UnifiedMambaAllocator
from sglang.srt.mem_cache.allocator.base import BaseTokenToKVPoolAllocator as _Base
from sglang.srt.mem_cache.allocator.unified_mamba import (
    UnifiedMambaTokenToKVPoolAllocator as _SglangUnifiedMamba,
)
from sglang.srt.runtime_context import get_parallel

from .sglang_fallback import SGLangWhereKvpoolCannot
from .sglang_state_end import SGLangStateEnd
from .sglang_unified import SideTranslator, sglang_layouts

__all__ = ["MAMBA_NOT_SERVED", "UnifiedMambaTokenToKVPoolAllocator"]

# Public names of SGLang 0.5.23's full + Mamba composite this class does not serve: none.
MAMBA_NOT_SERVED: frozenset[str] = frozenset()


class UnifiedMambaTokenToKVPoolAllocator(
        SGLangWhereKvpoolCannot, UnifiedMambaAllocator, _Base):  # type: ignore[misc]
    """SGLang's ``UnifiedMambaTokenToKVPoolAllocator`` on kvpool's full + Mamba pool (same
    signature; module docstring). ``checked`` (kvpool's id validation) is off unless asked for.
    Off the CPU or under decode context parallelism (``attn_dcp_size > 1``, for which SGLang's
    widens its full pages), SGLang's own composite is built (:class:`SGLangWhereKvpoolCannot`).

    Raises:
        ValueError: SGLang's pool places a sub-pool's pages other than kvpool's geometry (a
            fused draft region) or its full entries are not 32-byte aligned.
    """

    sglang_class = _SglangUnifiedMamba

    @classmethod
    def unserved(cls, kwargs: dict[str, Any]) -> str | None:
        dcp_size = int(get_parallel().attn_dcp_size)
        if dcp_size != 1:
            return f"decode context parallelism over {dcp_size} ranks widens the full pages"
        return super().unserved(kwargs)

    def __init__(self, *, unified_buffer: Any, kvcache: Any, device: str, page_size: int = 1,
                 need_sort: bool = False, forward_stream: Any = None,
                 lazy_compaction: bool = False, checked: bool = False) -> None:
        super().__init__(unified_buffer.total_bytes, page_size,
                         state_bytes=int(unified_buffer.spec("mamba").entry_bytes()),
                         full_layout=sglang_layouts(unified_buffer, ("full",))["full"],
                         lazy=lazy_compaction, device=device, checked=checked,
                         need_sort=need_sort, kv_store=kvcache)
        for name, pool, ps in (("full", self.full, page_size), ("mamba", self.state, 1)):
            slots, first = unified_buffer.max_slots(name), unified_buffer.min_slot_index(name)
            if slots // ps != pool.num_pages or -(-first // ps) != pool.min_page:
                raise ValueError(f"SGLang's {name} sub-pool: {slots} slots from {first}, "
                                 f"kvpool's {pool.num_pages} pages from {pool.min_page}")
        self.unified_buffer, self._kvcache, self.need_sort = unified_buffer, kvcache, need_sort
        self.external_store = cast(ExternalKVStore, self.store)  # built over kvcache
        self.dtype = unified_buffer.spec("full").get_dtype()
        self.full_attn_allocator = SideTranslator(self, self.full, swa=False)
        self.mamba_allocator = SGLangStateEnd(self)
        kvcache.full_kv_pool.host_transfer_translate = self.translate_kv_loc
        self.free_pages = torch.empty(0, dtype=torch.int64, device=device)  # SGLang's leak
        self.release_pages = torch.empty(0, dtype=torch.int64, device=device)  # checker's

    def get_kvcache(self) -> Any:
        """SGLang's ``HybridLinearKVPool`` this pool drives."""
        return self._kvcache

    def get_cpu_copy(self, indices: torch.Tensor, mamba_indices: Any = None,
                     req_pool_index: Any = None) -> Any:
        """SGLang's pool's retraction backup of the virtual tokens ``indices`` (translated to
        physical rows here) and of the state slots ``mamba_indices`` (the pool translates)."""
        return self._kvcache.get_cpu_copy(self.translate_kv_loc(indices.to(torch.int64)),
                                          mamba_indices=mamba_indices,
                                          req_pool_index=req_pool_index)

    def load_cpu_copy(self, kv_cache_cpu: Any, indices: torch.Tensor, mamba_indices: Any = None,
                      req_pool_index: Any = None) -> Any:
        """Write a :meth:`get_cpu_copy` result back through SGLang's pool."""
        return self._kvcache.load_cpu_copy(kv_cache_cpu,
                                           self.translate_kv_loc(indices.to(torch.int64)),
                                           mamba_indices=mamba_indices,
                                           req_pool_index=req_pool_index)

    def set_latest_forward_done_event(self, event: Any) -> None:
        """The latest forward's event: page and state copies and zeroing on a GPU wait for it."""
        self.external_store.set_forward_done_event(event)

    def set_inflight_forward(self, forward_done: Any, out_cache_loc_virtual: Any) -> None:
        """As :meth:`set_latest_forward_done_event` (every move waits for the forward)."""
        self.external_store.set_forward_done_event(forward_done)

    def prewarm_compaction(self) -> None:
        """On a GPU, launch each pool's copy once on the reserved sink slot 0 (onto itself), as
        SGLang does before sizing the KV cache; nothing on the host."""
        if self.device.type != "cuda":
            return
        sink = torch.zeros(1, dtype=torch.int64, device=self.device)
        self._kvcache.full_kv_pool.move_physical_pages(sink, sink, self.page_size)
        self._kvcache.mamba_pool.move_physical_pages(sink, sink, 1)

    def allocator_state_str(self) -> str:
        """One line: each end's live pages, holes and span."""
        return " ".join(f"{pool.name}: live={pool.live} holes={pool.num_holes()} "
                        f"span={pool.span()}" for pool in (self.full, self.state))

    def debug_print(self) -> str:
        return (f"#full-available={self.full_available_size()}, "
                f"#mamba-available={self.mamba_allocator.available_size()}")

    def mamba_full_cache_donor(self) -> UnifiedMambaTokenToKVPoolAllocator:
        """Itself: it flushes deferred full frees, bounds the full tokens before a state
        recheck and prepares state allocations (SGLang's ``MambaFullCacheDonor``)."""
        return self


# SGLang's index translator, scheduler policy and KV-cache configurator test for SGLang's class
# (``isinstance``): without this they would not translate kvpool's virtual ids nor charge its
# state slots' bytes.
_SglangUnifiedMamba.register(UnifiedMambaTokenToKVPoolAllocator)
