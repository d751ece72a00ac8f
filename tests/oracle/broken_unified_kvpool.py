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


@dataclass(frozen=True)
class BrokenKvpool:
    """One planted bug: the subclass and the one clause the family reports it under."""

    cls: type[UnifiedSWAAllocator]
    clause: str

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
    BrokenKvpool(HoleForgotten, "UNI-5"),
    BrokenKvpool(TombstoneUnclamped, "UNI-10"),
    BrokenKvpool(TransferPastTop, "UNI-1"),
    BrokenKvpool(NeighbourZeroed, "DATA-1"),
    BrokenKvpool(LostMove, "UNI-6"),
    BrokenKvpool(AvailableMemoKept, "UNI-7"),
    BrokenKvpool(FullViewForgetsHoles, "UNI-9"),
]
globals().update({f"{b.name}_pool": b.factory() for b in BROKEN_KVPOOL})
