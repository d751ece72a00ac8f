"""kvpool's unified full + Mamba composite: one byte buffer, a state end and a full end.

Drop-in for SGLang 0.5.23's ``UnifiedMambaTokenToKVPoolAllocator`` (``SPEC.md`` §21, ``UMB-1``
.. ``UMB-8``): one buffer laid out as ``[ state (grows up from the sink, page size 1: one slot
one Mamba state) | full (grows down from the top, page_size tokens a page) ]``. Both members
are :class:`~.unified_end.EndSubPool` s over one byte store (eager or lazy compaction, SGLang's
placement) and each owns its own virtual ids: the token surface (``alloc``, ``alloc_extend``,
``alloc_decode``, frees, groups, translations) is the full end's alone; the state end is driven
by the request pool through :attr:`UnifiedMambaAllocator.mamba_allocator` (``alloc(n)``,
``free(slots)``, ``available_size()``) or :meth:`~UnifiedMambaAllocator.alloc_state` /
``free_state_slots``. An allocation short of room first compacts the *other* end (an urgent
flush of its holes, lazy and no move gate closed: SGLang's ``_relieve_for_alloc``), then
retries; a refusal (None) changes nothing else.

Checked mode (``checked=True``, the default) validates every caller input before anything
changes: a caller error raises ``ContractViolation("UMB-8")`` (:mod:`.unified_mamba_frees`).
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
from .unified_external import ExternalKVStore, external_state
from .unified_frees import host_ids
from .unified_last_locs import check_last_locs
from .unified_mamba_frees import UnifiedMambaFrees
from .unified_mamba_gate import UnifiedMambaGate
from .unified_mamba_views import MambaEndView, UnifiedMambaViews
from .unified_rows import decode_starts, extend_rows, new_page_counts
from .unified_slots import set_state_slots, take_state_slots
from .unified_store import DEFAULT_LAYOUT, KVSidePool, SideLayout, page_mover
from .unified_tri import DEFAULT_STATE_BYTES, StatePages

__all__ = ["UnifiedMambaAllocator", "UnifiedMambaStore"]


class UnifiedMambaStore:
    """The shared ``total_bytes`` buffer (zeroed) and its two views: ``full_kv_pool`` (K/V
    token entries, pages of ``page_size`` tokens) and ``mamba_pool`` (state slots)."""

    def __init__(self, total_bytes: int, page_size: int, full: SideLayout, state_bytes: int,
                 device: str = "cpu") -> None:
        self.total_bytes = total_bytes
        self.raw = torch.zeros(total_bytes, dtype=torch.uint8, device=device)
        self.full_kv_pool = KVSidePool(self.raw, "full", full, page_size)
        self.mamba_pool = StatePages(self.raw, state_bytes)


class UnifiedMambaAllocator(UnifiedMambaGate, UnifiedMambaFrees, UnifiedMambaViews):
    """A full + Mamba state composite over one ``total_bytes`` buffer (module docstring).

    Args:
        total_bytes: size of the shared buffer (SGLang's ``unified_buffer.total_bytes``).
        page_size: tokens per full page.
        state_bytes: bytes of one state slot (every Mamba layer's conv and temporal state).
        full_layout: a full token's entry (default 32 bytes: one layer, one head of dim 8).
        lazy: lazy compaction (holes kept, compacted on demand) instead of eager.
        device: where the byte store and the returned tensors live.
        checked: validate caller inputs (``UMB-8``).
        need_sort: accepted for SGLang's signature; unused.
        kv_store: an external byte store to drive instead of building a
            :class:`UnifiedMambaStore` (SGLang's ``HybridLinearKVPool`` of the unified pool: its
            ``full_kv_pool`` moves and zeroes pages with its own ``move_physical_pages`` /
            ``zero_physical_pages``, its ``mamba_pool`` copies state slots with its
            ``move_physical_pages``; :mod:`.unified_external`).

    Raises:
        ContractViolation: ``UMB-1`` when an end has no allocatable page above the sink.
    """

    store: UnifiedMambaStore

    def __init__(self, total_bytes: int, page_size: int = 1, *,
                 state_bytes: int = DEFAULT_STATE_BYTES,
                 full_layout: SideLayout = DEFAULT_LAYOUT, lazy: bool = False,
                 device: str = "cpu", checked: bool = True, need_sort: bool = False,
                 kv_store: Any = None) -> None:
        self.page_size, self.lazy, self.checked = page_size, lazy, checked
        self.lazy_compaction = lazy
        self.compiled = native_enabled()  # a free's pages by the compiled loops, where built
        self.device = torch.device(device)
        self.total_bytes, self.state_bytes = total_bytes, state_bytes
        entry = full_layout.entry_bytes
        self.entry_bytes = entry
        self.floor_bytes = ul.reserved_floor_bytes(entry, state_bytes, page_size)
        f_pages = ul.num_pages(total_bytes, entry, page_size)
        f_min = ul.min_page_index(self.floor_bytes, entry, page_size)
        s_slots = total_bytes // state_bytes
        s_min = ul.min_page_index(self.floor_bytes, state_bytes, 1)
        for name, pages, first in (("full", f_pages, f_min), ("state", s_slots, s_min)):
            if pages <= first:
                raise ContractViolation("UMB-1", f"{name}: {pages} pages, none above the sink "
                                                 f"(the first allocatable page is {first})")
        if kv_store is None:
            self.store = UnifiedMambaStore(total_bytes, page_size, full_layout, state_bytes,
                                           device)
            state_pool: Any = self.store.mamba_pool
        else:  # the owner's pools (unified_external)
            self.store = cast(UnifiedMambaStore,
                              ExternalKVStore(kv_store, device, sides=("full_kv_pool",)))
            state_pool = external_state(self.store, kv_store.mamba_pool)
        self.full = EndSubPool("full", False, f_min, f_pages, page_size * entry, f_pages, lazy,
                               page_mover(self.store.full_kv_pool, self.device, page_size))
        self.state = EndSubPool("state", True, s_min, s_slots, state_bytes, s_slots, lazy,
                                page_mover(state_pool, self.device, 1))
        self.max_full_slots = total_bytes // entry
        self._gates: dict[str, Callable[[], bool]] = {}
        self._offsets = np.arange(page_size, dtype=np.int64)
        self._init_frees(f_pages)
        self.free_virtual = np.empty(0, dtype=np.int64)
        self.free_state = np.empty(0, dtype=np.int64)
        self.mamba_allocator = MambaEndView(self)
        self.clear()

    # -- lifecycle and sizes (UMB-1) --

    def clear(self) -> None:
        """Back to empty (``UMB-1``): nothing live, no hole, no open group, each end's free
        ids ``[min_page, pages)`` in ascending hand-out order."""
        self.full.clear()
        self._reset_group(everything=True)
        self.free_virtual = np.arange(self.full.min_page, self.full.num_pages, dtype=np.int64)
        self.clear_state_slots()

    def clear_state_slots(self) -> None:
        """Every state slot free, no hole (SGLang's state-end ``clear``); the full end is left
        as it is."""
        self.state.clear()
        self.free_state = np.arange(self.state.min_page, self.state.num_pages, dtype=np.int64)

    @property
    def size(self) -> int:
        """``available_size()`` plus the live full tokens."""
        return self.available_size() + self.full.live * self.page_size

    @property
    def size_full(self) -> int:
        """Full token slots of the buffer less the sink slot (SGLang's ``max_slots - 1``)."""
        return self.max_full_slots - 1

    @property
    def draft_virtual_id_space(self) -> int:
        return self.size_full

    @property
    def size_mamba(self) -> int:
        """State slots of the buffer less the sink slot."""
        return self.state.num_pages - 1

    def get_kvcache(self) -> UnifiedMambaStore:
        """The byte store (``full_kv_pool`` / ``mamba_pool``)."""
        return self.store

    # -- hand-out --

    def _take_full(self, num_pages: int) -> np.ndarray | None:
        """``num_pages`` virtual pages bound on full, fresh pages zeroed (``UMB-2``); the
        capacity was checked (and relief run) by the caller; None without enough free ids."""
        if num_pages > len(self.free_virtual):
            return None
        virtual, self.free_virtual = (self.free_virtual[:num_pages],
                                      self.free_virtual[num_pages:])
        if num_pages:
            phys = self.full.take(num_pages)
            self.full.bind(virtual, phys, self.full.last_run)
            kv = self.store.full_kv_pool
            if self.full.last_run is not None:
                kv.zero_page_run(*self.full.last_run)
            else:
                kv.zero_physical_pages(phys)
        return virtual

    def _fits_full(self, num_tokens: int) -> bool:
        if num_tokens > self._full_now():
            self._relieve(self.state)
            return num_tokens <= self._full_now()
        return True

    def _out(self, values: np.ndarray) -> torch.Tensor:
        out = torch.from_numpy(values)
        return out if self.device.type == "cpu" else out.to(self.device)

    # -- token surface (UMB-2) --

    def alloc(self, need_size: int) -> torch.Tensor | None:
        """``need_size`` virtual token ids, whole pages of ids handed out in free-list order;
        None when they do not fit even after relief.

        Raises:
            ContractViolation: ``UMB-8`` when ``need_size`` is not whole pages.
        """
        ps = self.page_size
        if need_size <= 0:
            return self._out(np.empty(0, dtype=np.int64))
        if need_size % ps:
            raise ContractViolation("UMB-8", f"need_size {need_size} is not whole pages")
        if not self._fits_full(need_size):
            return None
        pages = self._take_full(need_size // ps)
        if pages is None:
            return None
        if ps == 1:
            return self._out(pages.copy())
        return self._out((pages[:, None] * ps + self._offsets).reshape(-1))

    def alloc_extend(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                     seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor,
                     extend_num_tokens: int, num_new_pages: int | None = None
                     ) -> torch.Tensor | None:
        """Grow each request from ``prefix_lens[i]`` to ``seq_lens[i]`` tokens (``UMB-2``):
        the rest of its last prefix page continues ``last_loc[i]``, then its new pages in
        request order. None when the free ids or the bytes are short.

        Raises:
            ContractViolation: ``UMB-8`` when ``extend_num_tokens`` is not the tokens asked or
                ``num_new_pages`` not the pages they need; checked, ``EXTEND-1``/``-2``/``-3``/
                ``-8`` for a ``last_loc`` that does not continue its prefix on a live page.
        """
        prefix, seq = host_ids(prefix_lens_cpu), host_ids(seq_lens_cpu)
        lens = seq - prefix
        if int(lens.sum()) != extend_num_tokens or (len(lens) and lens.min() < 0):
            raise ContractViolation("UMB-8", f"extend_num_tokens {extend_num_tokens} is not "
                                             "the sum of seq_lens - prefix_lens >= 0")
        pages_needed = int(new_page_counts(prefix, seq, self.page_size).sum())
        if num_new_pages is not None and num_new_pages != pages_needed:
            raise ContractViolation("UMB-8", f"num_new_pages {num_new_pages} != "
                                             f"{pages_needed} the requests need")
        last = host_ids(last_loc)
        if self.checked:
            check_last_locs(prefix, seq, last, self.page_size, self.full.v2p)
        if pages_needed > len(self.free_virtual):
            return None
        if not self._fits_full(pages_needed * self.page_size):
            return None
        pages = self._take_full(pages_needed)
        assert pages is not None  # the ids were counted above
        return self._out(extend_rows(pages, prefix, seq, last, self.page_size, self._offsets))

    def alloc_decode(self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                     last_loc: torch.Tensor) -> torch.Tensor | None:
        """One token per request at position ``seq_lens[i] - 1`` (``UMB-2``): a new page where
        that position starts one, else ``last_loc[i] + 1``. None when the pages do not fit.

        Raises:
            ContractViolation: checked, ``DECODE-1``/``-2``/``-3``/``-8`` for a ``last_loc``
                that does not continue its request on a live page.
        """
        ps = self.page_size
        seq = host_ids(seq_lens_cpu)
        if self.checked:
            check_last_locs(seq - 1, seq, host_ids(last_loc), ps, self.full.v2p, "DECODE")
        starts = decode_starts(seq, ps)
        count = int(np.count_nonzero(starts))
        if count > len(self.free_virtual) or not self._fits_full(count * ps):
            return None
        pages = self._take_full(count)
        assert pages is not None  # the ids were counted above
        if count == len(seq):
            return self._out(pages * ps if ps > 1 else pages.copy())
        out = host_ids(last_loc) + 1
        out[starts] = pages * ps
        return self._out(out)

    # -- the state end (UMB-5) --

    def alloc_state(self, count: int = 1) -> torch.Tensor | None:
        """``count`` state slot ids from the state end's free list, in order; when they do not
        fit now, full's holes are compacted first (relief). None, nothing handed out, when
        they still do not fit or the ids are short."""
        return take_state_slots(self, count, lambda: self._relieve(self.full))

    def prepare_mamba_allocation(self, target_size: int) -> None:
        """Make room for ``target_size`` state slots (``UMB-5``): an open free group's deferred
        frees run (the group stays open); then, when they fit the schedulable view but not
        the available one, full is compacted (relief)."""
        self.flush_deferred_full_frees()
        if target_size > self.state_schedulable_size():
            return
        if target_size > self.state_available_size():
            self._relieve(self.full)

    prepare_state_allocation = prepare_mamba_allocation

    def set_state_slots(self, count: int) -> None:
        """Take or release state slots until ``count`` are live, as a request pool does: the
        lowest live slots released first, one at a time; the missing ones prepared, then taken
        one at a time until one is refused."""
        set_state_slots(self, count)

    # -- compaction hooks --

    def flush_opportunistic(self) -> int:
        """A non-urgent compaction of both ends (lazy, no move gate closed); the page copies
        made."""
        if not self.lazy or self.moves_blocked():
            return 0
        return self.full.flush(urgent=False) + self.state.flush(urgent=False)

    def prewarm_compaction(self) -> None:
        """Nothing to warm up on the host."""

    def set_latest_forward_done_event(self, event: Any) -> None:
        """Accepted for SGLang's interface: host compaction runs in call order."""
