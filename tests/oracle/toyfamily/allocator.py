"""The toy family's target: a request-slot allocator as SGLang's ``ReqToTokenPool`` keeps its
slots (a Python free list, slots ``0..size-1``), with a checked ``free``; and two broken ones.

``free`` of a slot that is not held (already free, out of range, or named twice in one call)
raises :class:`SlotFreeError` before it changes anything (``SLOT-4``).
"""

from __future__ import annotations


class SlotFreeError(ValueError):
    """A free of a slot that the caller does not hold (the target's typed rejection)."""


class SlotAllocator:
    """``size`` request slots; ``free_slots`` is the free list, front first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.free_slots: list[int] = list(range(size))

    def available_size(self) -> int:
        """The number of free slots."""
        return len(self.free_slots)

    def alloc(self, need_size: int) -> list[int] | None:
        """The first ``need_size`` free slots, or None (nothing changed) when fewer are free."""
        if need_size > len(self.free_slots):
            return None
        out = self.free_slots[:need_size]
        self.free_slots = self.free_slots[need_size:]
        return out

    def free(self, slots: list[int]) -> None:
        """Append ``slots`` to the free list. Raises SlotFreeError, changing nothing, for a
        slot that is not held."""
        self._check(slots)
        self.free_slots.extend(slots)

    def _check(self, slots: list[int]) -> None:
        free = set(self.free_slots)
        for i, s in enumerate(slots):
            if not 0 <= s < self.size or s in free or s in slots[:i]:
                raise SlotFreeError(f"slot {s} is not held")

    def clear(self) -> None:
        """Every slot free again, in order."""
        self.free_slots = list(range(self.size))


class LifoSlotAllocator(SlotAllocator):
    """Broken: a free puts its slots at the front, so the latest freed are reused first
    (breaks SLOT-3)."""

    def free(self, slots: list[int]) -> None:
        self._check(slots)
        self.free_slots = [*slots, *self.free_slots]


class UncheckedFreeAllocator(SlotAllocator):
    """Broken: ``free`` does not check its slots, so a double free is accepted (breaks
    SLOT-4)."""

    def free(self, slots: list[int]) -> None:
        self.free_slots.extend(slots)
