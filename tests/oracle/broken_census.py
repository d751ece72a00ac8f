"""Broken allocators whose free list goes wrong in a free or a merge: the report names the
rule of that call as the cause and the census clause as the symptom.

- ``FreeCoalescesNeighbour``: a paged ``free`` whose freed page joins a free run starting on
  the next page also frees the owned page below it (the run's new start is one page too low);
  reported as ``FREE-4`` (the symptom: a census clause, ``INV-1``).
- ``MergeDropsLastStaged``: under ``need_sort`` a merge of the staged pages into the free list
  (``merge_and_sort_free``, or the one inside an allocation) loses the last staged page;
  reported as ``SORT-3``.

Both override the spec-backed torch adapter (``spec_torch.py``); ``CENSUS_BROKEN`` lists each
with its configuration and its cause clause (``test_oracle_census_cause.py``).
"""

from __future__ import annotations

import types

import torch
from broken_allocators import Broken, factory_of
from kvpool.oracle.engine.capabilities import PAGED
from kvpool.spec import AllocatorModel
from kvpool.spec.rules import FREE, OWNED
from spec_torch import SpecTorchAllocator


class FreeCoalescesNeighbour(SpecTorchAllocator):
    """FREE-4: freeing page p while page p + 1 is free also frees page p - 1 when it is owned."""

    def free(self, free_index: torch.Tensor) -> None:
        m = self.model
        before = set(m.free_pages)
        super().free(free_index)
        if m.need_sort or m.free_group is not None:
            return
        for page in sorted(set(m.free_pages) - before):
            below = page - 1
            if page + 1 in before and below >= 1 and m.status_of(below) == OWNED:
                m.free_pages = [below, *m.free_pages]
                m._mark([below], FREE)


class MergeDropsLastStaged(SpecTorchAllocator):
    """SORT-3: a merge sorts every staged page but the last into the free list; that one is lost
    (neither free nor staged)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

        def merge(model: AllocatorModel) -> None:
            if not model.staged:
                return
            kept = model.staged[:-1]
            model._mark(kept, FREE)
            model._mark(model.staged[-1:], OWNED)  # lost: never handed out, never free again
            model.free_pages = sorted(model.free_pages + kept)
            model.staged = []

        self.model.merge_and_sort_free = types.MethodType(  # type: ignore[method-assign]
            merge, self.model
        )


CENSUS_BROKEN: tuple[Broken, ...] = (
    Broken(FreeCoalescesNeighbour, ("FREE-4",), module="broken_census"),
    Broken(MergeDropsLastStaged, ("SORT-3",), need_sort=True, module="broken_census"),
)
for _b in CENSUS_BROKEN:  # importable factories, e.g. broken_census:freecoalescesneighbour
    globals().setdefault(_b.name, factory_of(_b.cls, PAGED))
