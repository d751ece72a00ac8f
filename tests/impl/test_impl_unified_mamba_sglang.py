"""kvpool's unified full + Mamba composite beside SGLang 0.5.23's
``UnifiedMambaTokenToKVPoolAllocator`` (``UMB-1`` .. ``UMB-8``).

SGLang's is built by its own pool builder (``build_unified_mamba``), kvpool's over the same
whole buffer (``total_bytes=a.unified_buffer.total_bytes``, same page size and compaction). Both
are driven by the same random call sequences (:mod:`unified_mamba_driver`: allocs, extends of
fresh and growing requests, decodes, frees in any order, tail frees, segment frees, free groups,
state slots taken and released through ``mamba_allocator``, ``prepare_mamba_allocation``,
``flush_opportunistic``, a move gate flipped, ``clear``), and under pressure (a small buffer
and large allocs, which force relief: one end compacted for the other). After every call the
results and refusals, the capacity views, the state end's, the translation of every live
token, each end's span, holes and bindings, both free-id lists, the page copies each issues
(both views' ``move_physical_pages`` wrapped) and the census agree. SGLang's fields are read
here (:func:`sglang_ends`). Skipped where SGLang is not installed.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
import torch
from kvpool.impl import UnifiedMambaAllocator
from kvpool.oracle.families.unified.placement import MoveLog
from kvpool.oracle.peers.availability import require_installed
from unified_mamba_driver import MambaDriver

End = tuple[int, int, tuple[int, ...], dict[int, int]]


def pair(ps: int, lazy: bool, total_bytes: int = 3000) -> tuple[Any, UnifiedMambaAllocator]:
    """SGLang's composite (its builder adds the state end's bytes) and kvpool's over the same
    whole buffer."""
    require_installed("sglang")
    from kvpool.oracle.families.unified_mamba.peer import build_unified_mamba

    theirs = build_unified_mamba(total_bytes=total_bytes, page_size=ps, lazy=lazy)
    ours = UnifiedMambaAllocator(theirs.unified_buffer.total_bytes, ps, lazy=lazy)
    return theirs, ours


def _end(sub: Any) -> End:
    """One ``MultiEndedAllocator``: span, holes (with those held back), bindings."""
    if sub.grow_direction == "up":
        low, high = int(sub.min_page_index), int(sub.watermark_physical)
    else:
        low, high = int(sub.watermark_physical) + 1, int(sub.num_pages)
    holes = sorted(int(p) for p in sub._free_phys_pages.tolist()) + sorted(
        sub._pending_reuse_pages_cpu)
    v2p = sub.virtual_to_physical.tolist()
    return low, high, tuple(holes), {v: p for v, p in enumerate(v2p[1:-1], start=1) if p >= 0}


def sglang_ends(a: Any) -> dict[str, Any]:
    """SGLang's two ends and free-id lists, read from its private fields."""
    fa, ma = a.full_attn_allocator, a.mamba_allocator
    return {"state": _end(ma), "full": _end(fa), "free": fa.free_virtual_ids.tolist(),
            "free_state": ma.free_virtual_ids.tolist()}


def kvpool_ends(a: UnifiedMambaAllocator) -> dict[str, Any]:
    state = a.unified_state()
    ends = {name: (s.span_low, s.span_high, s.holes, dict(s.bindings))
            for name, s in state.sides.items()}
    return {**ends, "free": list(state.free_virtual), "free_state": a.free_state.tolist()}


def views(a: Any, ids: list[int]) -> tuple[Any, ...]:
    """The capacity views, the recheck bound, the rows of ``ids`` (both translations), which
    token slots are allocated, and full's page table (past the padding page)."""
    x = torch.tensor(ids, dtype=torch.int64)
    rows = (a.translate_kv_loc(x).tolist(), a.translate_write_loc(x).tolist()) if ids else ()
    table = a.full_v2p_page_table.tolist()[1:]
    if isinstance(a, UnifiedMambaAllocator):
        table.append(-1)  # SGLang's table ends in a sentinel row
    probe = range(0, a.size_full, 3)
    return (int(a.available_size()), int(a.full_available_size()), int(a.size),
            int(a.mamba_allocator.available_size()),
            int(a.mamba_allocator.schedulable_available_size()),
            [int(a.full_tokens_before_mamba_recheck(n)) for n in (1, 4, 30)], rows,
            [bool(a.is_slot_allocated(t)) for t in probe], table)


class Watch:
    """The page copies both pools issue on both views, compared and forgotten per call."""

    def __init__(self, pools: tuple[Any, Any]) -> None:
        self.pools = pools
        self.logs = [(MoveLog(p.get_kvcache().full_kv_pool), MoveLog(p.get_kvcache().mamba_pool))
                     for p in pools]
        self.copies = 0

    def agree(self, where: str, ids: list[int]) -> None:
        theirs, ours = self.pools
        assert views(ours, ids) == views(theirs, ids), f"{where}: views differ"
        mine, sglang = kvpool_ends(ours), sglang_ends(theirs)
        differ = {k: (mine[k], sglang[k]) for k in mine if mine[k] != sglang[k]}
        assert not differ, f"{where}: (kvpool, SGLang) differ: {differ}"
        for side in (0, 1):
            mine, sglang = self.logs[1][side].copies, self.logs[0][side].copies
            assert mine == sglang, f"{where}: page copies differ"
            self.copies += len(mine)
            mine.clear()
            sglang.clear()
        assert ours.verify_byte_accounting() == [] == list(theirs.verify_byte_accounting())


def run(seed: int, ps: int, lazy: bool, steps: int, total_bytes: int = 3000, big: int = 12,
        pressure: bool = False) -> Counter[str]:
    """Both composites under one random sequence; AssertionError at the first difference.
    Counts the steps, the page copies made on each view and the refused takes.

    SGLang's ``alloc_decode`` at page size 1 binds nothing (``SGL-UMB-DECODE-PS1``): the
    sequences decode at larger page sizes only."""
    pools = pair(ps, lazy, total_bytes)
    watch = Watch(pools)
    driver = MambaDriver(random.Random(seed), ps, lazy, list(pools), big=big,
                         decodes=ps > 1, pressure=pressure)
    assert pools[1].mamba_slot_full_token_cost() == pools[0].mamba_slot_full_token_cost()
    assert (pools[1].size_full, pools[1].size_mamba) == (pools[0].size_full,
                                                         pools[0].size_mamba)
    watch.agree(f"seed {seed} start", [])
    counts: Counter[str] = Counter()
    for i in range(steps):
        name, (want, got) = driver.step()
        where = f"seed {seed} step {i} {name}"
        assert got == want, f"{where}: kvpool {got!r} != SGLang {want!r}"
        counts["steps"] += 1
        counts["refused"] += want is None and name in TAKES
        counts["full copies"] += len(watch.logs[1][0].copies)
        counts["state copies"] += len(watch.logs[1][1].copies)
        watch.agree(where, driver.live_ids())
    return counts


TAKES = ("alloc", "extend", "decode", "state_alloc")


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("ps", [1, 4, 16])
def test_unified_mamba_against_sglang(ps: int, lazy: bool) -> None:
    counts = sum((run(seed, ps, lazy, 100) for seed in range(6)), Counter[str]())
    assert counts["full copies"] + counts["state copies"] > 0  # compaction ran


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("ps", [1, 4, 16])
def test_unified_mamba_against_sglang_under_pressure(ps: int, lazy: bool) -> None:
    """A buffer a few requests fill, takes past ``available_size()`` and past the state
    end's view between frees that leave holes on both ends: each end's shortfall compacts
    the other (relief), some takes are refused."""
    total = 600 * ps if ps > 1 else 1200
    counts = sum((run(100 + seed, ps, lazy, 100, total_bytes=total, big=8, pressure=True)
                  for seed in range(6)), Counter[str]())
    assert counts["refused"] > 0 and counts["full copies"] > 0 and counts["state copies"] > 0
