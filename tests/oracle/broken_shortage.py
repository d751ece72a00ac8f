"""Allocators that raise on a shortage instead of returning None (``shortage_raises``).

``ShortageRaises`` is correct in every other respect (kvcached 0.1.6's token allocator behaves
so: ``KVC-SHORT-RAISES``); the two broken ones show that the relaxed check still judges a
shortage: one takes the free pages before it raises (the state changed), one hands out what is
free instead of raising (slots handed out on a shortage). All declare
``shortage_raises=TypeError``.
"""

from __future__ import annotations

from typing import Any

from broken_allocators import Broken, factory_of
from broken_events import AllocPartialWhenShort
from kvpool.oracle.engine.capabilities import PAGED
from spec_torch import SpecTorchAllocator

CAPS = PAGED.replace(page_sizes=(4,), shortage_raises=TypeError)


class ShortageRaises(SpecTorchAllocator):
    """Every allocation that the spec answers with None raises TypeError instead (as
    ``torch.tensor(None)`` does); the spec's state after the None is kept."""

    def _out(self, slots: list[int] | None) -> Any:
        if slots is None:
            raise TypeError("'NoneType' object cannot be interpreted as an integer")
        return super()._out(slots)


class ShortageTakesThenRaises(ShortageRaises):
    """On a shortage the free pages are taken before the raise (they leak)."""

    def _out(self, slots: list[int] | None) -> Any:
        if slots is None:
            self.model._take(len(self.model.free_pages))
        return super()._out(slots)


class ShortageHandsOutFree(AllocPartialWhenShort, ShortageRaises):
    """``alloc`` short while some pages are free hands those out instead of raising (the bug
    of ``AllocPartialWhenShort``, under the declaration)."""


SHORTAGE_BROKEN: tuple[Broken, ...] = (
    Broken(ShortageTakesThenRaises, ("EXTEND-6",), module="broken_shortage"),
    Broken(ShortageHandsOutFree, ("ALLOC-3",), module="broken_shortage"),
)
shortageraises = factory_of(ShortageRaises, CAPS)
for _b in SHORTAGE_BROKEN:  # importable factories
    globals().setdefault(_b.name, factory_of(_b.cls, CAPS))
