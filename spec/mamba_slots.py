"""Request slots of a Mamba state pool (``MSLOT-*``, SPEC.md section 18).

SGLang's ``MambaSlotAllocator`` keeps the free list of a ``MambaPool``: one whole state tensor
per request, so it hands out fixed slots (one per request), not paged token indices. A pool of
``size`` slots has state rows ``0..size``; row 0 is the dummy write target of padded tokens and
never handed out (``MSLOT-1``). :class:`MambaSlotModel` is the reference model, standard library
only, taking and returning lists of ints where SGLang takes and returns int64 tensors::

    free list   [3, 4, 1]        alloc(2) -> [3, 4]        free([4]) -> [1, 4]
    group       begin(2) takes [1, 4] off the free list; alloc(1) -> [1]; end() -> free [.., 4]

Caller errors raise :class:`~kvpool.spec.errors.ContractViolation` naming the clause and change
nothing (``ERR-1``). The arithmetic is list bookkeeping only (no page or byte formula), so there
is no Z3 lemma; the PEP 316 contracts below are evaluated at run time on random call sequences
and CrossHair finds no counterexample to them (``tests/spec/test_spec_mamba_slot.py``, the
latter marked ``crosshair``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import ContractViolation

RESERVED_SLOT = 0  # the dummy state row of padded tokens (MSLOT-1)


def check_count(count: int, call: str) -> None:
    """Reject a negative slot count (``MSLOT-7``): ``alloc(n)`` and ``alloc_group_begin(n)``
    take ``n >= 0``. SGLang does not check; its ``alloc(-k)`` hands out every free slot but the
    last ``k`` (``free_slots[:-k]``).

    pre: -8 <= count <= 8
    post: count >= 0
    raises: ContractViolation
    """
    if count < 0:
        raise ContractViolation("MSLOT-7", f"{call}({count}): a slot count is never negative")


def check_free(slots: Sequence[int], held: set[int], size: int) -> None:
    """Reject a free of a slot the caller does not hold (``MSLOT-6``): slot 0 (reserved), a
    slot outside ``1..size``, a slot that is free or pre-allocated to the open group, or one
    named twice in ``slots``. Nothing is checked against order: any order of held slots is
    valid.

    pre: len(slots) <= 6 and len(held) <= 16 and 0 <= size <= 16
    post: len(set(slots)) == len(slots) and set(slots) <= held
    raises: ContractViolation
    """
    seen: set[int] = set()
    for slot in slots:
        if slot == RESERVED_SLOT:
            raise ContractViolation("MSLOT-6", "slot 0 is reserved (the padding row); never held")
        if not 1 <= slot <= size:
            raise ContractViolation("MSLOT-6", f"slot {slot} is outside 1..{size}")
        if slot in seen:
            raise ContractViolation("MSLOT-6", f"slot {slot} is named twice in one free")
        if slot not in held:
            raise ContractViolation("MSLOT-6", f"slot {slot} is not held (free, or pre-allocated "
                                               "to the open group)")
        seen.add(slot)


class MambaSlotModel:
    """The slot pool: ``free_slots`` (the free list, front first), ``group`` (the open group's
    pre-allocated slots not yet drawn, in order; None: no group open) and ``held`` (the slots
    the caller holds). ``rule`` is the clause that decided the last call's effect (the oracle
    reports a difference there under it).

    inv: sorted(self.free_slots + (self.group or []) + sorted(self.held)) == list(range(1, self.size + 1))
    inv: RESERVED_SLOT not in self.free_slots and RESERVED_SLOT not in self.held
    """

    def __init__(self, size: int) -> None:
        """A fresh pool: slots ``1..size`` free in ascending order (``MSLOT-1``).

        pre: 0 <= size <= 16
        post: self.free_slots == list(range(1, size + 1)) and self.group is None
        raises: ContractViolation
        """
        if size < 0:
            raise ContractViolation("MSLOT-1", f"size {size}: a pool has at least 0 slots")
        self.size = size
        self.free_slots: list[int] = []
        self.group: list[int] | None = None
        self.held: set[int] = set()
        self.rule = "MSLOT-1"
        self.cleared_group = False  # clear() closed an open group (MSLOT-11)
        self.clear()
        self.rule = "MSLOT-1"

    def available_size(self) -> int:
        """The number of free slots; the open group's pre-allocated slots are not counted
        (``MSLOT-2``). ``schedulable_available_size()`` is the same number.

        post: __return__ == len(self.free_slots)
        """
        return len(self.free_slots)

    def _take(self, count: int) -> list[int]:
        out, self.free_slots = self.free_slots[:count], self.free_slots[count:]
        return out

    def alloc(self, need_size: int) -> list[int] | None:
        """The first ``need_size`` free slots, taken off the front of the free list
        (``MSLOT-3``); None, changing nothing, when fewer are free (``MSLOT-4``). Inside a
        group ``alloc(1)`` draws the group's next pre-allocated slot while any remain
        (``MSLOT-9``). Raises ContractViolation (``MSLOT-7``) for a negative ``need_size``.

        pre: -2 <= need_size <= 8
        post: __return__ is None or len(__return__) == need_size
        post: __return__ is not None or self.free_slots == __old__.self.free_slots
        raises: ContractViolation
        """
        check_count(need_size, "alloc")
        if need_size == 1 and self.group:
            self.rule = "MSLOT-9"  # a pre-allocated slot, in the order taken
            out = [self.group.pop(0)]
        elif need_size > len(self.free_slots):
            self.rule = "MSLOT-4"
            return None
        else:
            self.rule = "MSLOT-11" if need_size == 1 and self.cleared_group else (
                "MSLOT-9" if self.group is not None else "MSLOT-3")
            out = self._take(need_size)
        self.held.update(out)
        return out

    def free(self, slots: Sequence[int]) -> None:
        """Append ``slots`` to the back of the free list in the order given (``MSLOT-5``); an
        empty free does nothing. Raises ContractViolation (``MSLOT-6``), changing nothing, for
        a slot the caller does not hold.

        pre: len(slots) <= 6
        post: self.free_slots == __old__.self.free_slots + list(slots)
        raises: ContractViolation
        """
        check_free(slots, self.held, self.size)
        self.rule = "MSLOT-5"
        self.held.difference_update(slots)
        self.free_slots += list(slots)

    def alloc_group_begin(self, num_reqs: int) -> None:
        """Open a group and pre-allocate the first ``num_reqs`` free slots for it
        (``MSLOT-8``); with ``num_reqs == 0`` or more than are free the group holds none (and
        the free list is unchanged). Raises ContractViolation (``MSLOT-8``) when a group is open
        already (SGLang drops that group's undrawn slots: a leak), ``MSLOT-7`` for a negative
        count.

        pre: -2 <= num_reqs <= 8
        post: self.group is not None
        raises: ContractViolation
        """
        if self.group is not None:
            raise ContractViolation("MSLOT-8", "alloc_group_begin inside an open group "
                                               "(groups do not nest)")
        check_count(num_reqs, "alloc_group_begin")
        self.rule, self.cleared_group = "MSLOT-8", False
        fits = 0 < num_reqs <= len(self.free_slots)
        self.group = self._take(num_reqs) if fits else []

    def alloc_group_end(self) -> None:
        """Close the open group: its undrawn pre-allocated slots go to the back of the free
        list in order (``MSLOT-10``); without an open group nothing happens.

        post: self.group is None
        post: self.free_slots == __old__.self.free_slots + (__old__.self.group or [])
        """
        self.rule = "MSLOT-11" if self.cleared_group else "MSLOT-10"
        self.free_slots += self.group or []
        self.group, self.cleared_group = None, False

    def clear(self) -> None:
        """Every slot free again, ``1..size`` in ascending order, and an open group closed
        with its slots (``MSLOT-11``): nothing held, nothing pre-allocated.

        post: self.free_slots == list(range(1, self.size + 1))
        post: self.group is None and not self.held
        """
        self.rule = "MSLOT-11"
        self.cleared_group = self.group is not None
        self.free_slots = list(range(1, self.size + 1))
        self.group = None
        self.held = set()

    def check_invariants(self) -> None:
        """Raise AssertionError unless free, pre-allocated and held slots are ``1..size``,
        each once (``MSLOT-1``), slot 0 among none of them."""
        every = [*self.free_slots, *(self.group or []), *sorted(self.held)]
        assert sorted(every) == list(range(1, self.size + 1)), (
            f"MSLOT-1: free {self.free_slots}, group {self.group}, held {sorted(self.held)} "
            f"are not 1..{self.size} once each")
