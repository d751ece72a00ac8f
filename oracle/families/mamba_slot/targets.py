"""The mamba-slot family's targets and what they support.

A mamba-slot factory is called as ``factory(size=N, device=...)`` (``need_sort`` is accepted
and ignored) and returns an allocator with SGLang 0.5.23's ``MambaSlotAllocator`` methods;
``factory.kvpool_mamba_slot_capabilities`` declares what it supports
(:class:`MambaSlotCapabilities`). One configuration (page size 1, ``need_sort`` false): slots
are per request, there are no pages. Targets: kvpool's own allocator
(:mod:`kvpool.impl.mamba_slots`, checked) and SGLang's, loaded on first use, whose
capabilities come from the divergence registry (target ``sglang-mamba-slot``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, cast

from ...engine.capabilities import Capabilities, declare_all
from ...peers.declared import declared_by_registry


@dataclass(frozen=True)
class MambaSlotCapabilities(Capabilities):
    """What a mamba-slot target supports (beside ``checked``, ``clear`` and ``divergences``):

    Attributes:
        checked: the types raised on caller errors (``True``: ContractViolation naming the
            spec's clause; ``False``: no bad input is sent; per call: ``alloc``, ``free``,
            ``alloc_group_begin``).
        groups: ``alloc_group_begin`` / ``alloc_group_end``.
        clear_in_group: ``clear()`` closes an open group (``MSLOT-11``); ``False``: ``clear``
            is called only with no group open.
    """

    UNUSED: ClassVar[tuple[str, ...]] = (
        "paged", "page_sizes", "need_sort", "extend", "decode_ps1", "segments",
        "reference_order", "shortage_raises", "page_ids", "base_api", "resize", "merge",
        "capacity_hooks", "capacity_context", "ownership", "slot_forms")
    CHECKABLE_CALLS: ClassVar[tuple[str, ...]] = ("alloc", "free", "alloc_group_begin")

    paged: bool = False
    page_sizes: tuple[int, ...] = (1,)
    need_sort: tuple[bool, ...] = (False,)
    extend: bool = False
    ownership: bool = False
    slot_forms: tuple[str, ...] = ()
    clear_in_group: bool = True

    def replace(self, **changes: Any) -> MambaSlotCapabilities:
        return cast(MambaSlotCapabilities, super().replace(**changes))


FULL = cast(MambaSlotCapabilities, declare_all(MambaSlotCapabilities(checked=True)))


def kvpool_mamba_slot(*, size: int, need_sort: bool = False, device: str = "cpu") -> Any:
    """``kvpool.impl.mamba_slots.MambaSlotAllocator`` (checked)."""
    from kvpool.impl.mamba_slots import MambaSlotAllocator

    return MambaSlotAllocator(size, device)


def load_sglang_mamba() -> Any:
    """SGLang 0.5.23's ``sglang.srt.mem_cache.allocator.mamba`` module, imported on a CPU as
    the other allocators are (:func:`~kvpool.oracle.peers.peer_import.load_sglang_module`).
    Raises PeerNotInstalled when SGLang is absent, PeerUnavailable when it fails to import."""
    from ...peers.peer_import import load_sglang_module

    return load_sglang_module("mamba")


def sglang_mamba_slot(*, size: int, need_sort: bool = False, device: str = "cpu") -> Any:
    """SGLang 0.5.23's ``MambaSlotAllocator``."""
    return load_sglang_mamba().MambaSlotAllocator(size, device)




kvpool_mamba_slot.kvpool_mamba_slot_capabilities = FULL  # type: ignore[attr-defined]
sglang_mamba_slot.kvpool_probe = load_sglang_mamba  # type: ignore[attr-defined]
sglang_mamba_slot.kvpool_mamba_slot_capabilities = declared_by_registry(  # type: ignore[attr-defined]
    FULL, "sglang-mamba-slot")
