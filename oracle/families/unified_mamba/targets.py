"""The unified full + Mamba family's targets and what they support.

A factory is called as ``factory(total_bytes=, page_size=, lazy=, device=)`` (``need_sort=False``
accepted and unused), ``total_bytes`` being the whole buffer (full end and state end), and returns
an allocator with SGLang 0.5.23's ``UnifiedMambaTokenToKVPoolAllocator`` methods (one full
layer of :data:`~.peer.ENTRY_BYTES` a token, one Mamba layer of :data:`~.peer.STATE_BYTES` a
slot); ``factory.kvpool_unified_mamba_capabilities`` declares what it supports
(:class:`UnifiedMambaCapabilities`). Targets: kvpool's ``UnifiedMambaAllocator`` (checked;
``kvpool-unified-mamba``, ``-eager``, ``-lazy``) and SGLang's composite from its own pool builder
(``sglang-unified-mamba``, ``-eager``, ``-lazy``), whose capabilities come from the divergence
registry (target ``sglang-unified-mamba``); ``kvpool-unified-mamba-in-sglang`` is kvpool's pool
as SGLang's ``init_unified_mamba_pools`` builds it once :func:`kvpool.integrations.sglang.install`
has run (over SGLang's pools; checked mode switched on after construction).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, cast

from ...engine.capabilities import Capabilities, declare_all
from ...peers.declared import declared_by_registry
from .peer import ENTRY_BYTES, MAX_STATE_SLOTS, STATE_BYTES, build_unified_mamba

__all__ = ["FULL", "UnifiedMambaCapabilities", "kvpool_unified_mamba",
           "kvpool_unified_mamba_eager", "kvpool_unified_mamba_in_sglang",
           "kvpool_unified_mamba_lazy", "sglang_unified_mamba", "sglang_unified_mamba_eager",
           "sglang_unified_mamba_lazy"]

BUILDER_STATE_BYTES = MAX_STATE_SLOTS * STATE_BYTES  # what SGLang's builder adds for the state end


@dataclass(frozen=True)
class UnifiedMambaCapabilities(Capabilities):
    """The unified full + Mamba rules a target supports.

    Attributes (beside :class:`~kvpool.oracle.engine.capabilities.Capabilities`'):
        page_sizes: by default 1, 4 and 16; ``need_sort``: ``(False,)``.
        compaction: the modes the factory builds (``"eager"``, ``"lazy"``); each example draws
            one.
        decode_ps1: ``alloc_decode`` is correct at page size 1; without it the scheduler
            decodes through ``alloc`` there.
        checked: the types raised on caller errors (``UMB-8``: a free of a free id or an id
            named twice, a translation of a free id, a free of a free state slot); ``False``:
            no bad input is sent. Per call: ``free``, ``translate_kv_indices_for_transfer``,
            ``free_state``.
        free_any_order: ``free`` appends the freed virtual ids ascending whatever the order of
            the tokens passed (``UMB-2``); without it the scheduler passes them ascending.
        clear: ``clear()``; groups: ``free_group_begin`` / ``free_group_end``.
        census_tables: ``verify_byte_accounting()`` reports a live full page bound to another
            one's physical page; census_frontiers: it reports the state end's frontier past
            full's (``UMB-8``, probed on a separate instance at every ``create``).
        entry_bytes / state_bytes: bytes of a full token and of a state slot.
    """

    page_sizes: tuple[int, ...] = (1, 4, 16)
    need_sort: tuple[bool, ...] = (False,)
    checked: Any = True
    compaction: tuple[str, ...] = ("eager", "lazy")
    free_any_order: bool = True
    census_tables: bool = True
    census_frontiers: bool = True
    entry_bytes: int = ENTRY_BYTES
    state_bytes: int = STATE_BYTES

    UNUSED: ClassVar[tuple[str, ...]] = (
        "paged", "extend", "segments", "reference_order", "shortage_raises", "page_ids",
        "base_api", "resize", "merge", "capacity_hooks", "capacity_context", "ownership",
        "slot_forms")
    CHECKABLE_CALLS: ClassVar[tuple[str, ...]] = (
        "free", "translate_kv_indices_for_transfer", "free_state")

    def replace(self, **changes: Any) -> UnifiedMambaCapabilities:
        return cast(UnifiedMambaCapabilities, super().replace(**changes))


FULL = cast(UnifiedMambaCapabilities, declare_all(UnifiedMambaCapabilities(checked=True)))


def kvpool_unified_mamba(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu",
                         need_sort: bool = False) -> Any:
    """kvpool's ``UnifiedMambaAllocator`` over a ``total_bytes`` buffer, checked."""
    from kvpool.impl import UnifiedMambaAllocator

    return UnifiedMambaAllocator(total_bytes, page_size, state_bytes=STATE_BYTES, lazy=lazy,
                                 device=device, checked=True)


def sglang_unified_mamba(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu",
                         need_sort: bool = False) -> Any:
    """SGLang 0.5.23's ``UnifiedMambaTokenToKVPoolAllocator`` from its own pool builder, over
    the same whole buffer (the builder adds :data:`BUILDER_STATE_BYTES` to what it is given)."""
    return build_unified_mamba(total_bytes=total_bytes - BUILDER_STATE_BYTES,
                               page_size=page_size, lazy=lazy)


def kvpool_unified_mamba_in_sglang(*, total_bytes: int, page_size: int, lazy: bool,
                                   device: str = "cpu", need_sort: bool = False) -> Any:
    """kvpool's ``UnifiedMambaAllocator`` built by SGLang's ``init_unified_mamba_pools`` after
    ``install()``, over the same whole buffer as :func:`sglang_unified_mamba`, checked."""
    from kvpool.integrations.sglang import using_kvpool

    with using_kvpool():
        alloc = sglang_unified_mamba(total_bytes=total_bytes, page_size=page_size, lazy=lazy)
    alloc.checked = True
    return alloc


def _mode(base: Any, name: str, modes: tuple[str, ...], caps: UnifiedMambaCapabilities) -> Any:
    def factory(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu",
                need_sort: bool = False) -> Any:
        return base(total_bytes=total_bytes, page_size=page_size, lazy=lazy, device=device)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"{base.__name__}, {' and '.join(modes)} compaction only."
    factory.kvpool_unified_mamba_capabilities = caps.replace(  # type: ignore[attr-defined]
        compaction=modes)
    return factory


def probe_sglang_unified_mamba() -> None:
    """Import SGLang's unified pools (a peer target's ``kvpool_probe``). Raises
    PeerNotInstalled where SGLang is absent, PeerUnavailable where it fails to import."""
    from ..unified.peer import load_unified

    load_unified()


SGLANG = declared_by_registry(FULL, "sglang-unified-mamba")
kvpool_unified_mamba.kvpool_unified_mamba_capabilities = FULL  # type: ignore[attr-defined]
kvpool_unified_mamba_eager = _mode(kvpool_unified_mamba, "kvpool_unified_mamba_eager",
                                   ("eager",), FULL)
kvpool_unified_mamba_lazy = _mode(kvpool_unified_mamba, "kvpool_unified_mamba_lazy",
                                  ("lazy",), FULL)
sglang_unified_mamba.kvpool_unified_mamba_capabilities = SGLANG  # type: ignore[attr-defined]
sglang_unified_mamba_eager = _mode(sglang_unified_mamba, "sglang_unified_mamba_eager",
                                   ("eager",), SGLANG)
sglang_unified_mamba_lazy = _mode(sglang_unified_mamba, "sglang_unified_mamba_lazy",
                                  ("lazy",), SGLANG)
kvpool_unified_mamba_in_sglang.kvpool_unified_mamba_capabilities = FULL  # type: ignore[attr-defined]
for _factory in (sglang_unified_mamba, sglang_unified_mamba_eager, sglang_unified_mamba_lazy,
                 kvpool_unified_mamba_in_sglang):
    setattr(_factory, "kvpool_probe", probe_sglang_unified_mamba)  # noqa: B010
