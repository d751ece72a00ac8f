"""kvpool's unified full + SWA memory pool: one byte buffer, two end sub-pools, shared ids.

Drop-in for SGLang 0.5.23's ``UnifiedSWATokenToKVPoolAllocator`` (same methods, arguments and
results), call for call equal to the spec model :class:`kvpool.spec.unified.UnifiedSWAModel`:
the full sub-pool grows down from the buffer's top and owns the virtual page ids, the SWA
sub-pool grows up from the reserved sink and binds the same ids to its own pages (``UNI-10``);
capacity is counted in bytes (``UNI-7`` .. ``UNI-9``, :mod:`.unified_gate`); eager compaction
places pages exactly as SGLang does, lazy compaction reuses holes as SGLang does
(:mod:`.unified_end`). Host bookkeeping is numpy, vectorised over pages and tokens; results are
int64 tensors on ``device``, None on a shortage (nothing changed).

Checked mode (``checked=True``, the default) validates every id passed in before anything
changes: a freed or never-allocated id freed or translated raises
``ContractViolation("UNI-11")``, a ``free_full`` of a page whose SWA side is bound ``UNI-10``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch
from kvpool.spec import unified_layout as ul
from kvpool.spec.errors import ContractViolation

from .native_ops import native_enabled
from .unified_end import EndSubPool
from .unified_external import ExternalKVStore
from .unified_frees import UnifiedFrees, host_ids
from .unified_gate import CapacityGate
from .unified_last_locs import check_last_locs
from .unified_rows import decode_starts, extend_rows, into, new_page_counts, sink_rows
from .unified_store import DEFAULT_LAYOUT, SideLayout, UnifiedByteStore, page_mover
from .unified_views import EvictParams, UnifiedViews

__all__ = ["UnifiedSWAAllocator"]


class UnifiedSWAAllocator(UnifiedFrees, UnifiedViews, CapacityGate):
    """A full + SWA composite over one ``total_bytes`` buffer (see the module docstring).

    Args:
        total_bytes: size of the shared buffer.
        page_size: tokens per page.
        full_layout / swa_layout: each side's token entry (default 32 bytes: one layer, one
            head of dim 8, fp16 K and V).
        lazy: lazy compaction (holes kept, compacted on demand) instead of eager.
        full_max_total_num_tokens / swa_max_total_num_tokens: the static per-side caps
            (``UNI-9``); default: each side's allocatable pages.
        device: where the byte store and the returned tensors live.
        checked: validate ids (module docstring).
        need_sort: accepted for SGLang's signature; unused.
        state_entry_bytes: bytes of one state slot of a state end sharing the buffer (its row
            lies in the reserved sink too, ``UNI-2``); 0 without one.
        kv_store: an external byte store to drive instead of building a
            :class:`~.unified_store.UnifiedByteStore` (SGLang's ``UnifiedSWAKVPool``: its
            ``full_kv_pool`` / ``swa_kv_pool`` move and zero pages with their own
            ``move_physical_pages`` / ``zero_physical_pages``, :mod:`.unified_external`); its
            sub-pools must lay pages out with the layouts' entry bytes.

    Raises:
        ContractViolation: ``UNI-2`` when a side has no allocatable page above the sink.
    """

    def __init__(self, total_bytes: int, page_size: int = 1, *,
                 full_layout: SideLayout = DEFAULT_LAYOUT,
                 swa_layout: SideLayout = DEFAULT_LAYOUT,
                 lazy: bool = False, full_max_total_num_tokens: int | None = None,
                 swa_max_total_num_tokens: int | None = None, device: str = "cpu",
                 checked: bool = True, need_sort: bool = False, kv_store: Any = None,
                 state_entry_bytes: int = 0) -> None:
        self.page_size, self.lazy, self.checked = page_size, lazy, checked
        self.lazy_compaction = lazy
        # the frees' page ids by the compiled loops where built (KVPOOL_NATIVE=0: numpy only)
        self.compiled = native_enabled()
        self.device = torch.device(device)
        self._on_cpu = self.device.type == "cpu"
        self.total_bytes = total_bytes
        full_entry, swa_entry = full_layout.entry_bytes, swa_layout.entry_bytes
        self.floor_bytes = ul.reserved_floor_bytes(max(full_entry, swa_entry),
                                                   state_entry_bytes, page_size)
        geometry = []
        for name, entry in (("full", full_entry), ("swa", swa_entry)):
            pages = ul.num_pages(total_bytes, entry, page_size)
            min_page = ul.min_page_index(self.floor_bytes, entry, page_size)
            if pages <= min_page:
                raise ContractViolation("UNI-2", f"{name}: {pages} pages, none above the sink "
                                                 f"(the first allocatable page is {min_page})")
            geometry.append((pages, min_page, page_size * entry))
        # an external store serves the byte store's interface (unified_external)
        self.store = (UnifiedByteStore(total_bytes, page_size, full_layout, swa_layout, device)
                      if kv_store is None else cast(UnifiedByteStore,
                                                    ExternalKVStore(kv_store, device)))
        (f_pages, f_min, f_bytes), (s_pages, s_min, s_bytes) = geometry
        self.full = EndSubPool("full", False, f_min, f_pages, f_bytes, f_pages, lazy,
                               self._mover(self.store.full_kv_pool))
        self.swa = self._swa_pool(s_min, s_pages, s_bytes, f_pages, lazy,
                                  self._mover(self.store.swa_kv_pool))
        self.full_max_tokens = (full_max_total_num_tokens if full_max_total_num_tokens
                                is not None else (f_pages - f_min) * page_size)
        self.swa_max_tokens = (swa_max_total_num_tokens if swa_max_total_num_tokens
                               is not None else (s_pages - s_min) * page_size)
        self._gate: Callable[[], bool] | None = None
        self._group: dict[str, list[np.ndarray]] | None = None
        self._offsets = np.arange(page_size, dtype=np.int64)
        self._mark = np.zeros(f_pages, dtype=bool)
        self.free_virtual = np.empty(0, dtype=np.int64)
        self.clear()

    def _swa_pool(self, min_page: int, num_pages: int, page_bytes: int, num_virtual: int,
                  lazy: bool, mover: Callable[[np.ndarray, np.ndarray], None]) -> Any:
        """The SWA sub-pool: an end growing up from the sink (a tri-pool's float overrides)."""
        return EndSubPool("swa", True, min_page, num_pages, page_bytes, num_virtual, lazy, mover)

    def _mover(self, kv_pool: Any) -> Callable[[np.ndarray, np.ndarray], None]:
        return page_mover(kv_pool, self.device, self.page_size)

    # -- lifecycle --

    @property
    def size(self) -> int:
        """``min`` of the two static caps, in tokens."""
        return min(self.full_max_tokens, self.swa_max_tokens)

    @property
    def size_full(self) -> int:
        return self.full_max_tokens

    @property
    def size_swa(self) -> int:
        return self.swa_max_tokens

    def clear(self) -> None:
        """Back to empty (``UNI-12``): nothing live, no hole, no open group, the virtual ids
        ``[min_page, pages)`` of the full side free in ascending order."""
        self.full.clear()
        self.swa.clear()
        self._group = None
        self.free_virtual = np.arange(self.full.min_page, self.full.num_pages, dtype=np.int64)

    def get_kvcache(self) -> UnifiedByteStore:
        """The byte store (``full_kv_pool`` / ``swa_kv_pool``)."""
        return self.store

    def moves_blocked(self) -> bool:
        """Whether a move gate forbids page copies now."""
        return self._gate is not None and not self._gate()

    def set_disagg_move_gate(self, gate: Callable[[], bool]) -> None:
        """Install a move gate: while ``gate()`` is False no page moves (``UNI-6``).

        Raises:
            ContractViolation: ``UNI-6`` under eager compaction (its frees move pages at once).
        """
        if not self.lazy:
            raise ContractViolation("UNI-6", "a move gate needs lazy compaction")
        self._gate = gate

    set_host_transfer_move_gate = set_disagg_move_gate

    # -- allocation --

    def _out(self, values: np.ndarray) -> torch.Tensor:
        out = torch.from_numpy(values)
        return out if self._on_cpu else out.to(self.device)

    def _reserve(self, num_pages: int, swa_pages: int) -> np.ndarray | None:
        """Gate and take ``num_pages`` virtual pages bound on the full side, the last
        ``swa_pages`` of them on the SWA side too (``UNI-8``); fresh pages zeroed. None, with
        nothing changed, when they do not fit even after compaction."""
        if num_pages == 0:
            return self.free_virtual[:0]
        ps = self.page_size
        if not self.ensure_capacity(num_pages * ps, swa_pages * ps):
            return None
        virtual = self.free_virtual[:num_pages]
        self.free_virtual = self.free_virtual[num_pages:]
        for pool, kv, count in ((self.full, self.store.full_kv_pool, num_pages),
                                (self.swa, self.store.swa_kv_pool, swa_pages)):
            if count:
                phys = pool.take(count)
                pool.bind(virtual[num_pages - count:], phys, pool.last_run)
                if pool.last_run is not None:
                    kv.zero_page_run(*pool.last_run)
                else:
                    kv.zero_physical_pages(phys)
        return virtual

    def alloc(self, need_size: int) -> torch.Tensor | None:
        """``need_size`` virtual token ids (whole pages), bound on both sides (``UNI-8``);
        None when they do not fit.

        Raises:
            ContractViolation: ``UNI-8`` when ``need_size`` is not whole pages.
        """
        ps = self.page_size
        if need_size < 0 or need_size % ps:
            raise ContractViolation("UNI-8", f"need_size {need_size} is not whole pages")
        pages = self._reserve(need_size // ps, need_size // ps)
        if pages is None:
            return None
        if ps == 1:
            return self._out(pages.copy())
        return self._out((pages[:, None] * ps + self._offsets).reshape(-1))

    def _extend(self, prefix: np.ndarray, seq: np.ndarray, last: np.ndarray,
                swa_pages: Callable[[int], int] | None = None) -> np.ndarray | None:
        ps = self.page_size
        total_pages = int(new_page_counts(prefix, seq, ps).sum())
        swa = total_pages if swa_pages is None else swa_pages(total_pages)
        pages = self._reserve(total_pages, swa)
        if pages is None:
            return None
        return extend_rows(pages, prefix, seq, last, ps, self._offsets)

    def alloc_extend(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                     seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor,
                     extend_num_tokens: int) -> torch.Tensor | None:
        """Grow each request from ``prefix_lens[i]`` to ``seq_lens[i]`` tokens (``UNI-8``): the
        rest of the prefix's last page continues ``last_loc[i]``, new pages in request order.
        None when the new pages do not fit.

        Raises:
            ContractViolation: ``UNI-8`` when ``extend_num_tokens`` is not the tokens asked;
                checked, ``EXTEND-1``/``-2``/``-3``/``-8`` for a ``last_loc`` that does not
                continue its prefix on a live page (:func:`.unified_last_locs.check_last_locs`).
        """
        prefix, seq = host_ids(prefix_lens_cpu), host_ids(seq_lens_cpu)
        lens = seq - prefix
        if int(lens.sum()) != extend_num_tokens or (len(lens) and lens.min() < 0):
            raise ContractViolation("UNI-8", f"extend_num_tokens {extend_num_tokens} is not "
                                             "the sum of seq_lens - prefix_lens >= 0")
        last = host_ids(last_loc)
        if self.checked:
            check_last_locs(prefix, seq, last, self.page_size, self.full.v2p)
        out = self._extend(prefix, seq, last)
        return None if out is None else self._out(out)

    def alloc_extend_swa_tail(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                              seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                              last_loc: torch.Tensor, extend_num_tokens: int,
                              swa_tail_len: int) -> torch.Tensor | None:
        """One request grows as ``alloc_extend`` does, but only the new pages holding its last
        ``swa_tail_len`` positions get an SWA page (``UNI-8``, a decode node's prealloc).

        Raises:
            ContractViolation: ``UNI-8`` for more than one request or ``swa_tail_len`` outside
                ``0..extend_num_tokens``; checked, ``EXTEND-*`` for its ``last_loc`` (as
                :meth:`alloc_extend`).
        """
        prefix, seq = host_ids(prefix_lens_cpu), host_ids(seq_lens_cpu)
        if len(prefix) != 1 or not 0 <= swa_tail_len <= extend_num_tokens or int(
                seq[0] - prefix[0]) != extend_num_tokens:
            raise ContractViolation("UNI-8", f"swa_tail_len {swa_tail_len} outside "
                                             f"0..{extend_num_tokens} or not one request")
        if self.checked:
            check_last_locs(prefix, seq, host_ids(last_loc), self.page_size, self.full.v2p)
        ps = self.page_size
        first_new, end = -(-int(prefix[0]) // ps), -(-int(seq[0]) // ps)
        tail = end - max(first_new, (int(seq[0]) - swa_tail_len) // ps) if swa_tail_len else 0
        out = self._extend(prefix, seq, host_ids(last_loc), lambda _: tail)
        return None if out is None else self._out(out)

    def alloc_decode(self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                     last_loc: torch.Tensor) -> torch.Tensor | None:
        """One token per request at position ``seq_lens[i] - 1`` (``UNI-8``): a new page where
        that position starts one, else ``last_loc[i] + 1``. None when the pages do not fit.

        Raises:
            ContractViolation: checked, ``DECODE-1``/``-2``/``-3``/``-8`` for a ``last_loc``
                that does not continue its request on a live page.
        """
        ps = self.page_size
        seq = host_ids(seq_lens_cpu)
        if self.checked:
            check_last_locs(seq - 1, seq, host_ids(last_loc), ps, self.full.v2p, "DECODE")
        if ps == 1:
            pages = self._reserve(len(seq), len(seq))
            return None if pages is None else self._out(pages.copy())
        starts = decode_starts(seq, ps)
        count = int(np.count_nonzero(starts))
        pages = self._reserve(count, count)
        if pages is None:
            return None
        if count == len(seq):  # every request opens a page
            return self._out(pages * ps)
        out = host_ids(last_loc) + 1
        out[starts] = pages * ps
        return self._out(out)

    # -- translation --

    def _translate(self, pool: EndSubPool, ids_in: torch.Tensor) -> torch.Tensor:
        ids = host_ids(ids_in)
        ps = self.page_size
        if self.checked:
            self._check_live(ids // ps if ps > 1 else ids)
            return self._out(pool.rows(ids, ps))
        return self._out(sink_rows(pool, ids, ps))

    def translate_kv_indices_for_transfer(self, kv_indices: torch.Tensor) -> torch.Tensor:
        """Full-side physical rows of virtual token ids (``UNI-11``), int64.

        Raises:
            ContractViolation: checked, ``UNI-11`` when an id's page is not live.
        """
        return self._translate(self.full, kv_indices)

    def translate_kv_loc(self, loc: torch.Tensor, *, out: torch.Tensor | None = None
                         ) -> torch.Tensor:
        """The full side's read translation (as ``translate_kv_indices_for_transfer``);
        ``out=`` is written in place."""
        return into(self._translate(self.full, loc), out)

    def translate_write_loc(self, loc: torch.Tensor, *, out: torch.Tensor | None = None,
                            out_width: int | None = None) -> torch.Tensor:
        """The full side's write translation (no context parallelism: the read one)."""
        return self.translate_kv_loc(loc, out=out)

    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor, *,
                                       out: torch.Tensor | None = None) -> torch.Tensor:
        """SWA-side physical rows of virtual token ids; a released SWA page reads as the sink
        row 0 (``UNI-10``, ``UNI-11``).

        Raises:
            ContractViolation: checked, ``UNI-11`` when an id's page is not live.
        """
        rows = self._translate(self.swa, kv_indices)
        if out is None:
            return rows
        out.copy_(rows.reshape(out.shape))
        return out

    translate_swa_indices_for_transfer = translate_loc_from_full_to_swa

    # -- capacity hooks --

    def evict_to_free_tokens(self, tree_cache: Any, num_tokens: int, *,
                             swa_num_tokens: int | None = None) -> bool | None:
        """Ask ``tree_cache`` to evict what the allocation of ``num_tokens`` needs
        (``reclaim_plan``; ``evict_for_alloc``), then gate it, compacting under lazy compaction
        when that makes it fit (``UNI-8``). None without a prefix-sharing cache or when even
        everything evictable would not make it fit; else whether it fits now."""
        if tree_cache is None or not tree_cache.supports_prefix_sharing():
            return None
        required_swa = num_tokens if swa_num_tokens is None else swa_num_tokens
        self._flush_group()
        plan = self.reclaim_plan(num_tokens, required_swa,
                                 full_evictable_tokens=tree_cache.full_evictable_size(),
                                 swa_evictable_tokens=tree_cache.swa_evictable_size())
        if plan is None:
            return None
        if plan != (0, 0):
            tree_cache.evict_for_alloc(
                EvictParams(num_tokens=plan[0], swa_num_tokens=plan[1]),
                allocation_reclaim_satisfied=lambda: self.reclaim_plan(
                    num_tokens, required_swa) == (0, 0))
        return self.ensure_capacity(num_tokens, required_swa)

    def check_decode_capacity(self, *, num_tokens: int, tree_cache: Any, requests: Any = None,
                              spec_algorithm: Any = None) -> bool:
        """Whether the next decode step's ``num_tokens`` fit after evicting what the cache
        may give (``evict_to_free_tokens``, then ``available_size() >= num_tokens``)."""
        self.evict_to_free_tokens(tree_cache, num_tokens)
        return self.available_size() >= num_tokens

    def flush_opportunistic(self) -> int:
        """A non-urgent compaction of both sides (lazy, no move gate closed); the page copies
        made."""
        if not self.lazy or self.moves_blocked():
            return 0
        return self.full.flush(urgent=False) + self.swa.flush(urgent=False)
