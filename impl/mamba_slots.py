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
SMALL = 32  # a free of at most this many slots is checked in Python ints


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
        self._on_cpu = torch.device(device).type == "cpu"
        # a status byte per state row (read per slot), and a reserved sentinel row past the end
        self._flags = bytearray(size + 2)
        self._stamp = np.zeros(size + 2, dtype=np.int64)  # scratch of the duplicate check
        self._status = np.frombuffer(self._flags, dtype=np.uint8)  # the same bytes, vectorized
        self._ring = np.zeros(max(size, 1), dtype=np.int64)
        self._head = self._count = 0
        self._group: np.ndarray | None = None  # the open group's pre-allocated slots
        self._ids: list[int] = []  # the same, as ints
        self._parts: tuple[torch.Tensor, ...] = ()  # the same, one tensor each
        self._drawn = 0  # how many of them alloc(1) has handed out
        self.clear()

    # -- views ---------------------------------------------------------------------------------
    @property
    def free_slots(self) -> torch.Tensor:
        """The free list, front first (a copy; SGLang's attribute of the same name)."""
        return self._out(self._peek(self._count))

    def available_size(self) -> int:
        """Free slots; the open group's undrawn slots are not counted (``MSLOT-2``)."""
        return self._count

    def schedulable_available_size(self) -> int:
        """The planner's free count: ``available_size()`` for a static pool."""
        return self._count

    # -- the ring --------------------------------------------------------------------------------
    def _peek(self, count: int) -> np.ndarray:
        """The first ``count`` free slots, front first (a copy)."""
        ring, head = self._ring, self._head
        end = head + count
        if end <= len(ring):
            return ring[head:end].copy()
        return np.concatenate((ring[head:], ring[:end - len(ring)]))

    def _take(self, count: int) -> np.ndarray:
        out = self._peek(count)
        self._head = (self._head + count) % len(self._ring)
        self._count -= count
        return out

    def _push(self, slots: np.ndarray) -> None:
        num = len(slots)
        if self._count + num > len(self._ring):  # only an unchecked double free
            grown = np.zeros(self._count + num, dtype=np.int64)
            grown[:self._count] = self._peek(self._count)
            self._ring, self._head = grown, 0
        ring = self._ring
        tail = (self._head + self._count) % len(ring)
        first = min(num, len(ring) - tail)
        ring[tail:tail + first] = slots[:first]
        ring[:num - first] = slots[first:]
        self._count += num
        # unchecked, a slot outside 1..size is listed free as SGLang lists it, without a status
        self._status[slots if self.checked else slots[(slots >= 1) & (slots <= self.size)]] = FREE

    def _push_ints(self, named: list[int]) -> None:
        """``_push`` of a few slots given as ints."""
        num, ring = len(named), self._ring
        tail = (self._head + self._count) % len(ring)
        if self._count + num > len(ring) or tail + num > len(ring):
            self._push(np.array(named, dtype=np.int64))
            return
        ring[tail:tail + num] = named
        self._count += num
        flags = self._flags
        for slot in named:
            flags[slot] = FREE

    def _out(self, slots: np.ndarray) -> torch.Tensor:
        out = torch.from_numpy(slots)
        return out if self._on_cpu else out.to(self.device)

    # -- SGLang's calls ----------------------------------------------------------------------------
    def alloc(self, need_size: int) -> torch.Tensor | None:
        """The first ``need_size`` free slots (``MSLOT-3``), or None with nothing changed when
        fewer are free (``MSLOT-4``); inside a group ``alloc(1)`` draws the group's next slot
        while any remain (``MSLOT-9``). Raises ContractViolation (``MSLOT-7``, checked) for a
        negative ``need_size``."""
        if need_size < 0:
            if self.checked:
                check_count(need_size, "alloc")
            need_size = 0
        if need_size == 1 and self._drawn < len(self._parts):
            drawn = self._drawn
            self._drawn = drawn + 1
            self._flags[self._ids[drawn]] = HELD
            return self._parts[drawn]
        if need_size > self._count:
            return None
        out = self._take(need_size)
        self._status[out] = HELD
        return self._out(out)

    def free(self, free_index: torch.Tensor) -> None:
        """Append the slots to the back of the free list in the order given (``MSLOT-5``).
        Raises ContractViolation (``MSLOT-6``, checked), changing nothing, for slot 0, a slot
        outside ``1..size``, one that is not held or one named twice."""
        num = free_index.numel()
        if num == 0:
            return
        if num <= SMALL:  # Python ints beat numpy's per-call cost on a few slots
            named = free_index.reshape(-1).tolist()
            status, size = self._flags, self.size
            if not self.checked:
                if all(type(x) is int and 0 < x <= size for x in named):
                    self._push_ints(named)
                else:
                    self._push(np.array(named, dtype=np.int64))
                return
            if len(set(named)) != num or not all(
                    type(x) is int and 0 < x <= size and status[x] == HELD for x in named):
                self._reject(named)
            self._push_ints(named)
            return
        if free_index.device.type != "cpu" or free_index.dtype != torch.int64:
            free_index = free_index.to("cpu", torch.int64)
        slots = free_index.reshape(-1).numpy()
        if self.checked:
            self._check_free(slots)
        self._push(slots)

    def _check_free(self, slots: np.ndarray) -> None:
        """Raise the spec's ContractViolation (``MSLOT-6``) unless every slot is held, once."""
        # clipped reads: a slot below 1 reads row 0, one past the end the sentinel row
        if bool((self._status.take(slots, mode="clip") == HELD).all()):
            # a slot named twice: its first position is overwritten by a later one
            order = np.arange(len(slots), dtype=np.int64)
            self._stamp[slots] = order
            if bool((self._stamp[slots] == order).all()):
                return
        self._reject(slots.tolist())

    def _reject(self, named: list[int]) -> None:
        owned = {s for s in named if 1 <= s <= self.size and self._flags[s] == HELD}
        check_free(named, owned, self.size)  # raises the spec's ContractViolation
        raise AssertionError("unreachable: the spec accepts a free the allocator refused")

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
        group = self._take(num_reqs) if fits else np.zeros(0, dtype=np.int64)
        self._group, self._drawn, self._ids = group, 0, group.tolist()
        # alloc(1)'s results, one view each as SGLang's (an empty tensor splits into one part)
        self._parts = torch.split(self._out(group.copy()), 1) if fits else ()
        self._status[group] = GROUP

    def alloc_group_end(self) -> None:
        """Close the open group; its undrawn slots go to the back of the free list in order
        (``MSLOT-10``). Without an open group: nothing."""
        group, self._group = self._group, None
        if group is not None and self._drawn < len(group):
            self._push(group[self._drawn:])
        self._drawn, self._parts, self._ids = 0, (), []

    def clear(self) -> None:
        """Every slot free, ``1..size`` ascending; an open group is closed (``MSLOT-11``)."""
        self._status[:] = FREE
        self._status[RESERVED_SLOT] = self._status[self.size + 1] = RESERVED
        self._ring = np.arange(1, max(self.size, 1) + 1, dtype=np.int64)
        self._head, self._count = 0, self.size
        self._group, self._drawn, self._parts, self._ids = None, 0, (), []

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
