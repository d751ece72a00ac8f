"""What must hold of a unified target's physical placement where the contract leaves it free.

Lazy compaction reuses holes in an order the contract does not fix (``UNI-5``), so a lazy
target's translations are judged by what must hold rather than compared row for row: each live
token keeps its in-page offset and its page's rows are one page (``UNI-11``), no two live
virtual pages share a physical page (``UNI-4``), every live page lies above the reserved sink
(``UNI-2``) and within its sub-pool (``UNI-1``), the full and SWA pages of all live tokens are
byte-disjoint (``UNI-3``), and a released SWA page reads as the sink row 0 (``UNI-10``).
:class:`MoveLog` records the page copies the allocator issues, so that a live page's location may
change only along them (``UNI-6``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kvpool.spec.unified import UnifiedSWAModel
from kvpool.spec.unified_tables import EndPool
from kvpool.spec.wording import counted


def pages_of(rows: Sequence[int], ids: Sequence[int], ps: int) -> dict[int, int]:
    """Virtual page -> physical page read from one side's translation of ``ids``."""
    return {t // ps: r // ps for t, r in zip(ids, rows)}


@dataclass(frozen=True)
class SubPoolGeometry:
    """What placement needs of one sub-pool: its name, first allocatable page, number of
    physical pages and bytes per page (a repro writes it out; :func:`placement_of`)."""

    name: str
    min_page: int
    pages: int
    page_bytes: int


@dataclass(frozen=True)
class Geometry:
    """Both sub-pools' :class:`SubPoolGeometry` and the page size."""

    page_size: int
    full: SubPoolGeometry
    swa: SubPoolGeometry


def placement_of(model: UnifiedSWAModel) -> Geometry:
    """The model's geometry, as the plain data :func:`problems_of` takes."""
    def side(pool: EndPool) -> SubPoolGeometry:
        return SubPoolGeometry(pool.name, pool.min_page, pool.pages, pool.page_bytes)

    return Geometry(model.page_size, side(model.full), side(model.swa))


def side_problems(pool: SubPoolGeometry, ids: Sequence[int], rows: Sequence[int],
                  ps: int) -> list[tuple[str, str]]:
    """``UNI-11`` / ``UNI-4`` / ``UNI-2`` / ``UNI-1`` problems of one side's rows of ``ids``
    (only ids whose page the model binds on that side)."""
    out: list[tuple[str, str]] = []
    where: dict[int, int] = {}
    for t, r in zip(ids, rows):
        v = t // ps
        if r % ps != t % ps:
            out.append(("UNI-11", f"{pool.name}: token {t} reads row {r}: in-page offset lost"))
        elif where.setdefault(v, r // ps) != r // ps:
            out.append(("UNI-11", f"{pool.name}: virtual page {v} spans physical pages "
                                  f"{where[v]} and {r // ps}"))
    owners: dict[int, int] = {}
    for v, p in where.items():
        if p < pool.min_page:
            out.append(("UNI-2", f"{pool.name}: live virtual page {v} on page {p}, in the "
                                 f"reserved sink (first allocatable page {pool.min_page})"))
        elif p >= pool.pages:
            out.append(("UNI-1", f"{pool.name}: live virtual page {v} on page {p}, past the "
                                 f"sub-pool's {counted(pool.pages, 'page')}"))
        if owners.setdefault(p, v) != v:
            out.append(("UNI-4", f"{pool.name}: virtual pages {owners[p]} and {v} share "
                                 f"physical page {p}"))
    return out


def overlap_problems(full: dict[int, int], swa: dict[int, int],
                     geometry: Geometry) -> list[tuple[str, str]]:
    """``UNI-3``: the byte ranges of every live full and SWA page are pairwise disjoint."""
    fb, sb = geometry.full.page_bytes, geometry.swa.page_bytes
    ranges = sorted([(p * fb, (p + 1) * fb, "full", v) for v, p in full.items()]
                    + [(p * sb, (p + 1) * sb, "swa", v) for v, p in swa.items()])
    out = []
    reach: tuple[int, int, str, int] | None = None  # the range reaching furthest so far
    for r in ranges:
        if reach is not None and r[0] < reach[1] and r[2] != reach[2]:
            out.append(("UNI-3", f"bytes from {r[0]} belong to {reach[2]} virtual page "
                                 f"{reach[3]} and to {r[2]} virtual page {r[3]}"))
        if reach is None or r[1] > reach[1]:
            reach = r
    return out


def problems_of(geometry: Geometry, ids: Sequence[int], full_rows: Sequence[int],
                swa_rows: Sequence[int], swa_bound: Sequence[int]) -> list[tuple[str, str]]:
    """Every placement problem of the translations ``full_rows`` / ``swa_rows`` of the live
    tokens ``ids`` (see the module docstring) on a pool of ``geometry`` whose SWA side binds the
    virtual pages ``swa_bound``, as ``(clause, detail)``; empty when placement is sound. Plain
    data in, so that a repro asserts it."""
    ps, bound_pages = geometry.page_size, set(swa_bound)
    bound = [i for i, t in enumerate(ids) if t // ps in bound_pages]
    out = [("UNI-10", f"token {ids[i]}'s SWA page was released but reads row {swa_rows[i]}, "
                      "not the sink 0")
           for i, t in enumerate(ids) if t // ps not in bound_pages and swa_rows[i] != 0]
    out += side_problems(geometry.full, ids, full_rows, ps)
    swa_ids, swa_live = [ids[i] for i in bound], [swa_rows[i] for i in bound]
    out += side_problems(geometry.swa, swa_ids, swa_live, ps)
    out += overlap_problems(pages_of(full_rows, ids, ps), pages_of(swa_live, swa_ids, ps),
                            geometry)
    return out


def placement_problems(model: UnifiedSWAModel, ids: Sequence[int], full_rows: Sequence[int],
                       swa_rows: Sequence[int]) -> list[tuple[str, str]]:
    """:func:`problems_of` on the model's geometry and SWA bindings."""
    return problems_of(placement_of(model), ids, full_rows, swa_rows, sorted(model.swa.v2p))


def placement_assert(model: UnifiedSWAModel, ids: Sequence[int], clause: str) -> str:
    """The repro line that asserts sound placement of the live tokens ``ids`` on the target
    ``a`` (the line fails where :func:`placement_problems` found ``clause``)."""
    return (f"assert problems_of({placement_of(model)!r}, {list(ids)!r}, "
            f"a.translate_kv_indices_for_transfer(t({list(ids)!r})).tolist(), "
            f"a.translate_loc_from_full_to_swa(t({list(ids)!r})).tolist(), "
            f"{sorted(model.swa.v2p)!r}) == []  # [{clause}]")


class MoveLog:
    """The page copies an allocator issues on one KV sub-pool: ``move_physical_pages`` of the
    pool object is wrapped, and each call's ``(src, dst)`` page pairs recorded in order."""

    def __init__(self, kv_pool: Any) -> None:
        self.copies: list[tuple[int, int]] = []
        inner = kv_pool.move_physical_pages

        def move_physical_pages(dst_pages: Any, src_pages: Any, *args: Any, **kw: Any) -> Any:
            self.copies += zip(src_pages.tolist(), dst_pages.tolist())
            return inner(dst_pages, src_pages, *args, **kw)

        kv_pool.move_physical_pages = move_physical_pages

    def strays(self, before: dict[int, int], after: dict[int, int]) -> list[int]:
        """Virtual pages live in both maps whose physical page changed other than along the
        copies recorded since the last call."""
        out = []
        for v, p in before.items():
            if v not in after or after[v] == p:
                continue
            at = p
            for src, dst in self.copies:
                at = dst if src == at else at
            if at != after[v]:
                out.append(v)
        return out

    def unexplained(self, before: dict[int, int], after: dict[int, int]) -> list[str]:
        """:meth:`strays`, said (then the copies are forgotten)."""
        out = [f"virtual page {v} went from page {before[v]} to {after[v]} without a copy"
               for v in self.strays(before, after)]
        self.copies.clear()
        return out


# each side's KV pool and read translation, as a repro names them
SIDE_SOURCES = (("full_kv_pool", "translate_kv_indices_for_transfer"),
                ("swa_kv_pool", "translate_loc_from_full_to_swa"))


def move_repro(side: int, page: int, was: int, page_size: int) -> tuple[list[str], list[str]]:
    """A repro's lines for virtual page ``page`` of ``side`` (0 full, 1 SWA) moved off physical
    page ``was`` by the failing call without a copy (``UNI-6``): a :class:`MoveLog` set just
    before the call, and the assertion after it that the page's move is along its copies."""
    pool, translate = SIDE_SOURCES[side]
    setup = ["from kvpool.oracle.families.unified.placement import MoveLog",
             f"moves = MoveLog(a.get_kvcache().{pool})  # the page copies of the next call"]
    check = [f"now = a.{translate}(t([{page * page_size}])).tolist()[0] // {page_size}",
             f"assert not moves.unexplained({{{page}: {was}}}, {{{page}: now}})  # [UNI-6]"]
    return setup, check
