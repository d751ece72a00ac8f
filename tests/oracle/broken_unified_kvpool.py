"""Deliberately broken unified allocators that run without SGLang: kvpool's own
:class:`kvpool.impl.unified_swa.UnifiedSWAAllocator`, subclassed with one planted bug each.

The unified family reads them through the introspection protocol (``unified_state()``) and the
public API alone, as any allocator, so each check of the family is shown to catch its bug on a
target that is not SGLang's: the holes' bookkeeping (``UNI-5``), placement (``UNI-1``,
``UNI-10``), the K/V bytes (``DATA-1``), the page copies (``UNI-6``) and the capacity views
(``UNI-7``, ``UNI-9``). ``BROKEN_KVPOOL`` lists each with the one clause the family reports it
under at the target's default capabilities (both compaction modes, page sizes 1, 4 and 16).
Each factory is published at module level as ``<name>_pool``, where a printed repro imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from kvpool.impl.unified_frees import host_ids
from kvpool.impl.unified_swa import UnifiedSWAAllocator
from kvpool.oracle.families.unified import targets  # noqa: F401  # before kvpool_target (a cycle)
from kvpool.oracle.families.unified.kvpool_target import LAYOUT
from kvpool.oracle.families.unified.peer import STATIC_CAP_PAGES


class HoleForgotten(UnifiedSWAAllocator):  # type: ignore[misc]
    """Lazy free unbinds the full pages but drops them from the holes: the span keeps pages
    that are neither live nor holes (nothing else is wrong)."""

    def _release_both(self, pages: np.ndarray) -> None:
        before = len(self.full.holes)
        super()._release_both(pages)
        self.full.holes = self.full.holes[:before]


class TombstoneUnclamped(UnifiedSWAAllocator):  # type: ignore[misc]
    """``translate_loc_from_full_to_swa`` reads a slid-out page's tombstone (``v2p == -1``) as
    a page index instead of the sink row 0."""

    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor, *,
                                       out: torch.Tensor | None = None) -> torch.Tensor:
        rows = super().translate_loc_from_full_to_swa(kv_indices)  # checked: every page live
        ids, ps = host_ids(kv_indices), self.page_size
        phys = self.swa.v2p[ids // ps]
        rows = torch.where(torch.from_numpy(phys < 0), torch.from_numpy(phys * ps + ids % ps),
                           rows)
        if out is None:
            return rows
        out.copy_(rows.reshape(out.shape))
        return out


class TransferPastTop(UnifiedSWAAllocator):  # type: ignore[misc]
    """``translate_kv_indices_for_transfer`` counts pages from the first allocatable one, as if
    the registered buffer began past the sink: every row a page too high (the full sub-pool's
    top page lands past it)."""

    def translate_kv_indices_for_transfer(self, kv_indices: torch.Tensor) -> torch.Tensor:
        rows: torch.Tensor = super().translate_kv_indices_for_transfer(kv_indices)
        return rows + int(self.page_size)


class NeighbourZeroed(UnifiedSWAAllocator):  # type: ignore[misc]
    """Zero-on-hand-out zeroes the page above each new full page too: a live neighbour's K/V
    (the full side grows down, so that page is usually the previous allocation's)."""

    def _reserve(self, num_pages: int, swa_pages: int) -> np.ndarray | None:
        virtual: np.ndarray | None = super()._reserve(num_pages, swa_pages)
        if virtual is not None and len(virtual):
            above = self.full.v2p[virtual] + 1
            self.store.full_kv_pool.zero_physical_pages(above[above < self.full.num_pages])
        return virtual


class LostMove(UnifiedSWAAllocator):  # type: ignore[misc]
    """Compaction rebinds a moved page's virtual id but never copies its bytes (no
    ``move_physical_pages`` call)."""

    def _mover(self, kv_pool: Any) -> Callable[[np.ndarray, np.ndarray], None]:
        return lambda dst, src: None


class AvailableMemoKept(UnifiedSWAAllocator):  # type: ignore[misc]
    """``available_size()`` is memoized and refreshed by allocations and ``clear()`` only, not
    by frees."""

    _memo: int | None = None

    def available_size(self) -> int:
        if self._memo is None:
            self._memo = super().available_size()
        return self._memo

    def _reserve(self, num_pages: int, swa_pages: int) -> np.ndarray | None:
        self._memo = None
        virtual: np.ndarray | None = super()._reserve(num_pages, swa_pages)
        return virtual

    def clear(self) -> None:
        self._memo = None
        super().clear()


class FullViewForgetsHoles(UnifiedSWAAllocator):  # type: ignore[misc]
    """``full_available_size()`` counts none of the full side's own holes (lazy compaction)."""

    def full_available_size(self) -> int:
        view: int = super().full_available_size()
        return max(0, view - int(self.full.num_holes()) * int(self.page_size))


class OpportunisticDropsSources(UnifiedSWAAllocator):  # type: ignore[misc]
    """``flush_opportunistic`` (the idle-time, non-urgent compaction) loses the last page it
    copied from: that source page is neither live nor a hole afterwards (``UNI-5``)."""

    def flush_opportunistic(self) -> int:
        if not self.lazy or self.moves_blocked():
            return 0
        moved = 0
        for pool in (self.full, self.swa):
            count = pool.flush(urgent=False)
            if count:  # the sources were appended to the holes last
                pool.holes = pool.holes[:-1]
            moved += count
        return moved


class DecodeGateReadsFullView(UnifiedSWAAllocator):  # type: ignore[misc]
    """``check_decode_capacity`` answers from the full side's schedulable view instead of the
    joint ``available_size()``: it promises a decode the SWA side cannot back (``UNI-15``)."""

    def check_decode_capacity(self, *, num_tokens: int, tree_cache: Any, requests: Any = None,
                              spec_algorithm: Any = None) -> bool:
        self.evict_to_free_tokens(tree_cache, num_tokens)
        return bool(self.full_available_size() >= num_tokens)


class HoleReusedUnzeroed(UnifiedSWAAllocator):  # type: ignore[misc]
    """An allocation that reuses a lazy hole hands it out with its old bytes: only pages past
    the frontier are zeroed (``DATA-4``)."""

    def _reserve(self, num_pages: int, swa_pages: int) -> np.ndarray | None:
        sides = ((self.full, self.store.full_kv_pool), (self.swa, self.store.swa_kv_pool))
        for pool, kv in sides:
            holes = np.asarray(pool.holes, dtype=np.int64).copy()
            zero = type(kv).zero_physical_pages

            def skip(pages: np.ndarray, kv: Any = kv, holes: np.ndarray = holes,
                     zero: Any = zero) -> None:
                zero(kv, np.asarray(pages, dtype=np.int64)[~np.isin(pages, holes)])

            kv.zero_physical_pages = skip
            kv.zero_page_run = lambda low, high, skip=skip: skip(np.arange(low, high))
        try:
            virtual: np.ndarray | None = super()._reserve(num_pages, swa_pages)
        finally:
            for _, kv in sides:
                del kv.zero_physical_pages, kv.zero_page_run
        return virtual


class GroupDropsLastFree(UnifiedSWAAllocator):  # type: ignore[misc]
    """``free_group_end`` drops the last of several plain ``free()`` calls the group deferred:
    that request's pages stay live (``UNI-10``)."""

    def free_group_end(self) -> None:
        group = self._group
        if group is not None and len(group["free"]) > 1:
            group["free"].pop()
        super().free_group_end()


class DecodePagesByBatchIndex(UnifiedSWAAllocator):  # type: ignore[misc]
    """``alloc_decode`` hands the pages it reserved out by the opening rows' batch indices
    (row ``i`` gets page ``i`` modulo their number) instead of in the order of the rows that
    open a page: right when every row opens one, wrong for a batch of two or more opening rows
    mixed with rows that continue their pages (``UNI-8``)."""

    def alloc_decode(self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                     last_loc: torch.Tensor) -> torch.Tensor | None:
        ps = self.page_size
        if ps == 1:
            plain: torch.Tensor | None = super().alloc_decode(seq_lens, seq_lens_cpu, last_loc)
            return plain
        seq = host_ids(seq_lens_cpu)
        starts = (seq - 1) % ps == 0
        pages = self._reserve(int(starts.sum()), int(starts.sum()))
        if pages is None:
            return None
        out = host_ids(last_loc) + 1
        index = np.flatnonzero(starts)
        if len(index):
            out[index] = pages[index % len(index)] * ps
        rows: torch.Tensor = self._out(out)
        return rows


@dataclass(frozen=True)
class BrokenKvpool:
    """One planted bug: the subclass, the one clause the family reports it under (``clauses``,
    a 1-tuple as every broken allocator's) and the clause the bug breaks (``cause``; default:
    the reported one)."""

    cls: type[UnifiedSWAAllocator]
    clauses: tuple[str, ...]
    cause: str = ""

    def __post_init__(self) -> None:
        if not self.cause:
            object.__setattr__(self, "cause", self.clauses[0])

    @property
    def clause(self) -> str:
        return self.clauses[0]

    @property
    def name(self) -> str:
        return self.cls.__name__

    def factory(self) -> Callable[..., Any]:
        """A unified factory building :attr:`cls` with ``kvpool-unified``'s geometry and
        capabilities (checked mode, both compaction modes)."""
        cls = self.cls

        def build(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu",
                  need_sort: bool = False) -> UnifiedSWAAllocator:
            cap = STATIC_CAP_PAGES * page_size
            return cls(total_bytes, page_size, full_layout=LAYOUT, swa_layout=LAYOUT, lazy=lazy,
                       full_max_total_num_tokens=cap, swa_max_total_num_tokens=cap,
                       device=device, checked=True)

        build.__qualname__ = build.__name__ = f"{self.name}_pool"  # published below
        return build


BROKEN_KVPOOL = [
    BrokenKvpool(HoleForgotten, ("UNI-5",)),
    BrokenKvpool(TombstoneUnclamped, ("UNI-10",)),
    BrokenKvpool(TransferPastTop, ("UNI-1",)),
    BrokenKvpool(NeighbourZeroed, ("DATA-1",)),
    BrokenKvpool(LostMove, ("UNI-6",)),
    BrokenKvpool(AvailableMemoKept, ("UNI-7",)),
    BrokenKvpool(FullViewForgetsHoles, ("UNI-9",)),
    BrokenKvpool(OpportunisticDropsSources, ("UNI-5",)),
    BrokenKvpool(DecodeGateReadsFullView, ("UNI-15",)),
    BrokenKvpool(HoleReusedUnzeroed, ("DATA-4",)),
    BrokenKvpool(GroupDropsLastFree, ("UNI-10",)),
    BrokenKvpool(DecodePagesByBatchIndex, ("UNI-8",)),
]
globals().update({f"{b.name}_pool": b.factory() for b in BROKEN_KVPOOL})
