"""How the unified scheduler model sizes its batches: the rows it drives and the draws that
make a decode batch or a tri-pool prealloc fit, and the capacity compaction would give
(:mod:`.machine`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvpool.spec.unified import UnifiedSWAModel
from kvpool.spec.unified_float import fits_on_chain

from .float_views import chain_of

__all__ = ["Row", "compacted_capacity", "fitting_batch", "float_hole_fit"]


@dataclass
class Row:
    """One request: its virtual token ids in position order and its released frontier."""

    slots: list[int]
    front: int = 0



def fitting_batch(model: UnifiedSWAModel | None, rows: list[Row], ps: int) -> list[Row]:
    """``rows`` without their last rows that open a page (``len % ps == 0``) until the pages
    the rest opens fit (``UNI-8``: now, or lazy, after compaction)."""
    if model is None:
        return rows
    keep = list(rows)
    opening = [r for r in keep if len(r.slots) % ps == 0]
    while opening and not (model.fits(len(opening), compacted=False) or (
            model.lazy and not model.moves_blocked
            and model.fits(len(opening), compacted=True))):
        keep.remove(opening.pop())
    return keep or rows[:1]


def float_hole_fit(target: Any, model: UnifiedSWAModel | None, seq: int,
                   tail: int) -> tuple[int, int, bool]:
    """A decode node's prealloc ``(seq, swa_tail_len)`` on a tri-pool whose SWA float has
    holes: the most SWA pages ``s`` that fit with one more full page (a demand of unequal
    sides, priced by ``can_reserve``; ``UNI-14``), so the float's holes must be credited to
    fit, and True; ``(seq, tail, False)`` when the float has none or nothing fits."""
    chain = chain_of(target)
    ps = chain.page_size
    ids = len(model.free_virtual) if model is not None else 0
    if chain.swa_holes == 0 or ids < 2:
        return seq, tail, False
    best = 0
    for s in range(1, min(ids - 1, chain.swa_holes + chain.swa.num_pages) + 1):
        if not fits_on_chain(chain, s + 1, s):
            break
        best = s
    return ((best + 1) * ps, best * ps, True) if best else (seq, tail, False)


def compacted_capacity(model: UnifiedSWAModel) -> int:
    """Tokens an allocation can take once both sides are compacted (``UNI-8``'s lazy branch:
    more than ``available_size()`` while holes are kept)."""
    pages = len(model.free_virtual)
    while pages and not model.fits(pages, compacted=True):
        pages -= 1
    return int(pages * model.page_size)
