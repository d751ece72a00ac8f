"""Unified memory-pool targets and what they support.

A unified factory is called as ``factory(total_bytes=, page_size=, lazy=, device=)`` (and
accepts ``need_sort=False``, which the unified composite has no use for) and returns
an allocator with SGLang 0.5.23's ``UnifiedSWATokenToKVPoolAllocator`` methods (one full and one
SWA layer of :data:`~kvpool.oracle.families.unified.peer.ENTRY_BYTES` a token each, full + SWA
in one byte buffer); ``factory.kvpool_unified_capabilities`` declares what it supports
(:class:`UnifiedCapabilities`). Targets: SGLang 0.5.23's composite, eager and lazy compaction
(``sglang-unified-swa``; ``-eager`` / ``-lazy`` for one mode), whose capabilities come from the
divergence registry (``kvpool.oracle.peers.divergences``, target ``sglang-unified``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, cast

from ...engine.capabilities import Capabilities, declare_all
from ...peers.declared import declared_by_registry
from ...peers.divergences import divergences_for
from .peer import ENTRY_BYTES, STATIC_CAP_PAGES, build_unified_swa


@dataclass(frozen=True)
class UnifiedCapabilities(Capabilities):
    """The unified rules a target supports: the single-pool fields that apply, and these.

    Attributes (beside :class:`~kvpool.oracle.engine.capabilities.Capabilities`'):
        page_sizes: the page sizes the factory accepts; by default 1, 4 and 16 (every page size
            class); ``need_sort``: ``(False,)``.
        compaction: the modes the factory builds (``"eager"``, ``"lazy"``); each example draws
            one (the ``create`` step's ``lazy``).
        decode_ps1: ``alloc_decode`` is correct at page size 1 (``UNI-8``); without it the
            scheduler decodes through ``alloc`` there.
        checked: exception types raised on caller errors (a freed id translated or freed
            again, ``UNI-11``); ``False``: no bad input is sent.
        capacity_hooks: ``evict_to_free_tokens`` (the ``UNI-8`` gate, compaction included).
        clear: ``clear()`` (``UNI-12``); groups: ``free_group_begin`` / ``free_group_end``.
        census_tables: ``verify_byte_accounting()`` reports a page freed twice under lazy
            compaction and a virtual page bound to another one's physical page (``UNI-13``,
            probed on a separate instance at every ``create``).
        census_frontiers: it reports crossing frontiers (``UNI-3``, probed alike).
        free_any_order: ``free`` appends the virtual ids ascending whatever the order of the
            tokens passed (``UNI-10``); without it the scheduler passes them ascending.
        capacity_exact: the spec model fixes the target's capacity (``UNI-7``..``UNI-9``);
            ``False`` (the tri-pool, whose mamba side is not modelled): judged as a bound with
            the target's geometry (:mod:`.bound`), placement by what must hold.
        float_chain: a tri-pool whose SWA side floats between a state end and full: its five
            capacity views are judged exactly from its chain's frontiers (``UNI-14``,
            :mod:`.float_views`), its live pages against the model's.
        entry_bytes: bytes a token occupies in the full and in the SWA sub-pool.
        static_cap_pages: the static per-side caps, in pages (``UNI-9``).
        data_plane: every handed-out token's K/V bytes carry a signature, read back after every
            call through the target's translations (``UNI-6``).
        slot_forms: the forms of slot tensors (token ids, ``last_loc``, ``kv_indices``) the
            target accepts beside int64 contiguous ones: ``"int32"`` rows and ``"strided"``
            views, as SGLang's scheduler passes them (by default both).
    """

    page_sizes: tuple[int, ...] = (1, 4, 16)
    need_sort: tuple[bool, ...] = (False,)
    checked: Any = True
    compaction: tuple[str, ...] = ("eager", "lazy")
    census_tables: bool = True
    census_frontiers: bool = True
    free_any_order: bool = True
    capacity_exact: bool = True
    float_chain: bool = False
    entry_bytes: tuple[int, int] = (ENTRY_BYTES, ENTRY_BYTES)
    static_cap_pages: int = STATIC_CAP_PAGES
    data_plane: bool = True

    UNUSED: ClassVar[tuple[str, ...]] = (
        "paged", "extend", "segments", "reference_order", "shortage_raises",
        "page_ids", "base_api", "resize", "merge", "capacity_context", "ownership")

    # the calls the unified run sends bad input to
    CHECKABLE_CALLS: ClassVar[tuple[str, ...]] = (
        "free", "translate_kv_indices_for_transfer", "translate_loc_from_full_to_swa")

    def replace(self, **changes: Any) -> UnifiedCapabilities:
        return cast(UnifiedCapabilities, super().replace(**changes))


FULL = cast(UnifiedCapabilities, declare_all(UnifiedCapabilities()))


def _sglang(lazy_modes: tuple[str, ...]) -> Any:
    def factory(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu",
                need_sort: bool = False) -> Any:
        """SGLang 0.5.23 ``UnifiedSWATokenToKVPoolAllocator`` from its own CPU builder
        (``build_swa_pool``; extend / decode kernels on SGLang's torch fallbacks)."""
        return build_unified_swa(total_bytes=total_bytes, page_size=page_size, lazy=lazy)

    factory.kvpool_unified_capabilities = declared_by_registry(  # type: ignore[attr-defined]
        FULL.replace(compaction=lazy_modes), "sglang-unified")
    return factory


def registered_for(target: str) -> list[Any]:
    """The registry entries made for ``target`` by name."""
    return [d for d in divergences_for(target) if d.target == target]


sglang_unified_swa = _sglang(("eager", "lazy"))
sglang_unified_swa.__qualname__ = sglang_unified_swa.__name__ = "sglang_unified_swa"
sglang_unified_swa_eager = _sglang(("eager",))
sglang_unified_swa_eager.__qualname__ = sglang_unified_swa_eager.__name__ = (
    "sglang_unified_swa_eager")
sglang_unified_swa_lazy = _sglang(("lazy",))
sglang_unified_swa_lazy.__qualname__ = sglang_unified_swa_lazy.__name__ = "sglang_unified_swa_lazy"

def sglang_unified_tri(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu",
                       need_sort: bool = False) -> Any:
    """SGLang 0.5.23's tri-pool (mamba + SWA float + full) from its own CPU builder
    (``build_tri_pool``; its buffer size is the builder's, ``total_bytes`` is not used); its
    full + SWA part is judged with the model's tables, its refusals as a bound
    (``capacity_exact=False``), its capacity views exactly on its float chain (``UNI-14``)."""
    from .peer import load_unified

    return load_unified().build_tri_pool(page_size=page_size, lazy=lazy)[1]


sglang_unified_tri.kvpool_unified_capabilities = declared_by_registry(  # type: ignore[attr-defined]
    FULL.replace(capacity_exact=False, float_chain=True, census_frontiers=False),
    "sglang-unified")


def probe_sglang_unified() -> None:
    """Import SGLang's unified pools (a peer target's ``kvpool_probe``). Raises
    PeerNotInstalled where SGLang is absent, PeerUnavailable where it fails to import."""
    from .peer import load_unified

    load_unified()


for _factory in (sglang_unified_swa, sglang_unified_swa_eager, sglang_unified_swa_lazy,
                 sglang_unified_tri):
    setattr(_factory, "kvpool_probe", probe_sglang_unified)  # noqa: B010 (a function attribute)
