"""Deliberately broken unified allocators: SGLang 0.5.23's ``UnifiedSWATokenToKVPoolAllocator``
with one planted bug each (its methods or its sub-pools' wrapped on the instance).

``BROKEN_UNIFIED`` lists each with the capabilities it is run under and the one clause the
oracle reports it under. ``python broken_unified.py`` (``main``) runs, in one process (importing
SGLang's runtime changes what later tests of a process see): SGLang's composite under its
registered divergences, each registry entry re-enabled, and every broken allocator; it prints
one JSON line for ``test_oracle_unified.py``. Exit status 3: SGLang is not importable here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from broken_tri import alloc_short_by_a_page, full_ignores_float, swa_ignores_state_end
from kvpool.oracle.families.unified.targets import (
    UnifiedCapabilities,
    sglang_unified_swa,
    sglang_unified_tri,
)
from kvpool.spec import ContractViolation

Patch = Callable[[Any], None]
BASE: UnifiedCapabilities = getattr(sglang_unified_swa, "kvpool_unified_capabilities")  # noqa: B009
TRI: UnifiedCapabilities = getattr(sglang_unified_tri, "kvpool_unified_capabilities")  # noqa: B009


def _sides(a: Any) -> tuple[Any, Any]:
    return a.full_attn_allocator, a.swa_attn_allocator


def lost_move(a: Any) -> None:
    """Compaction rebinds a moved page's virtual id but never copies its bytes."""
    for side in _sides(a):
        side._move_pages = lambda src, dst: None


def stale_v2p_after_move(a: Any) -> None:
    """Compaction copies a page and records its new owner in p2v, but v2p keeps the old page."""
    for side in _sides(a):
        def rebind(src: torch.Tensor, dst: torch.Tensor, side: Any = side) -> torch.Tensor:
            moved: torch.Tensor = side.physical_to_virtual[src].clone()
            side._move_pages(src, dst)
            side.physical_to_virtual[dst] = moved
            return moved

        side._move_pages_and_rebind = rebind


def frontier_off_by_a_page(a: Any) -> None:
    """The full side reports its low frontier one page too low (the gap shrinks by a page)."""
    full = a.full_attn_allocator
    low = full._byte_low_frontier
    full._byte_low_frontier = lambda: low() - full.entry_bytes_per_page


def hole_counted_twice(a: Any) -> None:
    """Lazy free: the freed physical pages join the holes twice."""
    full = a.full_attn_allocator
    free_lazy = full._free_lazy

    def twice(free_index: torch.Tensor, pages: Any = None) -> None:
        before = full._free_phys_pages.numel()
        free_lazy(free_index, pages)
        full._free_phys_pages = torch.cat([full._free_phys_pages,
                                           full._free_phys_pages[before:]])

    full._free_lazy = twice


def release_leaves_no_hole(a: Any) -> None:
    """Lazy free unbinds the pages and lowers the live count but drops them from the holes:
    the span keeps pages that are neither live nor holes (nothing else is wrong)."""
    for side in _sides(a):
        free_lazy = side._free_lazy

        def forget(free_index: torch.Tensor, pages: Any = None, side: Any = side,
                   free_lazy: Any = free_lazy) -> None:
            before = side._free_phys_pages.numel()
            free_lazy(free_index, pages)
            side._free_phys_pages = side._free_phys_pages[:before]

        side._free_lazy = forget


def transfer_identity(a: Any) -> None:
    """``translate_kv_indices_for_transfer`` keeps the base class's identity: virtual ids go on
    the wire as if they were physical."""
    a.translate_kv_indices_for_transfer = lambda idx: idx.to(torch.int64).clone()


def translate_freed_answers(a: Any) -> None:
    """Checked (a double free and the SWA translation of a freed id raise ContractViolation),
    except that the transfer translation of a freed id answers the sink row 0."""
    free, to_swa = a.free, a.translate_loc_from_full_to_swa
    ps = a.page_size

    def dead(idx: torch.Tensor) -> bool:
        return bool((a.full_attn_allocator.virtual_to_physical[idx // ps] < 0).any())

    def checked_free(idx: torch.Tensor) -> None:
        if idx.numel() and dead(idx):
            raise ContractViolation("UNI-11", "freeing a page that is not live")
        free(idx)

    def checked_swa(idx: torch.Tensor) -> torch.Tensor:
        if idx.numel() and dead(idx):
            raise ContractViolation("UNI-11", "translating a page that is not live")
        return to_swa(idx)  # type: ignore[no-any-return]

    a.free, a.translate_loc_from_full_to_swa = checked_free, checked_swa


def accounting_ignores_swa(a: Any) -> None:
    """``verify_byte_accounting`` reads the full sub-pool only (no SWA side, no chain check)."""
    a.verify_byte_accounting = a.full_attn_allocator._byte_accounting_violations


def available_memo_kept(a: Any) -> None:
    """``available_size()`` is memoized and refreshed by allocations only, not by frees."""
    memo: list[int] = []
    available = a.available_size

    def cached() -> int:
        if not memo:
            memo.append(available())
        return memo[0]

    def refreshing(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            memo.clear()
            return fn(*args, **kwargs)
        return call

    for name in ("alloc", "alloc_extend", "alloc_decode"):
        setattr(a, name, refreshing(getattr(a, name)))
    a.available_size = cached


def free_keeps_swa(a: Any) -> None:
    """``free`` releases the full side and the virtual ids but not the SWA pages."""
    full = a.full_attn_allocator

    def free(idx: torch.Tensor) -> None:
        if idx.numel():
            full.free(idx.to(torch.int64))
            full.clear_inverse_history()

    a.free = free


def slide_frees_full(a: Any) -> None:
    """A window slide (``free_swa``) also releases the full side of the slid-out tokens."""
    free_swa, full = a.free_swa, a.full_attn_allocator

    def slide(idx: torch.Tensor) -> None:
        free_swa(idx)
        if idx.numel():
            full.free(idx.to(torch.int64))

    a.free_swa = slide


def decode_binds_full_only(a: Any) -> None:
    """``alloc_decode`` opens a new page on the full side only (no SWA page bound)."""
    full, ps = a.full_attn_allocator, a.page_size

    def alloc_decode(seq_lens: Any, seq_lens_cpu: Any, last_loc: Any) -> Any:
        need = int(((seq_lens_cpu - 1) % ps == 0).sum()) * ps
        if not a.ensure_capacity(need, need):
            return None
        return full.alloc_decode(seq_lens, seq_lens_cpu, last_loc)

    a.alloc_decode = alloc_decode


def lazy_never_compacts(a: Any) -> None:
    """Lazy compaction that never runs: an allocation that fits only after compaction fails."""
    ps = a.page_size
    a.ensure_capacity = lambda f, s: a._fits_page_demand(-(-int(f) // ps), -(-int(s) // ps),
                                                          compacted=False)


def clear_keeps_swa(a: Any) -> None:
    """``clear()`` empties the full sub-pool only."""
    a.clear = a.full_attn_allocator.clear


def eager_skips_compaction(a: Any) -> None:
    """Eager free unbinds the pages but never compacts: the holes stay, the frontier stays
    (an eager span that holds holes: ``UNI-5``, seen before the capacity views)."""
    for side in _sides(a):
        side._compact_pending = lambda freed: None


def zeroes_a_neighbour(a: Any) -> None:
    """Zero-on-hand-out zeroes the page after each new page too (a live neighbour's K/V)."""
    for side in _sides(a):
        zero = side._maybe_zero_pages

        def zero_more(pages: torch.Tensor, zero: Any = zero, side: Any = side) -> None:
            zero(pages)
            more = pages + 1
            zero(more[more < side.num_pages])

        side._maybe_zero_pages = zero_more


def segment_first_page_only(a: Any) -> None:
    """A segment free's page representatives on the full side are its first token only (the
    rest of the segment's pages stay live on the full side)."""
    a.full_attn_allocator._page_reps = lambda idx, start_pos: idx[:1]


def group_end_skips_full_frees(a: Any) -> None:
    """``free_group_end`` forgets the ``free_full`` calls the group deferred."""
    end = a.free_group_end

    def free_group_end() -> None:
        a.full_free_group = []
        end()

    a.free_group_end = free_group_end


def transfer_skips_sink(a: Any) -> None:
    """``translate_kv_indices_for_transfer`` counts physical pages from the first allocatable
    page, as if the registered buffer began after the sink: every row one page too high (the
    top page of the full sub-pool lands past the buffer)."""
    to_full, ps = a.translate_kv_indices_for_transfer, a.page_size
    a.translate_kv_indices_for_transfer = lambda idx: to_full(idx) + ps


def swa_rows_from_floor(a: Any) -> None:
    """``translate_loc_from_full_to_swa`` subtracts the reserved sink page from every bound row,
    as if the SWA sub-pool's page 0 were its first allocatable page (its lowest live page reads
    inside the sink)."""
    to_swa, ps = a.translate_loc_from_full_to_swa, a.page_size

    def translate(idx: torch.Tensor, **kw: Any) -> torch.Tensor:
        rows: torch.Tensor = to_swa(idx, **kw)
        return torch.where(rows > 0, rows - ps, rows)

    a.translate_loc_from_full_to_swa = translate


def tombstone_read_unclamped(a: Any) -> None:
    """``translate_loc_from_full_to_swa`` reads a slid-out page's tombstone (``v2p == -1``) as a
    page index instead of the sink row 0."""
    swa, ps = a.swa_attn_allocator, a.page_size

    def translate(idx: torch.Tensor, **kw: Any) -> torch.Tensor:
        v = idx.to(torch.int64)
        return swa.virtual_to_physical[v // ps].to(torch.int64) * ps + v % ps

    a.translate_loc_from_full_to_swa = translate


def holes_reused_as_one(a: Any) -> None:
    """Lazy hole reuse takes the right number of holes but binds every drained page to the
    first of them (two live virtual pages on one physical page)."""
    for side in _sides(a):
        take = side._take_free_pages_from_end

        def first_only(n: int, end: str, take: Any = take) -> torch.Tensor:
            taken: torch.Tensor = take(n, end)
            return taken[:1].repeat(taken.numel())

        side._take_free_pages_from_end = first_only


def extend_in_last_loc_dtype(a: Any) -> None:
    """``alloc_extend`` hands its token ids out in ``last_loc``'s dtype: int32 when the
    scheduler's ``last_loc`` row is int32 (SGLang's composite: int64 whatever the input)."""
    extend = a.alloc_extend

    def narrowed(*args: Any, **kwargs: Any) -> Any:
        out = extend(*args, **kwargs)
        last_loc = args[4] if len(args) > 4 else kwargs["last_loc"]
        return None if out is None else out.to(last_loc.dtype)

    a.alloc_extend = narrowed


def transfer_reads_storage(a: Any) -> None:
    """``translate_kv_indices_for_transfer`` reads its input's storage as if it were contiguous
    (a raw ``data_ptr`` read): a strided view of ids is translated from the wrong ids."""
    translate = a.translate_kv_indices_for_transfer

    def raw(kv_indices: torch.Tensor) -> Any:
        return translate(torch.as_strided(kv_indices, kv_indices.shape, (1,)))

    a.translate_kv_indices_for_transfer = raw


def eager_binds_reversed(a: Any) -> None:
    """A multi-page allocation binds its new virtual pages to the new physical pages in reverse
    order (the pages, the frontier and the tables are otherwise right): under eager compaction,
    where placement is fixed, a row bound to another page with no page copy involved."""
    for side in _sides(a):
        take = side._alloc_bind_fast_or_slow

        def reversed_bind(v_pages: torch.Tensor, n: int, side: Any = side,
                          take: Any = take) -> Any:
            phys = take(v_pages, n)
            if phys is None or phys.numel() < 2:
                return phys
            side.bind(v_pages, phys.flip(0))
            return phys.flip(0)

        side._alloc_bind_fast_or_slow = reversed_bind


def evict_plan_takes_all(a: Any) -> None:
    """The eviction plan asks the cache for everything it can evict whenever it has to evict
    at all (the plan the spec makes is the least that fits)."""
    plan = a.reclaim_plan

    def greedy(full: Any, swa: Any, **kw: Any) -> Any:
        found = plan(full, swa, **kw)
        if found is None or found == (0, 0) or "full_evictable_tokens" not in kw:
            return found
        ps = a.page_size
        return (kw["full_evictable_tokens"] // ps * ps, kw["swa_evictable_tokens"] // ps * ps)

    a.reclaim_plan = greedy


def swa_tail_binds_all(a: Any) -> None:
    """``alloc_extend_swa_tail`` binds an SWA page to every new page, the tail's or not (it
    runs the plain ``alloc_extend``)."""
    extend = a.alloc_extend
    a.alloc_extend_swa_tail = lambda *args: extend(*args[:6])


def gate_credit_kept(a: Any) -> None:
    """The schedulable views keep crediting the neighbour's holes while a move gate is closed
    (its compaction cannot run, so those holes are not reclaimable)."""
    full, swa = a.full_attn_allocator, a.swa_attn_allocator
    for side, other in ((full, swa), (swa, full)):
        side._peer_drainable_hole_bytes = (
            lambda other=other: len(other._free_phys_pages) * other.entry_bytes_per_page)


def tri_fit_skips_float_holes(a: Any) -> None:
    """The tri-pool's fit of unequal demands (``can_reserve``: a decode node's prealloc) credits
    none of the SWA float's holes: a prealloc the float's holes make room for is refused
    (``available_size()`` and the views stay right)."""
    fits, sa = a._fits_page_demand, a.swa_attn_allocator

    def no_holes(full_pages: int, swa_pages: int) -> bool:
        sa._hole_pages = lambda: 0
        try:
            return bool(fits(full_pages, swa_pages))
        finally:
            del sa._hole_pages

    a._fits_page_demand = no_holes


@dataclass(frozen=True)
class BrokenUnified:
    """One planted bug: the patch, the capabilities it runs under, the one clause the oracle
    reports it under (a 1-tuple, as every broken allocator's ``clauses``) and the clause the
    bug breaks (``cause``; default: the reported one; where they differ
    ``broken_causes.SYMPTOM_OF`` says why)."""

    patch: Patch
    clauses: tuple[str, ...]
    changes: tuple[tuple[str, Any], ...] = ()
    tri: bool = False  # on the tri-pool (``sglang_unified_tri``), under its capabilities
    cause: str = ""  # the clause the bug breaks, where the report names another one

    def __post_init__(self) -> None:
        if not self.cause:
            object.__setattr__(self, "cause", self.clauses[0])

    @property
    def name(self) -> str:
        return self.patch.__name__

    def caps(self) -> UnifiedCapabilities:
        return (TRI if self.tri else BASE).replace(**dict(self.changes))

    def factory(self) -> Callable[..., Any]:
        patch = self.patch

        def build(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu") -> Any:
            base = sglang_unified_tri if self.tri else sglang_unified_swa
            a = base(total_bytes=total_bytes, page_size=page_size, lazy=lazy)
            patch(a)
            return a

        build.__qualname__ = build.__name__ = f"{self.name}_pool"  # published below: a repro
        return build                                                 # imports it by this name


EAGER, LAZY, PAGED = (("compaction", ("eager",)),), (("compaction", ("lazy",)),), (
    ("page_sizes", (4,)),)
BROKEN_UNIFIED = [
    BrokenUnified(transfer_skips_sink, ("UNI-1",), LAZY),
    BrokenUnified(swa_rows_from_floor, ("UNI-2",), LAZY),
    BrokenUnified(transfer_identity, ("UNI-3",), LAZY, cause="UNI-11"),
    BrokenUnified(holes_reused_as_one, ("UNI-4",), LAZY),
    BrokenUnified(lost_move, ("UNI-6",)),
    BrokenUnified(stale_v2p_after_move, ("UNI-6",)),
    BrokenUnified(frontier_off_by_a_page, ("UNI-9",)),
    BrokenUnified(hole_counted_twice, ("UNI-5",), LAZY),
    BrokenUnified(release_leaves_no_hole, ("UNI-5",), LAZY),
    BrokenUnified(translate_freed_answers, ("UNI-11",), (("checked", True),)),
    BrokenUnified(accounting_ignores_swa, ("UNI-13",), (("census_frontiers", True),)),
    BrokenUnified(available_memo_kept, ("UNI-7",)),
    BrokenUnified(free_keeps_swa, ("UNI-10",)),
    BrokenUnified(slide_frees_full, ("UNI-10",)),
    BrokenUnified(decode_binds_full_only, ("UNI-9",), PAGED, cause="UNI-8"),
    BrokenUnified(lazy_never_compacts, ("UNI-8",), LAZY),
    BrokenUnified(clear_keeps_swa, ("UNI-12",)),
    BrokenUnified(eager_skips_compaction, ("UNI-5",), EAGER),
    BrokenUnified(zeroes_a_neighbour, ("DATA-1",)),
    BrokenUnified(segment_first_page_only, ("UNI-10",)),
    BrokenUnified(group_end_skips_full_frees, ("UNI-10",)),
    BrokenUnified(tombstone_read_unclamped, ("UNI-10",), LAZY),
    BrokenUnified(eager_binds_reversed, ("UNI-4",), EAGER),
    BrokenUnified(evict_plan_takes_all, ("UNI-8",)),
    BrokenUnified(swa_tail_binds_all, ("UNI-7",), cause="UNI-8"),
    BrokenUnified(gate_credit_kept, ("UNI-9",), LAZY),
    BrokenUnified(extend_in_last_loc_dtype, ("UNI-8",), PAGED),
    BrokenUnified(transfer_reads_storage, ("UNI-11",), EAGER),
    BrokenUnified(swa_ignores_state_end, ("UNI-14",), tri=True),
    BrokenUnified(full_ignores_float, ("UNI-14",), tri=True),
    BrokenUnified(alloc_short_by_a_page, ("UNI-14",), tri=True),
    BrokenUnified(tri_fit_skips_float_holes, ("UNI-14",), tri=True),
]
# each broken allocator's factory at module level (``<patch>_pool``), where its repro imports it
globals().update({f"{b.name}_pool": b.factory() for b in BROKEN_UNIFIED})


def run(factory: Callable[..., Any], caps: UnifiedCapabilities, examples: int,
        shrink_seconds: float = 2.0) -> dict[str, Any]:
    """Run the unified family on ``factory`` under ``caps`` at each page size, stopping at the
    first failure; what it found, as plain data."""
    from kvpool.oracle.engine.families import family
    from kvpool.oracle.engine.runner import run_config
    from kvpool.oracle.engine.target import Config

    target = family("unified").target(factory, caps)
    out: dict[str, Any] = {"calls": 0, "events": {}, "clause": None, "detail": None,
                           "error": None}
    for ps in caps.page_sizes:
        r = run_config(target, Config(ps, False), max_examples=examples,
                       shrink_seconds=shrink_seconds)
        out["calls"] += r.calls
        for name, n in r.coverage.items():
            out["events"][name] = out["events"].get(name, 0) + n
        if r.error is not None:
            out["error"] = r.error
            break
        if r.failure is not None:
            f = r.failure
            out.update(clause=f.clause, detail=f.detail, num_calls=f.trace.num_calls(),
                       repro=f.report()[-3000:], repro_fails=_repro_fails(f.pytest_source()))
            break
    return out


def _repro_fails(source: str) -> str | None:
    """Run a printed pytest repro in this process: the exception type it raises (its assert on
    the bug), or None when it passes."""
    scope: dict[str, Any] = {"__name__": "kvpool_repro"}
    try:
        exec(compile(source, "<repro>", "exec"), scope)
        scope["test_kvpool_repro"]()
    except KeyboardInterrupt:
        raise
    except BaseException as err:  # AssertionError, ContractViolation, pytest.raises' Failed
        return type(err).__name__
    return None


# where a re-enabled rule shows (configuration, examples): the free order matters under lazy
# compaction at page size 1 only, once the free list has wrapped
FOCUS: dict[str, tuple[dict[str, Any], int]] = {
    "SGL-UNI-FREE-ORDER": ({"compaction": ("lazy",), "page_sizes": (1,)}, 300)}


def main() -> None:
    """Print one JSON line: ``conforms`` (SGLang's composite under its registry entries),
    ``tri`` (its tri-pool: full + SWA under the model, capacity on its float chain),
    ``reenabled`` (per registry entry, its rule switched back on) and ``broken`` (per broken
    allocator). ``argv[1]``: examples per configuration of the conformance run."""
    from kvpool.oracle.families.unified.targets import FULL, registered_for
    from kvpool.oracle.peers.availability import exit_if_missing

    try:
        sglang_unified_swa(total_bytes=1024, page_size=1, lazy=False)
    except Exception as err:
        exit_if_missing(err)  # SGLang not installed: the test skips (outside CI only)
        raise
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    result: dict[str, Any] = {"conforms": run(sglang_unified_swa, BASE, examples)}
    result["tri"] = run(sglang_unified_tri, TRI, max(4, examples // 3))
    result["reenabled"] = {}
    for d in registered_for("sglang-unified"):
        field = d.excludes[0]
        focus, budget = FOCUS.get(d.id, ({}, 100))
        caps = BASE.replace(**{field: getattr(FULL, field)}, **focus)
        result["reenabled"][d.id] = run(sglang_unified_swa, caps, budget)
    result["broken"] = {b.name: run(b.factory(), b.caps(), 60, 4.0) for b in BROKEN_UNIFIED}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
