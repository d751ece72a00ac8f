"""kvpool's own unified full + SWA pool as a unified-family target.

:func:`kvpool_unified` builds :class:`kvpool.impl.unified_swa.UnifiedSWAAllocator` with the
geometry of SGLang 0.5.23's CPU fixture as the family models it: one full and one SWA layer of
:data:`~kvpool.oracle.families.unified.peer.ENTRY_BYTES` a token each (one head of dim 8, fp16 K
and V), static caps of :data:`~kvpool.oracle.families.unified.peer.STATIC_CAP_PAGES` pages a side,
checked mode on (declared ``checked``: a freed id freed or translated raises
``ContractViolation("UNI-11")``). Aliases:
``kvpool-unified`` (both compaction modes), ``kvpool-unified-eager``, ``kvpool-unified-lazy``.

:func:`kvpool_unified_tri` builds kvpool's tri-pool
(:class:`kvpool.impl.unified_tri.UnifiedMambaSWAAllocator`) with the geometry of SGLang's
tri-pool fixture, judged as ``sglang-unified-tri`` is (its float chain's views exactly, its
refusals as a bound): ``kvpool-unified-tri``, ``kvpool-unified-tri-eager``,
``kvpool-unified-tri-lazy``.

:func:`kvpool_unified_in_sglang` and :func:`kvpool_unified_tri_in_sglang` are the same two pools as
SGLang builds them once :func:`kvpool.integrations.sglang.install` has run: SGLang's own CPU
builders (``build_swa_pool``, ``build_tri_pool``) construct kvpool's classes over SGLang's
``UnifiedKVPool`` / ``UnifiedSWAKVPool`` / ``UnifiedMambaPool``, so every page copy, zeroing
and K/V byte the family checks goes through SGLang's pools; checked mode is switched on after
construction (``checked = True``). Aliases ``kvpool-unified-in-sglang`` and
``kvpool-unified-tri-in-sglang``; they need SGLang.
"""

from __future__ import annotations

from typing import Any

from kvpool.impl.unified_store import SideLayout
from kvpool.impl.unified_swa import UnifiedSWAAllocator
from kvpool.impl.unified_tri import UnifiedMambaSWAAllocator

from .peer import ENTRY_BYTES, STATIC_CAP_PAGES, load_unified
from .targets import FULL, probe_sglang_unified

__all__ = ["kvpool_unified", "kvpool_unified_eager", "kvpool_unified_in_sglang",
           "kvpool_unified_lazy", "kvpool_unified_tri", "kvpool_unified_tri_eager",
           "kvpool_unified_tri_in_sglang", "kvpool_unified_tri_lazy", "tri_total_bytes"]

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


def _tri_mode(name: str, modes: tuple[str, ...]) -> Any:
    def factory(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu",
                need_sort: bool = False) -> UnifiedMambaSWAAllocator:
        return kvpool_unified_tri(total_bytes=total_bytes, page_size=page_size, lazy=lazy,
                                  device=device)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"kvpool_unified_tri, {' and '.join(modes)} compaction only."
    factory.kvpool_unified_capabilities = TRI.replace(  # type: ignore[attr-defined]
        compaction=modes)
    return factory


# the tri-pool: capacity judged on the float chain (UNI-14), refusals as a bound
TRI = FULL.replace(capacity_exact=False, float_chain=True)
kvpool_unified.kvpool_unified_capabilities = FULL  # type: ignore[attr-defined]
kvpool_unified_eager = _mode("kvpool_unified_eager", ("eager",))
kvpool_unified_lazy = _mode("kvpool_unified_lazy", ("lazy",))


STATE_SLOT_BYTES = 176  # the fixture's Mamba layer: conv (3, 8) bf16, temporal (1, 4, 8) fp32
STATE_SLOTS = 8  # the fixture's max_mamba_cache_size


def tri_total_bytes(page_size: int) -> int:
    """The tri-pool fixture's buffer: the static caps' full and SWA pages plus the state slots."""
    return STATIC_CAP_PAGES * page_size * 2 * ENTRY_BYTES + STATE_SLOTS * STATE_SLOT_BYTES


def kvpool_unified_tri(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu",
                       need_sort: bool = False) -> UnifiedMambaSWAAllocator:
    """kvpool's tri-pool with the geometry of SGLang 0.5.23's tri-pool fixture (its buffer
    size is the fixture's, :func:`tri_total_bytes`; ``total_bytes`` is not used, as for
    ``sglang-unified-tri``), checked mode on."""
    cap = STATIC_CAP_PAGES * page_size
    return UnifiedMambaSWAAllocator(tri_total_bytes(page_size), page_size, full_layout=LAYOUT,
                                    swa_layout=LAYOUT, state_bytes=STATE_SLOT_BYTES, lazy=lazy,
                                    full_max_total_num_tokens=cap, swa_max_total_num_tokens=cap,
                                    device=device, checked=True)


kvpool_unified_tri.kvpool_unified_capabilities = TRI  # type: ignore[attr-defined]
kvpool_unified_tri_eager = _tri_mode("kvpool_unified_tri_eager", ("eager",))
kvpool_unified_tri_lazy = _tri_mode("kvpool_unified_tri_lazy", ("lazy",))


def _installed(build: Any) -> Any:
    """``build()`` under :func:`kvpool.integrations.sglang.using_kvpool`, checked mode on."""
    from kvpool.integrations.sglang import using_kvpool

    with using_kvpool():
        alloc = build()
    alloc.checked = True
    return alloc


def kvpool_unified_in_sglang(*, total_bytes: int, page_size: int, lazy: bool,
                             device: str = "cpu", need_sort: bool = False) -> Any:
    """kvpool's full + SWA pool built by SGLang's ``init_unified_swa_pools`` after
    ``install()`` over a ``total_bytes`` buffer (module docstring)."""
    return _installed(lambda: load_unified().build_swa_pool(page_size=page_size, lazy=lazy,
                                                            total_bytes=total_bytes))


def kvpool_unified_tri_in_sglang(*, total_bytes: int, page_size: int, lazy: bool,
                                 device: str = "cpu", need_sort: bool = False) -> Any:
    """kvpool's tri-pool built by SGLang's ``init_unified_mamba_swa_pools`` after
    ``install()`` (the fixture's buffer; ``total_bytes`` is not used; module docstring)."""
    return _installed(lambda: load_unified().build_tri_pool(page_size=page_size, lazy=lazy)[1])


kvpool_unified_in_sglang.kvpool_unified_capabilities = FULL  # type: ignore[attr-defined]
kvpool_unified_tri_in_sglang.kvpool_unified_capabilities = TRI  # type: ignore[attr-defined]
for _factory in (kvpool_unified_in_sglang, kvpool_unified_tri_in_sglang):
    setattr(_factory, "kvpool_probe", probe_sglang_unified)  # noqa: B010 (a function attribute)
