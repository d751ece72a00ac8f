"""kvpool's Mamba state-slot allocator: SGLang 0.5.23's ``MambaSlotAllocator`` API with its
caller errors checked (``MSLOT-*``, SPEC.md section 18; model: :mod:`kvpool.spec.mamba_slots`).

The free list is a ring of slot ids in numpy (an ``alloc`` or ``free`` costs the slots it moves,
never a copy of the whole list as SGLang's ``torch.cat`` does); a status byte per state row says
whether a slot is free, held by the caller, pre-allocated to the open group, or reserved (row 0),
so a checked ``free`` is a few vectorized reads. Results are int64 tensors on ``device``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from kvpool.spec.errors import ContractViolation
from kvpool.spec.mamba_slots import RESERVED_SLOT, check_count, check_free

FREE, HELD, GROUP, RESERVED = 0, 1, 2, 3  # a state row's status


class MambaSlotAllocator:
    """``size`` request slots ``1..size`` (row 0 reserved) handed out front first, freed to
    the back, with SGLang's pre-allocated groups (``alloc_group_begin`` / ``alloc_group_end``).

    ``checked`` (default True): a negative count (``MSLOT-7``), a nested group (``MSLOT-8``)
    and a free of a slot not held (``MSLOT-6``) raise ContractViolation before anything
    changes. Unchecked, such calls behave as SGLang's where that is harmless (a negative count
    is taken as 0, a nested begin first ends the open group) and a bad free is appended as is.
    """

    def __init__(self, size: int, device: Any = "cpu", *, checked: bool = True) -> None:
        if size < 0:
            raise ValueError(f"size {size}: a pool has at least 0 slots")
        self.size, self.device, self.checked = size, device, checked
        self._status = np.zeros(size + 1, dtype=np.uint8)
        self._ring = np.zeros(max(size, 1), dtype=np.int64)
        self._head = self._count = 0
        self._group: np.ndarray | None = None  # the open group's pre-allocated slots
        self._drawn = 0  # how many of them alloc(1) has handed out
        self.clear()

    # -- views ---------------------------------------------------------------------------------
    @property
    def free_slots(self) -> torch.Tensor:
        """The free list, front first (a copy; SGLang's attribute of the same name)."""
        return torch.from_numpy(self._peek(self._count)).to(self.device)

    def available_size(self) -> int:
        """Free slots; the open group's undrawn slots are not counted (``MSLOT-2``)."""
        return self._count

    def schedulable_available_size(self) -> int:
        """The planner's free count: ``available_size()`` for a static pool."""
        return self._count

    # -- the ring --------------------------------------------------------------------------------
    def _peek(self, count: int) -> np.ndarray:
        cap = len(self._ring)
        idx = (self._head + np.arange(count)) % cap
        return self._ring[idx]

    def _take(self, count: int) -> np.ndarray:
        out = self._peek(count)
        self._head = (self._head + count) % len(self._ring)
        self._count -= count
        return out

    def _push(self, slots: np.ndarray) -> None:
        if self._count + len(slots) > len(self._ring):  # only an unchecked double free
            self._ring = np.concatenate([self._peek(self._count),
                                         np.zeros(self._count + len(slots), dtype=np.int64)])
            self._head = 0
        cap = len(self._ring)
        self._ring[(self._head + self._count + np.arange(len(slots))) % cap] = slots
        self._count += len(slots)
        self._status[slots] = FREE

    def _out(self, slots: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(slots)).to(self.device)

    # -- SGLang's calls ----------------------------------------------------------------------------
    def alloc(self, need_size: int) -> torch.Tensor | None:
        """The first ``need_size`` free slots (``MSLOT-3``), or None with nothing changed when
        fewer are free (``MSLOT-4``); inside a group ``alloc(1)`` draws the group's next slot
        while any remain (``MSLOT-9``). Raises ContractViolation (``MSLOT-7``, checked) for a
        negative ``need_size``."""
        if self.checked:
            check_count(need_size, "alloc")
        need_size = max(need_size, 0)
        group = self._group
        if need_size == 1 and group is not None and self._drawn < len(group):
            slot = group[self._drawn:self._drawn + 1]
            self._drawn += 1
            self._status[slot] = HELD
            return self._out(slot)
        if need_size > self._count:
            return None
        out = self._take(need_size)
        self._status[out] = HELD
        return self._out(out)

    def free(self, free_index: torch.Tensor) -> None:
        """Append the slots to the back of the free list in the order given (``MSLOT-5``).
        Raises ContractViolation (``MSLOT-6``, checked), changing nothing, for slot 0, a slot
        outside ``1..size``, one that is not held or one named twice."""
        slots = free_index.reshape(-1).to("cpu", torch.int64).numpy()
        if slots.size == 0:
            return
        if self.checked:
            self._check_free(slots)
        self._push(slots)

    def _check_free(self, slots: np.ndarray) -> None:
        inside = (slots >= 1) & (slots <= self.size)
        held = bool(inside.all()) and bool((self._status[slots] == HELD).all())
        if not held or len(np.unique(slots)) != len(slots):
            named = slots.tolist()
            owned = {s for s in named if 1 <= s <= self.size and self._status[s] == HELD}
            check_free(named, owned, self.size)  # raises the spec's ContractViolation

    def alloc_group_begin(self, num_reqs: int) -> None:
        """Open a group pre-allocating the first ``num_reqs`` free slots, or none when fewer
        are free or ``num_reqs`` is 0 (``MSLOT-8``). Raises ContractViolation (checked) inside
        an open group (``MSLOT-8``) or for a negative count (``MSLOT-7``)."""
        if self.checked:
            if self._group is not None:
                raise ContractViolation("MSLOT-8", "alloc_group_begin inside an open group "
                                                   "(groups do not nest)")
            check_count(num_reqs, "alloc_group_begin")
        self.alloc_group_end()
        fits = 0 < num_reqs <= self._count
        self._group = self._take(num_reqs) if fits else np.zeros(0, dtype=np.int64)
        self._drawn = 0
        self._status[self._group] = GROUP

    def alloc_group_end(self) -> None:
        """Close the open group; its undrawn slots go to the back of the free list in order
        (``MSLOT-10``). Without an open group: nothing."""
        group, self._group = self._group, None
        if group is not None and self._drawn < len(group):
            self._push(group[self._drawn:])
        self._drawn = 0

    def clear(self) -> None:
        """Every slot free, ``1..size`` ascending; an open group is closed (``MSLOT-11``)."""
        self._status[:] = FREE
        self._status[RESERVED_SLOT] = RESERVED
        self._ring = np.arange(1, max(self.size, 1) + 1, dtype=np.int64)
        self._head, self._count = 0, self.size
        self._group, self._drawn = None, 0

    def check_invariants(self) -> None:
        """Raise AssertionError unless the free list, the open group's undrawn slots and the
        held slots are ``1..size`` once each and the status bytes agree (``MSLOT-1``)."""
        free = self._peek(self._count)
        group = self._group[self._drawn:] if self._group is not None else free[:0]
        held = np.flatnonzero(self._status == HELD)
        every = np.sort(np.concatenate([free, group, held]))
        assert every.tolist() == list(range(1, self.size + 1)), "MSLOT-1: slots lost or doubled"
        assert (self._status[free] == FREE).all() and (self._status[group] == GROUP).all()
        assert self._status[RESERVED_SLOT] == RESERVED, "MSLOT-1: row 0 is not reserved"
