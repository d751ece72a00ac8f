"""kvpool's tri-pool: full + SWA + Mamba state in one byte buffer.

Drop-in for SGLang 0.5.23's ``UnifiedMambaSWATokenToKVPoolAllocator``: one buffer laid out as
``[ state (grow-up end) | SWA (float middle) | full (grow-down end) ]`` (``UNI-14``). Full owns
the virtual page ids and grows down from the top (an :class:`~.unified_end.EndSubPool`, eager
or lazy compaction); SWA binds the same ids on a float (:class:`~.unified_tri_float.FloatSubPool`:
holes kept in both modes, moved only on demand); the state end grows up from the sink and hands
out per-request state slots with ids of its own (:meth:`UnifiedMambaSWAAllocator.alloc_state`,
``free_state_slots``; SGLang's ``mamba_allocator``); one move gate covers all three. Allocation,
frees, groups, translations and checked mode are the two-member pool's
(:class:`~.unified_swa.UnifiedSWAAllocator`); the capacity views and the gate are the float
chain's (:mod:`.unified_tri_gate`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from kvpool.spec import unified_layout as ul
from kvpool.spec.errors import ContractViolation
from kvpool.spec.unified_state import SubPoolState, UnifiedState

from .unified_end import EndSubPool
from .unified_external import external_state
from .unified_frees import host_ids
from .unified_mamba_views import MambaEndView
from .unified_slots import set_state_slots, take_state_slots
from .unified_store import DEFAULT_LAYOUT, SideLayout, page_mover
from .unified_swa import UnifiedSWAAllocator
from .unified_tri_float import FloatSubPool
from .unified_tri_gate import TriCapacityGate
from .unified_views import EvictParams

__all__ = ["StatePages", "UnifiedMambaSWAAllocator"]

DEFAULT_STATE_BYTES = 176  # one Mamba layer: conv (3, 8) bf16 and temporal (1, 4, 8) fp32


class StatePages:
    """The state end's view of the buffer: whole slots of ``slot_bytes`` (page size 1)."""

    def __init__(self, raw: torch.Tensor, slot_bytes: int) -> None:
        self.num_pages = raw.numel() // slot_bytes
        self.page_bytes = slot_bytes
        self.pages_view = raw[: self.num_pages * slot_bytes].view(self.num_pages, slot_bytes)

    def move_physical_pages(self, dst_pages: torch.Tensor, src_pages: torch.Tensor,
                            page_size: int | None = None) -> None:
        """Copy whole slots ``src_pages[i]`` -> ``dst_pages[i]`` (disjoint sets)."""
        if dst_pages.numel():
            self.pages_view[dst_pages] = self.pages_view[src_pages.to(self.pages_view.device)]


class UnifiedMambaSWAAllocator(TriCapacityGate, UnifiedSWAAllocator):
    """A full + SWA + state tri-pool over one ``total_bytes`` buffer (module docstring).

    Args: as :class:`~.unified_swa.UnifiedSWAAllocator`, and
        state_bytes: bytes of one state slot (every Mamba layer's conv and temporal state).
        state_store: an external owner of the state slots' bytes (SGLang's
            ``UnifiedMambaPool``): every state slot copy runs through its
            ``move_physical_pages(dst, src, 1)``, behind the forward events an external
            ``kv_store`` is handed; default: :class:`StatePages` over the byte store's buffer.

    Attributes:
        mamba_allocator: the state end as SGLang's request pool drives it
            (:class:`~.unified_mamba_views.MambaEndView`).

    Raises:
        ContractViolation: ``UNI-2`` when a member has no allocatable page above the sink.
    """

    def __init__(self, total_bytes: int, page_size: int = 1, *,
                 full_layout: SideLayout = DEFAULT_LAYOUT,
                 swa_layout: SideLayout = DEFAULT_LAYOUT, state_bytes: int = DEFAULT_STATE_BYTES,
                 lazy: bool = False, full_max_total_num_tokens: int | None = None,
                 swa_max_total_num_tokens: int | None = None, device: str = "cpu",
                 checked: bool = True, need_sort: bool = False, kv_store: Any = None,
                 state_store: Any = None) -> None:
        self.state_bytes = state_bytes
        super().__init__(total_bytes, page_size, full_layout=full_layout, swa_layout=swa_layout,
                         lazy=lazy, full_max_total_num_tokens=full_max_total_num_tokens,
                         swa_max_total_num_tokens=swa_max_total_num_tokens, device=device,
                         checked=checked, kv_store=kv_store, state_entry_bytes=state_bytes)
        self.state_kv: Any = StatePages(self.store.raw, state_bytes)
        if state_store is not None:
            self.state_kv = external_state(self.store, state_store)
        pages = ul.num_pages(total_bytes, state_bytes, 1)
        min_page = ul.min_page_index(self.floor_bytes, state_bytes, 1)
        if pages <= min_page:
            raise ContractViolation("UNI-2", f"state: {pages} slots, none above the sink")
        self.state = EndSubPool("state", True, min_page, pages, state_bytes, pages, lazy,
                                page_mover(self.state_kv, self.device, 1))
        self.free_state = np.arange(min_page, pages, dtype=np.int64)
        self.mamba_allocator = MambaEndView(self)

    @property
    def size_mamba(self) -> int:
        """State slots of the buffer less the sink slots."""
        return self.state.num_pages - self.state.min_page

    def _swa_pool(self, min_page: int, num_pages: int, page_bytes: int, num_virtual: int,
                  lazy: bool, mover: Any) -> FloatSubPool:
        return FloatSubPool(min_page, num_pages, page_bytes, num_virtual, mover,
                            below=self.state_high_byte, above=self.full_low_byte,
                            blocked=self.moves_blocked)

    def _gap_bytes(self) -> int:
        """Free bytes between full and the member below it."""
        return max(0, self.full_low_byte() - self.full_below_byte())

    def clear(self) -> None:
        """Back to empty (``UNI-12``): every member, the state slots too."""
        super().clear()
        if getattr(self, "state", None) is not None:
            self.clear_state_slots()

    def clear_state_slots(self) -> None:
        """Every state slot free, no hole (SGLang's state-end ``clear``); the token members
        are left as they are."""
        self.state.clear()
        self.free_state = np.arange(self.state.min_page, self.state.num_pages, dtype=np.int64)

    def _reserve(self, num_pages: int, swa_pages: int) -> np.ndarray | None:
        if num_pages > len(self.free_virtual):
            return None
        return super()._reserve(num_pages, swa_pages)

    # -- state slots (SGLang's mamba_allocator) --

    def alloc_state(self, count: int = 1) -> torch.Tensor | None:
        """``count`` state slot ids on the state end; when its gap is short, the float's
        boundary holes are absorbed (or full compacted through an empty float) and the float
        opens its low side. None, nothing handed out, when they do not fit."""
        return take_state_slots(self, count, lambda: self._relieve_state(count))

    def _relieve_state(self, count: int) -> None:
        if self.swa.transparent:
            if self.full.lazy and not self.moves_blocked():
                self.full.flush(urgent=True)
        else:
            self.swa.flush()
        if count > self.state_available_size():
            self._open_short_side(0, 0, count)

    def free_state_slots(self, slots: torch.Tensor) -> None:
        """Release state slots (eager: the end compacts at once; lazy: holes).

        Raises:
            ContractViolation: ``UNI-11`` when a slot is not live; nothing changed.
        """
        ids = host_ids(slots)
        if len(ids) == 0:
            return
        bad = (ids < 0) | (ids >= len(self.state.v2p))
        if bad.any() or (self.state.v2p[ids[~bad]] < 0).any() or len(np.unique(ids)) != len(ids):
            raise ContractViolation("UNI-11", f"state slots {ids.tolist()[:8]} are not live")
        self.state.release(ids)
        self.free_state = np.concatenate((self.free_state, ids))

    def prepare_state_allocation(self, count: int) -> None:
        """Make room for ``count`` state slots before taking them (SGLang's
        ``prepare_mamba_allocation``): an open free group's deferred frees run (the group stays
        open), then, when they are short, full is compacted and the shortfall ladder runs."""
        self._flush_group()
        if count <= self.state_available_size():
            return
        if self.full.lazy and not self.moves_blocked():
            self.full.flush(urgent=True)
        self._relieve_state(count)

    prepare_mamba_allocation = prepare_state_allocation

    def flush_deferred_full_frees(self) -> None:
        """Run an open free group's deferred frees; the group stays open."""
        self._flush_group()

    def mamba_slot_full_token_cost(self) -> int:
        """Tokens (a full and an SWA entry each) whose bytes one state slot takes, rounded up
        (SGLang's ``mamba_slot_full_token_cost``)."""
        ps = self.page_size
        token_bytes = self.full.page_bytes // ps + self.swa.page_bytes // ps
        return int(-(-self.state_bytes // token_bytes))

    def set_state_slots(self, count: int) -> None:
        """Take or release state slots until ``count`` are live, as a request pool does: the
        lowest live slots released first, one at a time; the missing ones prepared, then taken
        one at a time until one is refused."""
        set_state_slots(self, count)

    # -- introspection and census --

    def unified_state(self) -> UnifiedState:
        """A snapshot of the three members in the spec's terms (``UNI-14``)."""
        s = self.swa
        bound = np.flatnonzero(s.v2p >= 0)
        swa = SubPoolState(
            name="swa", grow="float", page_bytes=s.page_bytes, num_pages=s.num_pages,
            min_page=s.min_page, span_low=s.low, span_high=s.high,
            holes=tuple(sorted(s.holes.tolist())),
            bindings=dict(zip(bound.tolist(), s.v2p[bound].tolist())), lazy=False,
            drains=not self.moves_blocked())
        return UnifiedState(
            page_size=self.page_size, total_bytes=self.total_bytes,
            sides={"state": self._side_state(self.state), "swa": swa,
                   "full": self._side_state(self.full)},
            free_virtual=tuple(self.free_virtual.tolist()),
            full_static_tokens=self.full_max_tokens, swa_static_tokens=self.swa_max_tokens)

    def unified_plant(self, fault: str) -> bool:
        """As the two-member pool's; ``frontier_cross`` pushes the float's top two pages past
        full's low frontier (False, nothing changed, with an empty float)."""
        if fault == "frontier_cross":
            if self.swa.transparent:
                return False
            self.swa.high = self.full.watermark + 3
            return True
        return super().unified_plant(fault)

    def verify_byte_accounting(self) -> list[str]:
        """The census (``UNI-13``): every member's, the chain's order (state below the float
        below full, or state below full through an empty float) and the id partition."""
        out: list[str] = self.state.census() + self.swa.census() + self.full.census()
        state_high, full_low = self.state_high_byte(), self.full_low_byte()
        if self.swa.transparent:
            if state_high > full_low:
                out.append(f"[chain] UNI-3 state frontier {state_high} crosses full {full_low}")
        else:
            low, high = self.swa.band()
            if state_high > low or high > full_low:
                out.append(f"[chain] UNI-3 float [{low}, {high}) crosses state {state_high} or "
                           f"full {full_low}")
        if (self.swa.v2p >= 0)[self.full.v2p < 0].any():
            out.append("[chain] UNI-10 SWA binds a virtual page the full side does not hold")
        free, live = self.free_virtual, self.full.v2p >= 0
        ids = self.full.num_pages - self.full.min_page
        if (len(free) + int(live.sum()) != ids or len(np.unique(free)) != len(free)
                or (len(free) and (free.min() < self.full.min_page or live[free].any()))):
            out.append("[chain] UNI-10 free virtual ids and live ones do not partition the ids")
        return out

    # -- lifecycle and hooks --

    def flush_opportunistic(self) -> int:
        """Per-step reclaim: a non-urgent compaction of the lazy ends (no move gate closed),
        then the float's boundary holes absorbed; the pages moved or given back."""
        done = 0
        if self.lazy and not self.moves_blocked():
            done += self.full.flush(urgent=False) + self.state.flush(urgent=False)
        return done + int(self.swa.flush())

    def evict_to_free_tokens(self, tree_cache: Any, num_tokens: int, *,
                             swa_num_tokens: int | None = None) -> bool | None:
        """Evict what ``num_tokens`` on both sides needs, then gate it (SGLang's tri-pool's
        order): None without a prefix-sharing cache; True when it fits now; False when even
        everything evictable (full and SWA tokens, state slots) leaves too few ids or bytes.
        Else the gate runs (:meth:`ensure_capacity`); then the cache evicts tokens until the
        reclaim would satisfy the allocation, and, when that is not enough, state slots: as
        many as the demand's bytes take, less the ones the token phase already released.
        ``swa_num_tokens`` is accepted for the two-member pool's signature; unused."""
        if tree_cache is None or not tree_cache.supports_prefix_sharing():
            return None
        if num_tokens <= 0:
            return True
        self._flush_group()
        ps = self.page_size
        need = -(-num_tokens // ps) * ps
        if self._id_capacity(need) and need <= self.available_size():
            return True
        full_back, swa_back = tree_cache.full_evictable_size(), tree_cache.swa_evictable_size()
        state_back = tree_cache.mamba_evictable_size()
        s = self.swa
        if (need // ps > len(self.free_virtual) + full_back // ps
                or need // ps > s.num_pages - s.min_page - s.live + swa_back // ps
                or self._byte_shortfall(need, full_back, swa_back, state_back) > 0):
            return False
        if self.ensure_capacity(need, need):
            return True
        state_freed = 0

        def satisfied() -> bool:
            return self._end_reclaim_satisfied(need) or self._float_high_target(need) is not None

        if full_back or swa_back:
            got = tree_cache.evict_for_alloc(EvictParams(num_tokens=need, swa_num_tokens=need),
                                             allocation_reclaim_satisfied=satisfied)
            state_freed = _evicted(got, "mamba_num_evicted")
            if _evicted(got) and self.ensure_capacity(need, need):
                return True
        pair_bytes = need // ps * (self.full.page_bytes + s.page_bytes)
        state_quota = max(0, -(-pair_bytes // self.state_bytes) - state_freed)
        if state_quota and tree_cache.mamba_evictable_size():
            got = tree_cache.evict_for_alloc(EvictParams(mamba_num=state_quota),
                                             allocation_reclaim_satisfied=satisfied)
            if _evicted(got):
                return self.ensure_capacity(need, need)
        return self._id_capacity(need) and need <= self.available_size()

    def check_decode_capacity(self, *, num_tokens: int, tree_cache: Any, requests: Any = None,
                              spec_algorithm: Any = None) -> bool:
        """Whether the next decode step's ``num_tokens`` fit after evicting what the cache
        may give."""
        self.evict_to_free_tokens(tree_cache, num_tokens)
        return self.available_size() >= num_tokens


def _evicted(result: Any, field: str | None = None) -> int:
    """What an ``evict_for_alloc`` result says was evicted: ``field`` of it, or the sum of
    tokens, SWA tokens and state slots (0 for a cache that returns nothing)."""
    fields = (field,) if field else ("num_tokens_evicted", "swa_num_tokens_evicted",
                                     "mamba_num_evicted")
    return sum(int(getattr(result, name, 0) or 0) for name in fields)
