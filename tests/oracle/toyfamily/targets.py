"""The toy family's targets and what they support.

A toy factory is called as ``factory(size=N)`` and returns an allocator with
:class:`~toyfamily.allocator.SlotAllocator`'s methods; ``factory.toy_capabilities`` declares
what it supports (:class:`ToyCapabilities`). One configuration (page size 1, ``need_sort``
false): the pool has no pages and nothing to sort.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kvpool.oracle.engine.capabilities import Capabilities, declare_all

from .allocator import LifoSlotAllocator, SlotAllocator, SlotFreeError, UncheckedFreeAllocator


@dataclass(frozen=True)
class ToyCapabilities(Capabilities):
    """The fields a toy target uses: ``checked`` (the types ``free`` raises for a slot not
    held; ``False``: no bad free is sent) and ``clear``; the rest are not printed."""

    UNUSED: ClassVar[tuple[str, ...]] = (
        "paged", "page_sizes", "need_sort", "extend", "decode_ps1", "groups", "segments",
        "reference_order", "shortage_raises", "page_ids", "base_api", "resize", "merge",
        "capacity_hooks", "capacity_context", "ownership", "slot_forms")
    CHECKABLE_CALLS: ClassVar[tuple[str, ...]] = ("free",)

    paged: bool = False
    page_sizes: tuple[int, ...] = (1,)
    need_sort: tuple[bool, ...] = (False,)
    extend: bool = False
    ownership: bool = False
    slot_forms: tuple[str, ...] = ()


FULL = declare_all(ToyCapabilities(checked=SlotFreeError))


def toy(*, size: int) -> SlotAllocator:
    """The correct toy allocator (checked free)."""
    return SlotAllocator(size)


def toy_lifo(*, size: int) -> SlotAllocator:
    """Broken: freed slots are reused first (SLOT-3)."""
    return LifoSlotAllocator(size)


def toy_unchecked_free(*, size: int) -> SlotAllocator:
    """Broken: a double free is accepted (SLOT-4), though it declares the checked type."""
    return UncheckedFreeAllocator(size)


for _factory in (toy, toy_lifo, toy_unchecked_free):
    _factory.toy_capabilities = FULL  # type: ignore[attr-defined]
