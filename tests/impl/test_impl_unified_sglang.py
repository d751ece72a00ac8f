"""kvpool's unified full + SWA pool against SGLang 0.5.23's ``UnifiedSWATokenToKVPoolAllocator``.

Both built over the same buffer (SGLang's by its own CPU fixture,
``oracle.families.unified.peer.build_unified_swa``; kvpool's with the static caps SGLang derived)
and driven by the same random call sequences (:mod:`unified_driver`): every result and refusal,
the three capacity views, both translations of every live token and the census agree after every
call, and so do the page copies each issues (both stores' ``move_physical_pages`` wrapped),
``flush_opportunistic()`` included, in both compaction modes. Where SGLang departs from the
contract the sequences avoid it: freed ids go ascending (its lazy page-size-1 free appends them
in the order given), no free group at page size 1 under lazy compaction (its group end joins
the frees unsorted there), no ``alloc_decode`` at page size 1 (its binds no SWA page for the new
token: the family's ``decode_ps1``), segment frees as its callers must make them. Skipped where
SGLang is not installed.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch
from kvpool.impl.unified_swa import UnifiedSWAAllocator
from kvpool.oracle.families.unified.placement import MoveLog
from kvpool.oracle.peers.availability import require_installed
from unified_driver import Driver

ENTRY = 32


def pair(total_bytes: int, ps: int, lazy: bool,
         cls: type = UnifiedSWAAllocator) -> tuple[Any, Any]:
    """SGLang's composite and kvpool's over ``total_bytes`` (kvpool's with SGLang's caps)."""
    require_installed("sglang")
    from kvpool.oracle.families.unified.peer import build_unified_swa

    theirs = build_unified_swa(total_bytes=total_bytes, page_size=ps, lazy=lazy)
    ours = cls(total_bytes, ps, lazy=lazy,
               full_max_total_num_tokens=theirs._full_max_total_num_tokens,
               swa_max_total_num_tokens=theirs._swa_max_total_num_tokens)
    return theirs, ours


def views(a: Any, ids: list[int]) -> tuple[Any, ...]:
    x = torch.tensor(ids, dtype=torch.int64)
    rows = ((a.translate_kv_indices_for_transfer(x).tolist(),
             a.translate_loc_from_full_to_swa(x).tolist()) if ids else ([], []))
    return (a.available_size(), a.full_available_size(), a.swa_available_size(), *rows)


def run(seed: int, ps: int, lazy: bool, steps: int, cls: type = UnifiedSWAAllocator) -> None:
    """SGLang's and ``cls``'s composite under one random sequence; AssertionError at the first
    difference (results, views, translations, census, page copies)."""
    rng = random.Random(seed)
    total_bytes = rng.choice([24, 40, 64]) * ps * ENTRY
    theirs, ours = pair(total_bytes, ps, lazy, cls)
    logs = [(MoveLog(a.get_kvcache().full_kv_pool), MoveLog(a.get_kvcache().swa_kv_pool))
            for a in (theirs, ours)]
    driver = Driver(rng, ps, None, [theirs, ours], sorted_frees=True,
                    strict_segments=True)
    if ps == 1:  # SGLang's alloc_decode binds no SWA page at page size 1 (decode_ps1)
        driver.do_decode = driver.do_translate  # type: ignore[method-assign]
    if ps == 1 and lazy:  # there its free_group_end appends the groups' ids unsorted
        driver.do_group = driver.do_translate  # type: ignore[method-assign]
    for i in range(steps):
        name, (_, want, got) = driver.step()
        where = f"seed {seed} step {i} {name}"
        assert got == want, f"{where}: kvpool {got!r} != SGLang {want!r}"
        ids = driver.live_ids()
        assert views(ours, ids) == views(theirs, ids), f"{where}: views differ"
        for side in (0, 1):
            assert logs[1][side].copies == logs[0][side].copies, f"{where}: page copies differ"
            logs[0][side].copies.clear()
            logs[1][side].copies.clear()
        assert ours.verify_byte_accounting() == [] == list(theirs.verify_byte_accounting())


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("ps", [1, 4, 16])
def test_against_sglang(ps: int, lazy: bool) -> None:
    for seed in range(4):
        run(seed, ps, lazy, 60)


class SkipsAPageCopy(UnifiedSWAAllocator):
    """Its full side rebinds the last page of every compaction without copying it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        inner = self.full.mover

        def mover(dst: Any, src: Any) -> None:
            inner(dst[:-1], src[:-1])

        self.full.mover = mover


def test_a_pool_that_skips_a_page_copy_fails() -> None:
    with pytest.raises(AssertionError, match="page copies differ"):
        for seed in range(10):
            run(seed, 4, False, 60, SkipsAPageCopy)
