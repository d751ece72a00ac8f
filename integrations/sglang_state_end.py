"""kvpool's state end as SGLang's state-end allocator (a ``MultiEndedAllocator`` of page size 1).

SGLang 0.5.23's unified pools with Mamba state (the tri-pool and the full + Mamba pool) hand
their state end to ``UnifiedMambaSlotAllocator`` (the request pool's ``mamba_allocator``), and
its scheduler and invariant checker read it directly. :class:`SGLangStateEnd` is
:class:`~kvpool.impl.unified_mamba_views.MambaEndView` (take, release, the two capacity views,
translate) with the rest of what SGLang reads.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from kvpool.impl.unified_mamba_views import MambaEndView

__all__ = ["SGLangStateEnd", "StateOwner"]


class StateOwner(Protocol):
    """A kvpool unified pool with a state end (``state``: an ``EndSubPool`` of slots)."""

    state: Any
    state_bytes: int

    def clear_state_slots(self) -> None: ...


class SGLangStateEnd(MambaEndView):  # type: ignore[misc]
    """kvpool's state end with the rest of the surface of SGLang's state-end allocator that
    SGLang reads: ``virtual_to_physical`` (the slot table as a tensor, a live view on the
    host), ``allocated_count()``, the frontier (``watermark_physical``, ``grow_direction``,
    ``num_pages``, ``min_page_index``, ``max_slots``), the entry sizes, ``clear()`` (every
    slot free), ``is_slot_allocated`` and ``allocator_state_str``. Slots are pages of one."""

    page_size = 1
    grow_direction = "up"

    def __init__(self, owner: StateOwner) -> None:
        super().__init__(owner)
        self._owner_pool = owner
        self.entry_bytes = self.entry_bytes_per_page = owner.state_bytes

    @property
    def virtual_to_physical(self) -> torch.Tensor:
        return torch.from_numpy(self._owner_pool.state.v2p)

    @property
    def watermark_physical(self) -> int:
        """The first slot above the state end's span."""
        return int(self._owner_pool.state.watermark)

    @property
    def num_pages(self) -> int:
        return int(self._owner_pool.state.num_pages)

    @property
    def min_page_index(self) -> int:
        return int(self._owner_pool.state.min_page)

    @property
    def max_slots(self) -> int:
        return self.num_pages - self.min_page_index

    def allocated_count(self) -> int:
        """Live state slots (holes not counted)."""
        return int(self._owner_pool.state.live)

    def clear(self) -> None:
        """Every state slot free; the token members are left as they are."""
        self._owner_pool.clear_state_slots()

    def is_slot_allocated(self, slot: int) -> bool:
        v2p = self._owner_pool.state.v2p
        return 0 <= int(slot) < len(v2p) and bool(v2p[int(slot)] >= 0)

    def allocator_state_str(self) -> str:
        s = self._owner_pool.state
        return (f"sub_pool='mamba', grow_direction=up, page_size=1, min_page_index={s.min_page}, "
                f"num_pages={s.num_pages}, watermark_physical={s.watermark}, live={s.live}, "
                f"holes={s.num_holes()}")
