"""What a unified full + SWA pool shows of itself: census, introspection, host copies.

A mixin of :class:`~kvpool.impl.unified_swa.UnifiedSWAAllocator`:

- ``verify_byte_accounting()`` is the spec's census (``UNI-13``): every violation of
  ``UNI-3`` .. ``UNI-5`` and ``UNI-10`` as text, empty exactly when the tables are healthy;
  ``check_invariants()`` raises on a non-empty one;
- ``unified_state()`` is the introspection protocol
  (:class:`kvpool.spec.unified_state.UnifiedState`): spans, holes and bindings, read without
  changing anything; ``unified_plant(fault)`` its optional hook that plants a fault for the
  oracle's census probes;
- ``get_cpu_copy`` / ``load_cpu_copy`` copy the K/V rows of virtual token ids to the host and
  back, as SGLang's ``UnifiedSWAKVPool`` does (the SWA rows of pages still bound only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from kvpool.spec import unified_layout as ul
from kvpool.spec.unified_state import PLANTABLE, SubPoolState, UnifiedState

from .unified_end import EndSubPool
from .unified_store import UnifiedByteStore

__all__ = ["EvictParams", "UnifiedViews", "end_side_state"]


@dataclass(frozen=True)
class EvictParams:
    """What ``evict_for_alloc`` is asked for (SGLang 0.5.23's ``EvictParams`` fields)."""

    num_tokens: int = 0
    swa_num_tokens: int = 0
    mamba_num: int = 0


class UnifiedViews:
    """Census, introspection and host copies of a full + SWA composite."""

    full: EndSubPool
    swa: EndSubPool
    free_virtual: np.ndarray
    page_size: int
    lazy: bool
    total_bytes: int
    floor_bytes: int
    full_max_tokens: int
    swa_max_tokens: int
    store: UnifiedByteStore

    def moves_blocked(self) -> bool:
        raise NotImplementedError

    def verify_byte_accounting(self) -> list[str]:
        """The census (``UNI-13``): empty exactly when every table invariant holds."""
        out = self.full.census() + self.swa.census()
        swa_band, full_band = self.swa.band(), self.full.band()
        if swa_band[1] > full_band[0] or not ul.bands_ordered([swa_band, full_band]):
            out.append(f"[chain] UNI-3 swa high frontier {swa_band[1]} crosses full low "
                       f"{full_band[0]}")
        if swa_band[0] < self.floor_bytes or full_band[0] < self.floor_bytes:
            out.append("[chain] UNI-2 a band reaches into the reserved sink")
        swa_bound = self.swa.v2p >= 0
        if (swa_bound & (self.full.v2p < 0)).any():
            out.append("[chain] UNI-10 SWA binds a virtual page the full side does not hold")
        ids = self.full.num_pages - self.full.min_page
        free = self.free_virtual
        live = self.full.v2p >= 0
        if (len(free) + int(live.sum()) != ids or len(np.unique(free)) != len(free)
                or (len(free) and (free.min() < self.full.min_page or live[free].any()))
                or live[:self.full.min_page].any()):
            out.append("[chain] UNI-10 free virtual ids and live ones do not partition the ids")
        return out

    def check_invariants(self) -> None:
        """Raise ``AssertionError`` listing the census when the state is unhealthy."""
        problems = self.verify_byte_accounting()
        assert not problems, problems

    def unified_plant(self, fault: str) -> bool:
        """Put the pool into one unhealthy state (:data:`kvpool.spec.unified_state.PLANTABLE`)
        for the oracle's census probes (``UNI-13``): ``stale_binding:full`` / ``:swa`` points
        the lowest live virtual page at the next one's physical page (``UNI-4``);
        ``frontier_cross`` pushes the SWA frontier two pages past the full side's low frontier
        (``UNI-3``). False, nothing changed, with fewer than two live pages on that side.

        Raises:
            ValueError: ``fault`` is not plantable.
        """
        if fault not in PLANTABLE:
            raise ValueError(f"unknown fault {fault!r}; plantable: {PLANTABLE}")
        if fault == "frontier_cross":
            self.swa.watermark = self.full.watermark + 3
            return True
        pool = self.full if fault.endswith(":full") else self.swa
        live = np.flatnonzero(pool.v2p >= 0)
        if len(live) < 2:
            return False
        pool.v2p[live[0]] = pool.v2p[live[1]]
        return True

    def _side_state(self, pool: EndSubPool) -> SubPoolState:
        return end_side_state(pool, drains=not self.moves_blocked())

    def unified_state(self) -> UnifiedState:
        """A snapshot of both sub-pools in the spec's terms (``UNI-4``, ``UNI-5``)."""
        return UnifiedState(
            page_size=self.page_size, total_bytes=self.total_bytes,
            sides={"full": self._side_state(self.full), "swa": self._side_state(self.swa)},
            free_virtual=tuple(self.free_virtual.tolist()),
            full_static_tokens=self.full_max_tokens, swa_static_tokens=self.swa_max_tokens)

    def _rows_of(self, pool: EndSubPool, indices: torch.Tensor) -> torch.Tensor:
        ids = indices.detach().reshape(-1).to("cpu", torch.int64).numpy()
        ps = self.page_size
        phys = pool.v2p[ids // ps]
        return torch.from_numpy(np.where(phys >= 0, phys * ps + ids % ps, -1))

    def get_cpu_copy(self, indices: torch.Tensor, mamba_indices: Any = None,
                     req_pool_index: Any = None) -> dict[str, Any]:
        """The K/V rows of virtual token ids on the host: ``{"full": per-layer (K, V),
        "swa": per-layer (K, V) of the ids whose SWA page is bound (or None), "swa_mask"}``."""
        full_rows = self._rows_of(self.full, indices)
        swa_rows = self._rows_of(self.swa, indices)
        valid = swa_rows >= 0
        device = self.store.raw.device
        swa = (self.store.swa_kv_pool.get_cpu_copy(swa_rows[valid].to(device))
               if bool(valid.any()) else None)
        return {"full": self.store.full_kv_pool.get_cpu_copy(full_rows.to(device)),
                "swa": swa, "swa_mask": valid}

    def load_cpu_copy(self, kv_cache_cpu: dict[str, Any], indices: torch.Tensor,
                      mamba_indices: Any = None, req_pool_index: Any = None) -> None:
        """Write a :meth:`get_cpu_copy` result into the rows the ids have now; SWA rows only
        where the copy had them and the page is bound now."""
        device = self.store.raw.device
        self.store.full_kv_pool.load_cpu_copy(kv_cache_cpu["full"],
                                              self._rows_of(self.full, indices).to(device))
        swa = kv_cache_cpu.get("swa")
        if swa is None:
            return
        old_mask = kv_cache_cpu["swa_mask"]
        rows = self._rows_of(self.swa, indices)[old_mask]
        keep = rows >= 0
        if not bool(keep.any()):
            return
        kept = [(k[keep], v[keep]) for k, v in swa]
        self.store.swa_kv_pool.load_cpu_copy(kept, rows[keep].to(device))


def end_side_state(pool: EndSubPool, *, drains: bool) -> SubPoolState:
    """An end sub-pool in the introspection protocol's terms (span, holes ascending, live
    bindings); ``drains``: no move gate is closed."""
    low, high = pool.span()
    bound = np.flatnonzero(pool.v2p >= 0)
    return SubPoolState(
        name=pool.name, grow="up" if pool.grows_up else "down", page_bytes=pool.page_bytes,
        num_pages=pool.num_pages, min_page=pool.min_page, span_low=low, span_high=high,
        holes=tuple(sorted(pool.holes.tolist())),
        bindings=dict(zip(bound.tolist(), pool.v2p[bound].tolist())), lazy=pool.lazy,
        drains=drains)
