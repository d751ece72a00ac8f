"""Hybrid sliding-window targets and what they support.

A hybrid factory is called as ``factory(size=, size_swa=, page_size=, need_sort=, device=)`` and
returns an allocator with SGLang 0.5.23's ``SWATokenToKVPoolAllocator`` methods;
``factory.kvpool_hybrid_capabilities`` declares what it supports (:class:`HybridCapabilities`).
Targets: kvpool's own allocator (checked and unchecked) and SGLang 0.5.23's, whose capabilities
come from the divergence registry (``kvpool.oracle.peers.divergences``, target ``sglang-swa``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, cast

from ...engine.capabilities import Capabilities, declare_all
from ...engine.registry import FAMILIES, load
from ...peers.declared import declared_by_registry


@dataclass(frozen=True)
class HybridCapabilities(Capabilities):
    """The hybrid rules a target supports: the single-pool fields that apply to it, and three more.

    Attributes (beside :class:`~kvpool.oracle.engine.capabilities.Capabilities`'):
        page_sizes / need_sort: the configurations the factory accepts; by default 1, 4 and 16
            (every page size class: token-like, small, and >= 16).
        checked: exception types raised on caller errors (``True``: ContractViolation, whose
            clause must match the spec's); ``False``: no bad input is sent; a mapping from call
            names (``CHECKABLE_CALLS``) to types checks those calls only. A declaration that
            names some fields only (``HybridCapabilities(checked=X)``) takes the others from the
            undeclared default (unchecked, page sizes 1, 4 and 16, everything else on).
        groups: free groups; ``capacity_hooks``: ``evict_to_free_tokens`` /
            ``check_decode_capacity``; ``resize`` / ``clear``.
        segments: ``"shared"`` (any start, touching segments share a boundary page) or
            ``"disjoint"`` (page-aligned starts, page-disjoint segments).
        ownership: the allocator keeps no reference to the tensors it is given or hands out
            (the engine's probes: ``ALIAS-1..3``, and ``GROUP-3`` for a free inside a group).
        atomic_decode: a decode refused by one side changes neither side (``SWA-9``).
        resize_grow: ``resize`` may grow the full pool past the constructor's size.
        swa_tail: ``alloc_extend_swa_tail``, SGLang's PD-decode pre-allocation (``SWA-20``):
            page sizes above 1 admit some requests with SWA pages for their window tail only.
        pure_swa: the target is the pure sliding-window variant (``SWA-21..25``): one token
            pool as both sides, identity mapping; created with ``size == size_swa``, page
            size 1 only; ``free_full`` releases nothing.
        slot_forms: the forms of slot tensors (slots, segments, ``last_loc``, ``kv_indices``)
            the target accepts beside int64 contiguous ones: ``"int32"`` rows and
            ``"strided"`` views, as SGLang's scheduler passes them (by default both).
        divergences: registry ids explaining what is switched off.
    """

    page_sizes: tuple[int, ...] = (1, 4, 16)
    atomic_decode: bool = True
    resize_grow: bool = True
    swa_tail: bool = True
    pure_swa: bool = False

    # single-pool fields that say nothing about a hybrid target (not printed)
    UNUSED: ClassVar[tuple[str, ...]] = (
        "paged", "extend", "decode_ps1", "reference_order", "page_ids", "base_api", "merge",
        "capacity_context")

    # the calls the hybrid run sends bad input to
    CHECKABLE_CALLS: ClassVar[tuple[str, ...]] = (
        "free", "free_swa", "free_swa_segment", "free_full", "translate_loc_from_full_to_swa",
        "alloc_extend", "resize")

    def replace(self, **changes: Any) -> HybridCapabilities:
        return cast(HybridCapabilities, super().replace(**changes))


FULL = cast(HybridCapabilities, declare_all(HybridCapabilities()))
# the pure sliding-window variant: page size 1, no PD pre-allocation (SWA-21)
PURE = FULL.replace(page_sizes=(1,), swa_tail=False, pure_swa=True)


def _dtype() -> Any:
    import torch

    return torch.float16


def kvpool_swa(*, size: int, size_swa: int, page_size: int, need_sort: bool,
               device: str = "cpu", pure_swa: bool = False) -> Any:
    """``kvpool.impl.SWATokenToKVPoolAllocator`` in checked mode (``pure_swa``: the pure
    variant, as a pure run's repro builds it)."""
    from kvpool.impl import SWATokenToKVPoolAllocator

    if pure_swa:
        return kvpool_pure_swa(size=size, size_swa=size_swa, page_size=page_size,
                               need_sort=need_sort, device=device)
    return SWATokenToKVPoolAllocator(size, size_swa, page_size, _dtype(), device, None,
                                     need_sort, checked=True)


def kvpool_swa_unchecked(*, size: int, size_swa: int, page_size: int, need_sort: bool,
                         device: str = "cpu", pure_swa: bool = False) -> Any:
    """``kvpool.impl.SWATokenToKVPoolAllocator`` in production (unchecked) mode (``pure_swa``:
    the pure variant)."""
    from kvpool.impl import SWATokenToKVPoolAllocator
    from kvpool.impl.swa_pure import PureSWATokenToKVPoolAllocator

    if pure_swa:
        return PureSWATokenToKVPoolAllocator(size_swa, page_size, _dtype(), device, None,
                                             need_sort)
    return SWATokenToKVPoolAllocator(size, size_swa, page_size, _dtype(), device, None,
                                     need_sort)


def sglang_swa(*, size: int, size_swa: int, page_size: int, need_sort: bool,
               device: str = "cpu") -> Any:
    """SGLang 0.5.23 ``SWATokenToKVPoolAllocator`` with a KV pool object of its own
    ``BaseSWAKVPool`` type (:mod:`kvpool.oracle.peers.peer_swa`; naive CPU kernels)."""
    from ...peers.peer_swa import load_sglang_swa, make_swa_kv_pool

    return load_sglang_swa().SWATokenToKVPoolAllocator(
        size, size_swa, page_size, _dtype(), device, make_swa_kv_pool(), need_sort)


def kvpool_pure_swa(*, size: int, size_swa: int, page_size: int, need_sort: bool,
                    device: str = "cpu", pure_swa: bool = True) -> Any:
    """``kvpool.impl.swa_pure.PureSWATokenToKVPoolAllocator`` in checked mode (one pool of
    ``size_swa`` slots; ``size`` is the same number, SWA-21)."""
    from kvpool.impl.swa_pure import PureSWATokenToKVPoolAllocator

    return PureSWATokenToKVPoolAllocator(size_swa, page_size, _dtype(), device, None, need_sort,
                                         checked=True)


def sglang_pure_swa(*, size: int, size_swa: int, page_size: int, need_sort: bool,
                    device: str = "cpu", pure_swa: bool = True) -> Any:
    """SGLang 0.5.23 ``PureSWATokenToKVPoolAllocator`` with a KV pool object of its own
    ``BaseSWAKVPool`` type (:mod:`kvpool.oracle.peers.peer_swa`)."""
    from ...peers.peer_swa import load_sglang_swa, make_swa_kv_pool

    return load_sglang_swa().PureSWATokenToKVPoolAllocator(
        size_swa, page_size, _dtype(), device, make_swa_kv_pool(), need_sort)


kvpool_swa.kvpool_hybrid_capabilities = FULL  # type: ignore[attr-defined]
kvpool_swa_unchecked.kvpool_hybrid_capabilities = FULL.replace(checked=False)  # type: ignore[attr-defined]
sglang_swa.kvpool_hybrid_capabilities = declared_by_registry(  # type: ignore[attr-defined]
    FULL, "sglang-swa", own=False)
kvpool_pure_swa.kvpool_hybrid_capabilities = PURE  # type: ignore[attr-defined]
sglang_pure_swa.kvpool_hybrid_capabilities = declared_by_registry(  # type: ignore[attr-defined]
    PURE, "sglang-pure-swa", own=False)

# the family's aliases (its registry record names them), each to its factory above
HYBRID_TARGETS = {name: load(path) for name, (path,) in FAMILIES["hybrid"].aliases.items()}


def _probe_sglang_swa() -> None:
    """Import SGLang's SWA module (a peer target's ``kvpool_probe``). Raises PeerNotInstalled
    where SGLang is absent, PeerUnavailable where it fails to import."""
    from ...peers.peer_swa import load_sglang_swa

    load_sglang_swa()


sglang_swa.kvpool_probe = sglang_pure_swa.kvpool_probe = _probe_sglang_swa  # type: ignore[attr-defined]
