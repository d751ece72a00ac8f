"""Deliberately broken tri-pools that run without SGLang: kvpool's own
:class:`kvpool.impl.unified_tri.UnifiedMambaSWAAllocator`, subclassed with one planted bug each.

The unified family judges them as it judges ``kvpool-unified-tri`` (the float chain's views
exactly, refusals as a bound), through ``unified_state()``, ``set_state_slots`` and the public
API alone: the float chain's byte accounting (``UNI-14``, the analogues of ``broken_tri.py``'s
bugs planted in SGLang's tri-pool), the float's holes (``UNI-5``) and its page copies, and
its eviction hook and decode gate (``UNI-14``, ``UNI-15``: judged by their bounds).
``BROKEN_TRI_KVPOOL`` lists each with the one clause the family reports it under at the
target's capabilities (both compaction modes, page sizes 1, 4 and 16). Each factory is
published at module level as ``<name>_pool``, where a printed repro imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broken_unified_kvpool import BrokenKvpool
from kvpool.impl.unified_tri import UnifiedMambaSWAAllocator
from kvpool.oracle.families.single.treecache import EvictParams
from kvpool.oracle.families.unified import targets  # noqa: F401  # before kvpool_target (a cycle)
from kvpool.oracle.families.unified.kvpool_target import (
    LAYOUT,
    STATE_SLOT_BYTES,
    tri_total_bytes,
)
from kvpool.oracle.families.unified.peer import STATIC_CAP_PAGES
from kvpool.spec.unified_float import (
    FloatChain,
    capacity_views,
    joint_available_tokens,
    schedulable_swa_tokens,
)


class SwaIgnoresStateEnd(UnifiedMambaSWAAllocator):  # type: ignore[misc]
    """The capacity views price the float's low band from the buffer's bottom: the state end's
    slots are not counted (its frontier read as 0), so the SWA and joint views overstate."""

    def _blind_chain(self) -> FloatChain:
        return self.float_chain()._replace(state_high_byte=0)

    def capacity_views(self) -> dict[str, int]:
        return dict(capacity_views(self._blind_chain()))

    def available_size(self) -> int:
        return int(joint_available_tokens(self._blind_chain()))

    def schedulable_swa_available_size(self) -> int:
        return int(schedulable_swa_tokens(self._blind_chain()))

    def swa_available_size(self) -> int:
        chain = self._blind_chain()
        return int(min(chain.swa_static_tokens - chain.swa_live_tokens,
                       schedulable_swa_tokens(chain)))


class FullIgnoresFloat(UnifiedMambaSWAAllocator):  # type: ignore[misc]
    """``schedulable_full_available_size()`` measures full's gap down to the state end through
    a live float: the float's pages are not counted, so the view overstates."""

    def schedulable_full_available_size(self) -> int:
        f = self.full
        gap = max(0, self.full_low_byte() - self.state_high_byte()) // f.page_bytes
        room = min(gap, f.num_pages - f.min_page - f.span_pages()) + self._end_holes(f)
        return int(room * self.page_size)


class AllocShortByAPage(UnifiedMambaSWAAllocator):  # type: ignore[misc]
    """``alloc`` refuses a request that takes the last page ``available_size()`` reported (a
    fit checked one page short); every view stays right."""

    def alloc(self, need_size: int) -> Any:
        if need_size > self.available_size() - self.page_size:
            return None
        return super().alloc(need_size)


class FloatForgetsHoles(UnifiedMambaSWAAllocator):  # type: ignore[misc]
    """A window slide (``free_swa``) unbinds the float's pages but keeps none of them as holes:
    the span holds pages that are neither live nor holes."""

    def free_swa(self, free_index: Any) -> None:
        before = len(self.swa.holes)
        super().free_swa(free_index)
        if self.swa.live:
            self.swa.holes = self.swa.holes[:before]


class StateOverrunsFloat(UnifiedMambaSWAAllocator):  # type: ignore[misc]
    """The state end measures its room up to full's frontier through a live float: state slots
    are handed out over the float's pages."""

    def state_available_size(self) -> int:
        m = self.state
        gap = max(0, self.full_low_byte() - self.state_high_byte())
        return int(min(gap // m.page_bytes, m.num_pages - m.min_page - m.span_pages()))


class EvictsWhenItFits(UnifiedMambaSWAAllocator):  # type: ignore[misc]
    """The eviction hook asks the cache for the whole demand before looking at what fits: a
    request that fits now still evicts cached rows."""

    def evict_to_free_tokens(self, tree_cache: Any, num_tokens: int, **kw: Any) -> Any:
        if tree_cache is not None and num_tokens > 0:
            tree_cache.evict_for_alloc(EvictParams(num_tokens=num_tokens,
                                                   swa_num_tokens=num_tokens))
        return super().evict_to_free_tokens(tree_cache, num_tokens, **kw)


class AsksWhenHopeless(UnifiedMambaSWAAllocator):  # type: ignore[misc]
    """The eviction hook skips its bail-out: a demand beyond the free virtual ids plus every
    evictable token still empties the cache before it is refused."""

    def evict_to_free_tokens(self, tree_cache: Any, num_tokens: int, **kw: Any) -> Any:
        pages = -(-num_tokens // self.page_size)
        if tree_cache is not None and pages > len(self.free_virtual) + (
                tree_cache.full_evictable_size() // self.page_size):
            tree_cache.evict_for_alloc(EvictParams(num_tokens=num_tokens,
                                                   swa_num_tokens=num_tokens))
            return False
        return super().evict_to_free_tokens(tree_cache, num_tokens, **kw)


class NoGateAfterEvicting(UnifiedMambaSWAAllocator):  # type: ignore[misc]
    """The eviction hook does not gate the demand again once the cache evicted something: it
    answers False though the pages fit now."""

    def evict_to_free_tokens(self, tree_cache: Any, num_tokens: int, **kw: Any) -> Any:
        held = tree_cache.full_evictable_size() if tree_cache is not None else 0
        got = super().evict_to_free_tokens(tree_cache, num_tokens, **kw)
        return False if got and tree_cache.full_evictable_size() < held else got


class DecodeGateReadsFull(UnifiedMambaSWAAllocator):  # type: ignore[misc]
    """The decode gate answers from the full side's view (``full_available_size()``) instead
    of ``available_size()``: each decoded token needs a slot on both sides."""

    def check_decode_capacity(self, *, num_tokens: int, tree_cache: Any, requests: Any = None,
                              spec_algorithm: Any = None) -> bool:
        self.evict_to_free_tokens(tree_cache, num_tokens)
        return bool(self.full_available_size() >= num_tokens)


def _factory(cls: type[UnifiedMambaSWAAllocator], name: str) -> Callable[..., Any]:
    def build(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu",
              need_sort: bool = False) -> UnifiedMambaSWAAllocator:
        cap = STATIC_CAP_PAGES * page_size
        return cls(tri_total_bytes(page_size), page_size, full_layout=LAYOUT, swa_layout=LAYOUT,
                   state_bytes=STATE_SLOT_BYTES, lazy=lazy, full_max_total_num_tokens=cap,
                   swa_max_total_num_tokens=cap, device=device, checked=True)

    build.__qualname__ = build.__name__ = name
    return build


class BrokenTriKvpool(BrokenKvpool):
    """One planted bug in kvpool's tri-pool (as :class:`BrokenKvpool`), built with
    ``kvpool-unified-tri``'s geometry."""

    def factory(self) -> Callable[..., Any]:
        return _factory(self.cls, f"{self.name}_pool")  # published below


BROKEN_TRI_KVPOOL = [
    BrokenTriKvpool(SwaIgnoresStateEnd, ("UNI-14",)),
    BrokenTriKvpool(FullIgnoresFloat, ("UNI-14",)),
    BrokenTriKvpool(AllocShortByAPage, ("UNI-14",)),
    BrokenTriKvpool(FloatForgetsHoles, ("UNI-5",)),
    BrokenTriKvpool(StateOverrunsFloat, ("UNI-16",)),
    BrokenTriKvpool(EvictsWhenItFits, ("UNI-14",)),
    BrokenTriKvpool(AsksWhenHopeless, ("UNI-14",)),
    BrokenTriKvpool(NoGateAfterEvicting, ("UNI-14",)),
    BrokenTriKvpool(DecodeGateReadsFull, ("UNI-15",)),
]
globals().update({f"{b.name}_pool": b.factory() for b in BROKEN_TRI_KVPOOL})
