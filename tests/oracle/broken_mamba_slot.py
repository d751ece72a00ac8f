"""Deliberately broken Mamba state-slot allocators: one bug each, on kvpool's
``MambaSlotAllocator``, each with the one ``MSLOT-*`` clause the mamba-slot family reports it
under at its default budget (``BROKEN_MAMBA_SLOT``; ``test_oracle_mamba_slot.py`` runs them).
Each has a module-level factory (its name in lower case) that a printed repro imports."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from kvpool.impl.mamba_slots import MambaSlotAllocator
from kvpool.oracle.engine.families import family
from kvpool.oracle.engine.runner import Result, run_config
from kvpool.oracle.engine.target import Config
from kvpool.oracle.families.mamba_slot.targets import FULL


class SlotZeroHandedOut(MambaSlotAllocator):
    """The free list starts at the reserved slot 0: ``0..size-1`` (MSLOT-1)."""

    def clear(self) -> None:
        super().clear()
        self._ring = np.arange(0, max(self.size, 1), dtype=np.int64)


class AvailableCountsGroup(MambaSlotAllocator):
    """``available_size()`` counts the open group's undrawn slots as free (MSLOT-2)."""

    def available_size(self) -> int:
        undrawn = len(self._group) - self._drawn if self._group is not None else 0
        return self._count + undrawn

    def schedulable_available_size(self) -> int:
        return self.available_size()


class LifoAlloc(MambaSlotAllocator):
    """``alloc(n)`` takes the last ``n`` free slots, not the first (MSLOT-3)."""

    def alloc(self, need_size: int) -> torch.Tensor | None:
        group = self._group
        if need_size == 1 and group is not None and self._drawn < len(group):
            return super().alloc(need_size)
        if not 0 < need_size <= self._count:
            return super().alloc(need_size)
        free = self._peek(self._count)
        out, rest = free[self._count - need_size:], free[:self._count - need_size]
        self._ring[:len(rest)], self._head, self._count = rest, 0, len(rest)
        self._status[out] = 1
        return self._out(out)


class ShortageHandsOutRest(MambaSlotAllocator):
    """A request for more than are free gets every free slot instead of None (MSLOT-4)."""

    def alloc(self, need_size: int) -> torch.Tensor | None:
        if need_size > self._count and not (need_size == 1 and self._group is not None
                                             and self._drawn < len(self._group)):
            need_size = self._count
        return super().alloc(need_size)


class FreePrepends(MambaSlotAllocator):
    """``free`` puts the slots at the front of the free list: the latest freed are reused
    first (MSLOT-5)."""

    def free(self, free_index: torch.Tensor) -> None:
        before = self._peek(self._count)
        super().free(free_index)
        freed = free_index.reshape(-1).numpy()
        merged = np.concatenate([freed, before])
        self._ring = np.concatenate([merged, np.zeros(max(self.size, 1), dtype=np.int64)])
        self._head, self._count = 0, len(merged)


class UncheckedFree(MambaSlotAllocator):
    """``free`` appends whatever it is given: a double free or slot 0 is accepted (MSLOT-6)."""

    def free(self, free_index: torch.Tensor) -> None:
        self.checked = False  # the caller errors of every other call stay checked
        try:
            super().free(free_index)
        finally:
            self.checked = True


class NegativeAllocAccepted(MambaSlotAllocator):
    """``alloc(-k)`` hands out every free slot but the last ``k``, as SGLang's
    ``free_slots[:-k]`` (MSLOT-7)."""

    def alloc(self, need_size: int) -> torch.Tensor | None:
        if need_size < 0:
            need_size = max(self._count + need_size, 0)
        return super().alloc(need_size)


class ShortGroupTakesAll(MambaSlotAllocator):
    """A group asking for more than are free pre-allocates every free slot (MSLOT-8)."""

    def alloc_group_begin(self, num_reqs: int) -> None:
        if self._group is None and num_reqs > self._count:
            num_reqs = self._count
        super().alloc_group_begin(num_reqs)


class GroupIgnoredByAllocOne(MambaSlotAllocator):
    """``alloc(1)`` inside a group takes from the free list, leaving the group's slots for its
    end (MSLOT-9)."""

    def alloc(self, need_size: int) -> torch.Tensor | None:
        parts, self._parts = self._parts, ()
        try:
            return super().alloc(need_size)
        finally:
            self._parts = parts


class GroupEndLeaks(MambaSlotAllocator):
    """``alloc_group_end`` drops the undrawn slots instead of returning them (MSLOT-10)."""

    def alloc_group_end(self) -> None:
        self._group, self._drawn, self._parts, self._ids = None, 0, (), []


class ClearKeepsGroup(MambaSlotAllocator):
    """``clear`` resets the free list but keeps the open group, as SGLang 0.5.23 does: the next
    ``alloc(1)`` draws a slot ``clear`` listed free (MSLOT-11)."""

    def clear(self) -> None:
        kept = [getattr(self, name, None) for name in ("_group", "_drawn", "_parts", "_ids")]
        super().clear()
        if kept[0] is not None:
            self._group, self._drawn, self._parts, self._ids = kept


@dataclass(frozen=True)
class BrokenMambaSlot:
    """A broken mamba-slot allocator, the clause the family reports it under (``clauses``, a
    1-tuple) and the clause its bug breaks (``cause``; the same for every one here)."""

    cls: type[MambaSlotAllocator]
    clauses: tuple[str, ...]
    module: str = "broken_mamba_slot"
    cause: str = ""

    def __post_init__(self) -> None:
        if not self.cause:
            object.__setattr__(self, "cause", self.clauses[0])

    @property
    def name(self) -> str:
        return self.cls.__name__.lower()

    @property
    def factory(self) -> Callable[..., Any]:
        """The module-level factory ``<module>:<name>`` (importable for repro code)."""
        return getattr(importlib.import_module(self.module), self.name)  # type: ignore[no-any-return]

    @property
    def path(self) -> str:
        return f"{self.module}:{self.name}"

    def run(self, **budget: Any) -> Result:
        """One run of the mamba-slot family on this allocator (its one configuration), at the
        family's default budget unless ``budget`` (``run_config``'s keywords) says otherwise."""
        fam = family("mamba_slot")
        budget = {"max_examples": fam.default_examples, "step_count": fam.default_steps,
                  **budget}
        return run_config(fam.target(self.factory), Config(1, False), **budget)

    def reported(self, **budget: Any) -> str | None:
        """The clause the run reports (None: it passed)."""
        result = self.run(**budget)
        assert result.error is None, result.error
        return result.failure.clause if result.failure is not None else None


BROKEN_MAMBA_SLOT = (
    BrokenMambaSlot(SlotZeroHandedOut, ("MSLOT-1",)),
    BrokenMambaSlot(AvailableCountsGroup, ("MSLOT-2",)),
    BrokenMambaSlot(LifoAlloc, ("MSLOT-3",)),
    BrokenMambaSlot(ShortageHandsOutRest, ("MSLOT-4",)),
    BrokenMambaSlot(FreePrepends, ("MSLOT-5",)),
    BrokenMambaSlot(UncheckedFree, ("MSLOT-6",)),
    BrokenMambaSlot(NegativeAllocAccepted, ("MSLOT-7",)),
    BrokenMambaSlot(ShortGroupTakesAll, ("MSLOT-8",)),
    BrokenMambaSlot(GroupIgnoredByAllocOne, ("MSLOT-9",)),
    BrokenMambaSlot(GroupEndLeaks, ("MSLOT-10",)),
    BrokenMambaSlot(ClearKeepsGroup, ("MSLOT-11",)),
)


def _factory(cls: type[MambaSlotAllocator]) -> Callable[..., Any]:
    def factory(*, size: int, need_sort: bool = False, device: str = "cpu") -> Any:
        return cls(size, device)

    factory.__name__ = factory.__qualname__ = cls.__name__.lower()
    factory.kvpool_mamba_slot_capabilities = FULL  # type: ignore[attr-defined]
    return factory


for _broken in BROKEN_MAMBA_SLOT:
    globals()[_broken.name] = _factory(_broken.cls)
