"""Deliberately broken tri-pools: SGLang 0.5.23's ``UnifiedMambaSWATokenToKVPoolAllocator`` with
one planted bug each in the byte accounting of its float chain (``UNI-14``), wrapped on the
instance. ``broken_unified.BROKEN_UNIFIED`` runs them (``tri=True``).
"""

from __future__ import annotations

from typing import Any


def swa_ignores_state_end(a: Any) -> None:
    """The SWA float prices its low band from the buffer's bottom: the mamba end's state slots
    are not counted (its frontier is read as 0), so the SWA and joint views overstate."""
    a.swa_attn_allocator._chain_high_frontier_below_bytes = lambda: 0


def full_ignores_float(a: Any) -> None:
    """The full end measures its gap down to the mamba end through a live SWA float: the
    float's pages are not counted, so full's view overstates."""
    fa, ma = a.full_attn_allocator, a.mamba_allocator
    fa._chain_high_frontier_below_bytes = ma._byte_high_frontier


def alloc_short_by_a_page(a: Any) -> None:
    """``alloc`` refuses a request that takes the last page ``available_size()`` reported
    (a fit checked one page short); every view stays right."""
    alloc = a.alloc

    def short(need_size: int) -> Any:
        if need_size > a.available_size() - a.page_size:
            return None
        return alloc(need_size)

    a.alloc = short
