"""What a unified full + Mamba composite shows of itself: translations, census, introspection.

A mixin of :class:`~kvpool.impl.unified_mamba.UnifiedMambaAllocator`:

- ``translate_kv_loc`` / ``translate_write_loc`` / ``translate_kv_indices_for_transfer`` map a
  virtual token id ``t`` to the full end's physical row ``v2p[t // ps] * ps + t % ps``
  (``UMB-7``); checked, an id whose page is not live is refused (``UMB-8``), unchecked it reads
  as the sink row 0, as SGLang's does;
- ``verify_byte_accounting()`` is the census (``UMB-8``): each end's ``UNI-4`` / ``UNI-5``
  violations, the chain's order (the state frontier at or below full's), the sink and each
  end's id partition, as text; empty exactly when healthy; ``check_invariants()`` raises on a
  non-empty one;
- ``unified_state()`` is the introspection protocol (sides ``"state"`` and ``"full"``),
  ``unified_plant(fault)`` its fault planter;
- :class:`MambaEndView` is ``mamba_allocator``: the state end as SGLang's request pool drives it.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch
from kvpool.spec.unified_state import PLANTABLE, SubPoolState, UnifiedState

from .unified_end import EndSubPool
from .unified_frees import host_ids
from .unified_rows import into, sink_rows
from .unified_views import end_side_state

__all__ = ["MambaEndView", "StateOwner", "UnifiedMambaViews"]


class StateOwner(Protocol):
    """What :class:`MambaEndView` drives: the composite's state-end surface."""

    state: EndSubPool

    @property
    def size_mamba(self) -> int: ...

    def alloc_state(self, count: int = 1) -> torch.Tensor | None: ...

    def free_state_slots(self, slots: Any) -> None: ...

    def state_available_size(self) -> int: ...

    def state_schedulable_size(self) -> int: ...


class MambaEndView:
    """The state end as SGLang's ``mamba_allocator``: ``alloc(n)`` (slot ids, or None),
    ``free(slots)``, ``available_size()`` (slots now), ``schedulable_available_size()``
    (slots after full's holes are compacted), ``translate(ids)`` (physical slots)."""

    def __init__(self, owner: StateOwner) -> None:
        """``owner``: the :class:`~.unified_mamba.UnifiedMambaAllocator` whose end this is."""
        self._owner = owner

    def alloc(self, need_size: int) -> torch.Tensor | None:
        return self._owner.alloc_state(need_size)

    def free(self, free_index: Any) -> None:
        self._owner.free_state_slots(free_index)

    def available_size(self) -> int:
        return self._owner.state_available_size()

    def schedulable_available_size(self) -> int:
        return self._owner.state_schedulable_size()

    def translate(self, virtual_ids: torch.Tensor) -> torch.Tensor:
        """Physical slot of each live slot id; -1 for one not live."""
        return torch.from_numpy(self._owner.state.v2p[host_ids(virtual_ids)].copy())

    @property
    def size(self) -> int:
        return self._owner.size_mamba


class UnifiedMambaViews:
    """Translations, census and introspection of a full + Mamba composite."""

    full: EndSubPool
    state: EndSubPool
    free_virtual: np.ndarray
    free_state: np.ndarray
    page_size: int
    checked: bool
    total_bytes: int
    floor_bytes: int
    store: Any  # the composite's UnifiedMambaStore

    def moves_blocked(self) -> bool:
        raise NotImplementedError

    def _check_pages(self, pool: EndSubPool, pages: np.ndarray, what: str) -> None:
        raise NotImplementedError

    def _out(self, values: np.ndarray) -> torch.Tensor:
        raise NotImplementedError

    @property
    def size_full(self) -> int:
        raise NotImplementedError

    # -- translation (UMB-7) --

    def _rows(self, loc: Any) -> np.ndarray:
        ids = host_ids(loc)
        ps = self.page_size
        if self.checked:
            self._check_pages(self.full, ids // ps if ps > 1 else ids, "virtual pages")
            return self.full.rows(ids, ps)
        return sink_rows(self.full, ids, ps)

    def translate_kv_loc(self, loc: torch.Tensor, *, out: torch.Tensor | None = None
                         ) -> torch.Tensor:
        """Physical full rows of virtual token ids (module docstring); ``out=`` written in
        place.

        Raises:
            ContractViolation: checked, ``UMB-8`` when an id's page is not live.
        """
        return into(self._out(self._rows(loc)), out)

    def translate_write_loc(self, loc: torch.Tensor, *, out: torch.Tensor | None = None,
                            out_width: int | None = None) -> torch.Tensor:
        """The write translation: the read one (no context parallelism)."""
        return self.translate_kv_loc(loc, out=out)

    def translate_kv_indices_for_transfer(self, kv_indices: torch.Tensor) -> torch.Tensor:
        """The read translation, int64 (for the transfer engine)."""
        return self.translate_kv_loc(kv_indices)

    @property
    def full_v2p_page_table(self) -> torch.Tensor:
        """Full's virtual -> physical page table, a live view (-1 where unbound)."""
        return torch.from_numpy(self.full.v2p)

    @property
    def full_p2v_page_table(self) -> torch.Tensor:
        """Full's physical -> virtual page table, a live view (-1 where free)."""
        return torch.from_numpy(self.full.p2v)

    def is_slot_allocated(self, slot: int) -> bool:
        """Whether the full page holding virtual token ``slot`` is live; page 0, the padding
        sink, counts as in use (as in SGLang)."""
        page = slot // self.page_size
        if page < 0 or page >= len(self.full.v2p):
            return False
        return page == 0 or bool(self.full.v2p[page] >= 0)

    # -- host copies --

    def get_cpu_copy(self, indices: torch.Tensor, mamba_indices: Any = None,
                     req_pool_index: Any = None) -> dict[str, Any]:
        """The full K/V rows of virtual token ids on the host, and the state slots' bytes of
        ``mamba_indices`` (state slot ids) when given."""
        rows = torch.from_numpy(self._rows(indices)).to(self.store.raw.device)
        copy: dict[str, Any] = {"full": self.store.full_kv_pool.get_cpu_copy(rows)}
        if mamba_indices is not None:
            slots = self._slots(mamba_indices)
            copy["mamba"] = self.store.mamba_pool.pages_view[slots].cpu()
        return copy

    def load_cpu_copy(self, kv_cache_cpu: dict[str, Any], indices: torch.Tensor,
                      mamba_indices: Any = None, req_pool_index: Any = None) -> None:
        """Write a :meth:`get_cpu_copy` result into the rows (and slots) the ids have now."""
        rows = torch.from_numpy(self._rows(indices)).to(self.store.raw.device)
        self.store.full_kv_pool.load_cpu_copy(kv_cache_cpu["full"], rows)
        if mamba_indices is not None and "mamba" in kv_cache_cpu:
            view = self.store.mamba_pool.pages_view
            view[self._slots(mamba_indices)] = kv_cache_cpu["mamba"].to(view.device)

    def _slots(self, mamba_indices: Any) -> torch.Tensor:
        ids = host_ids(mamba_indices)
        if self.checked:
            self._check_pages(self.state, ids, "state slots")
        return torch.from_numpy(self.state.v2p[ids].copy()).to(self.store.raw.device)

    # -- census (UMB-8) --

    def verify_byte_accounting(self) -> list[str]:
        """The census (module docstring): empty exactly when every table invariant holds."""
        out = self.state.census() + self.full.census()
        state_high, full_low = self.state.band()[1], self.full.band()[0]
        if state_high > full_low:
            out.append(f"[chain] UMB-8 state frontier {state_high} crosses full {full_low}")
        if (self.state.band()[0] < self.floor_bytes or full_low < self.floor_bytes):
            out.append("[chain] UMB-1 a band reaches into the reserved sink")
        for pool, free in ((self.full, self.free_virtual), (self.state, self.free_state)):
            live = pool.v2p >= 0
            ids = pool.num_pages - pool.min_page
            if (len(free) + int(live.sum()) != ids or len(np.unique(free)) != len(free)
                    or (len(free) and (free.min() < pool.min_page or live[free].any()))
                    or live[:pool.min_page].any()):
                out.append(f"[{pool.name}] UMB-8 free ids and live ones do not partition "
                           "the ids")
        return out

    def check_invariants(self) -> None:
        """Raise ``AssertionError`` listing the census when the state is unhealthy."""
        problems = self.verify_byte_accounting()
        assert not problems, problems

    # -- introspection --

    def _side(self, pool: EndSubPool) -> SubPoolState:
        return end_side_state(pool, drains=not self.moves_blocked())

    def unified_state(self) -> UnifiedState:
        """A snapshot of both ends in the spec's terms (``UMB-1``, ``UMB-7``); the static
        token cap is ``size_full``, the SWA one 0 (there is no SWA side)."""
        return UnifiedState(
            page_size=self.page_size, total_bytes=self.total_bytes,
            sides={"state": self._side(self.state), "full": self._side(self.full)},
            free_virtual=tuple(self.free_virtual.tolist()),
            full_static_tokens=self.size_full, swa_static_tokens=0)

    def unified_plant(self, fault: str) -> bool:
        """Put the pool into one unhealthy state for the oracle's census probes:
        ``stale_binding:full`` points the lowest live virtual page at the next one's physical
        page (False with fewer than two live pages); ``frontier_cross`` pushes the state
        frontier two slots past full's low frontier; ``stale_binding:swa``: False (no SWA).

        Raises:
            ValueError: ``fault`` is not plantable.
        """
        if fault not in PLANTABLE:
            raise ValueError(f"unknown fault {fault!r}; plantable: {PLANTABLE}")
        if fault == "frontier_cross":
            self.state.watermark = self.full.band()[0] // self.state.page_bytes + 2
            return True
        if fault != "stale_binding:full":
            return False
        live = np.flatnonzero(self.full.v2p >= 0)
        if len(live) < 2:
            return False
        self.full.v2p[live[0]] = self.full.v2p[live[1]]
        return True
