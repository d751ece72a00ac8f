"""The toy family's spec model: a pool of ``size`` request slots, numbered ``0..size-1``.

Clauses (this family's own; not in SPEC.md):

- ``SLOT-1`` capacity: a fresh or cleared pool holds every slot free, in order ``0..size-1``;
  ``available_size()`` is the number of free slots.
- ``SLOT-2`` shortage: ``alloc(n)`` returns None exactly when fewer than ``n`` slots are free,
  and then changes nothing.
- ``SLOT-3`` FIFO reuse: ``alloc(n)`` hands out the first ``n`` free slots; ``free(slots)``
  appends them at the back, in the order given.
- ``SLOT-4`` freeing a slot that is not held (already free, or out of range, or named twice in
  one call) raises ``ContractViolation("SLOT-4")`` and changes nothing.
"""

from __future__ import annotations

from kvpool.spec.errors import ContractViolation


class SlotModel:
    """The reference model (standard library only); ``free_slots`` is the free list in order."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.free_slots: list[int] = list(range(size))  # SLOT-1

    def available_size(self) -> int:
        return len(self.free_slots)  # SLOT-1

    def alloc(self, need_size: int) -> list[int] | None:
        if need_size > len(self.free_slots):
            return None  # SLOT-2
        out, self.free_slots = self.free_slots[:need_size], self.free_slots[need_size:]
        return out  # SLOT-3

    def free(self, slots: list[int]) -> None:
        free = set(self.free_slots)
        for i, s in enumerate(slots):
            if not 0 <= s < self.size or s in free or s in slots[:i]:
                raise ContractViolation("SLOT-4", f"slot {s} is not held")
        self.free_slots += slots  # SLOT-3

    def clear(self) -> None:
        self.free_slots = list(range(self.size))  # SLOT-1

    def check_invariants(self) -> None:
        """The free slots are distinct slots of the pool (``SLOT-1``).

        Raises:
            ContractViolation: ``SLOT-1`` when they are not.
        """
        if len(set(self.free_slots)) != len(self.free_slots) or not all(
                0 <= s < self.size for s in self.free_slots):
            raise ContractViolation("SLOT-1", f"free slots {self.free_slots} are not distinct "
                                              f"slots of 0..{self.size - 1}")
