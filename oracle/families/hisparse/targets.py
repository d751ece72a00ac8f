"""The HiSparse family's targets and what they support.

A HiSparse factory is called as ``factory(size=N, page_size=P, need_sort=B, ratio=R,
device=...)`` and returns an allocator with SGLang 0.5.23's ``HiSparseTokenToKVPoolAllocator``
methods and attributes (``logical_attn_allocator``, ``hisparse_attn_allocator`` and
``full_to_hisparse_device_index_mapping`` are read after every call);
``factory.kvpool_hisparse_capabilities`` declares what it supports
(:class:`HiSparseCapabilities`). Targets: kvpool's own allocator (:mod:`kvpool.impl.hisparse`,
checked) and SGLang's, loaded on first use (:mod:`.peer`), whose capabilities come from the
divergence registry (target ``sglang-hisparse``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, cast

import torch

from ...engine.capabilities import Capabilities, declare_all
from ...peers.declared import declared_by_registry


@dataclass(frozen=True)
class HiSparseCapabilities(Capabilities):
    """What a HiSparse target supports (beside ``checked``, ``clear``, ``groups``,
    ``divergences``, ``page_sizes`` and ``need_sort``):

    Attributes:
        checked: the types raised on caller errors (``True``: ContractViolation naming the
            spec's clause; ``False``: no bad input is sent; per call: ``CHECKABLE_CALLS``).
        groups: ``free_group_begin`` / ``free_group_end`` (no deferral, ``HSP-11``).
        decode_ps1: ``alloc_decode`` is correct at page size 1 (``HSP-6``); ``False``: the
            decode step uses ``alloc_logical_only`` there.
        ratios: the ``host_to_device_ratio`` values drawn (one per example).
        dsv4: the target is SGLang's DeepSeek V4 variant (``HSP-12..16``): a hybrid full + SWA
            logical side, a compressed device side (one device slot per four tokens), built as
            ``factory(size=, size_swa=, page_size=, need_sort=, size_hisparse=,
            hisparse_page_size=, c4_logical_size=, device=)`` and driven by
            :mod:`.dsv4` (its page sizes are multiples of 4).
        atomic_decode: (DSV4) a decode refused by one logical side changes neither side
            (``HSP-14``); ``False``: no decode is sent while a logical side lacks a page.
    """

    UNUSED: ClassVar[tuple[str, ...]] = (
        "paged", "extend", "segments", "reference_order", "shortage_raises",
        "page_ids", "base_api", "resize", "merge", "capacity_hooks", "capacity_context",
        "ownership", "slot_forms")
    CHECKABLE_CALLS: ClassVar[tuple[str, ...]] = (
        "alloc", "alloc_extend", "alloc_device_buffer", "free", "free_hisparse_indices",
        "get_last_loc_hisparse_device")

    page_sizes: tuple[int, ...] = (1, 4)
    need_sort: tuple[bool, ...] = (False, True)
    ownership: bool = False
    slot_forms: tuple[str, ...] = ()
    ratios: tuple[int, ...] = (1, 2, 3)
    dsv4: bool = False
    atomic_decode: bool = True

    def replace(self, **changes: Any) -> HiSparseCapabilities:
        return cast(HiSparseCapabilities, super().replace(**changes))


FULL = cast(HiSparseCapabilities, declare_all(HiSparseCapabilities(checked=True)))
# the DeepSeek V4 variant: no bad input is sent (its caller rules are HSP-16's, checked by the
# model's own tests), no ratio (a device slot is four tokens)
DSV4 = FULL.replace(dsv4=True, checked=False, page_sizes=(4, 8), ratios=(1,), decode_ps1=False)


def kvpool_hisparse(*, size: int, page_size: int, need_sort: bool, ratio: int = 2,
                    device: str = "cpu", **dsv4_sizes: int) -> Any:
    """``kvpool.impl.hisparse.HiSparseTokenToKVPoolAllocator`` (checked); given a DSV4 pair's
    sizes (``size_swa``, ``size_hisparse``, ...: the family's correct factory replaying a
    DSV4 repro), :func:`kvpool_hisparse_dsv4`."""
    if dsv4_sizes:
        return kvpool_hisparse_dsv4(size=size, page_size=page_size, need_sort=need_sort,
                                    device=device, **dsv4_sizes)
    from kvpool.impl.hisparse import HiSparseTokenToKVPoolAllocator

    return HiSparseTokenToKVPoolAllocator(size, page_size, torch.float16, device, None,
                                          need_sort, ratio)


def sglang_hisparse(*, size: int, page_size: int, need_sort: bool, ratio: int = 2,
                    device: str = "cpu") -> Any:
    """SGLang 0.5.23's ``HiSparseTokenToKVPoolAllocator`` over a stand-in pool
    (:func:`.peer.make_hisparse_kvcache`)."""
    from .peer import load_sglang_hisparse, make_hisparse_kvcache

    return load_sglang_hisparse().HiSparseTokenToKVPoolAllocator(
        size, page_size, torch.float16, device, make_hisparse_kvcache(), need_sort, ratio)


kvpool_hisparse.kvpool_hisparse_capabilities = FULL  # type: ignore[attr-defined]
sglang_hisparse.kvpool_hisparse_capabilities = declared_by_registry(  # type: ignore[attr-defined]
    FULL, "sglang-hisparse")


def kvpool_hisparse_dsv4(*, size: int, size_swa: int, page_size: int, need_sort: bool,
                         size_hisparse: int, hisparse_page_size: int, c4_logical_size: int,
                         device: str = "cpu") -> Any:
    """``kvpool.impl.hisparse_dsv4.DeepSeekV4HiSparseAllocator`` over kvpool's checked
    ``SWATokenToKVPoolAllocator``."""
    from kvpool.impl import SWATokenToKVPoolAllocator
    from kvpool.impl.hisparse_dsv4 import DeepSeekV4HiSparseAllocator

    logical = SWATokenToKVPoolAllocator(size, size_swa, page_size, torch.float16, device, None,
                                        need_sort, checked=True)
    return DeepSeekV4HiSparseAllocator(logical, size_hisparse=size_hisparse,
                                       hisparse_page_size=hisparse_page_size,
                                       c4_logical_size=c4_logical_size)


def sglang_hisparse_dsv4(*, size: int, size_swa: int, page_size: int, need_sort: bool,
                         size_hisparse: int, hisparse_page_size: int, c4_logical_size: int,
                         device: str = "cpu") -> Any:
    """SGLang 0.5.23's ``DeepSeekV4HiSparseTokenToKVPoolAllocator``
    (:func:`.peer.sglang_hisparse_dsv4`)."""
    from .peer import sglang_hisparse_dsv4 as make

    return make(size=size, size_swa=size_swa, page_size=page_size, size_hisparse=size_hisparse,
                hisparse_page_size=hisparse_page_size, c4_logical_size=c4_logical_size,
                need_sort=need_sort, device=device)


kvpool_hisparse_dsv4.kvpool_hisparse_capabilities = DSV4  # type: ignore[attr-defined]
sglang_hisparse_dsv4.kvpool_hisparse_capabilities = declared_by_registry(  # type: ignore[attr-defined]
    DSV4, "sglang-hisparse-dsv4")


def _probe_sglang_hisparse() -> None:
    """Import SGLang's HiSparse module (a peer target's ``kvpool_probe``). Raises
    PeerNotInstalled where SGLang is absent, PeerUnavailable where it fails to import."""
    from .peer import load_sglang_hisparse

    load_sglang_hisparse()


sglang_hisparse.kvpool_probe = _probe_sglang_hisparse  # type: ignore[attr-defined]
sglang_hisparse_dsv4.kvpool_probe = _probe_sglang_hisparse  # type: ignore[attr-defined]
