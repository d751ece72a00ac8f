"""kvpool's own unified full + SWA pool as a unified-family target.

:func:`kvpool_unified` builds :class:`kvpool.impl.unified_swa.UnifiedSWAAllocator` with the
geometry of SGLang 0.5.23's CPU fixture as the family models it: one full and one SWA layer of
:data:`~kvpool.oracle.families.unified.peer.ENTRY_BYTES` a token each (one head of dim 8, fp16 K
and V), static caps of :data:`~kvpool.oracle.families.unified.peer.STATIC_CAP_PAGES` pages a side,
checked mode on (declared ``checked``: a freed id freed or translated raises
``ContractViolation("UNI-11")``). Aliases:
``kvpool-unified`` (both compaction modes), ``kvpool-unified-eager``, ``kvpool-unified-lazy``.
"""

from __future__ import annotations

from typing import Any

from kvpool.impl.unified_store import SideLayout
from kvpool.impl.unified_swa import UnifiedSWAAllocator

from .peer import ENTRY_BYTES, STATIC_CAP_PAGES
from .targets import FULL

__all__ = ["kvpool_unified", "kvpool_unified_eager", "kvpool_unified_lazy"]

LAYOUT = SideLayout(layer_num=1, head_num=1, head_dim=8)
assert LAYOUT.entry_bytes == ENTRY_BYTES


def kvpool_unified(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu",
                   need_sort: bool = False) -> UnifiedSWAAllocator:
    """kvpool's unified full + SWA pool over a ``total_bytes`` buffer (module docstring)."""
    cap = STATIC_CAP_PAGES * page_size
    return UnifiedSWAAllocator(total_bytes, page_size, full_layout=LAYOUT, swa_layout=LAYOUT,
                               lazy=lazy, full_max_total_num_tokens=cap,
                               swa_max_total_num_tokens=cap, device=device, checked=True)


def _mode(name: str, modes: tuple[str, ...]) -> Any:
    def factory(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu",
                need_sort: bool = False) -> UnifiedSWAAllocator:
        return kvpool_unified(total_bytes=total_bytes, page_size=page_size, lazy=lazy,
                              device=device)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"kvpool_unified, {' and '.join(modes)} compaction only."
    factory.kvpool_unified_capabilities = FULL.replace(  # type: ignore[attr-defined]
        compaction=modes)
    return factory


kvpool_unified.kvpool_unified_capabilities = FULL  # type: ignore[attr-defined]
kvpool_unified_eager = _mode("kvpool_unified_eager", ("eager",))
kvpool_unified_lazy = _mode("kvpool_unified_lazy", ("lazy",))
