"""The page-interleave family's targets and what they support.

A factory is called as ``factory(size=S, page_size=ps, shard_size=N, need_sort=..., device=...)``
(``S`` slots per rank) and returns an allocator with SGLang 0.5.23's
``PageInterleavePoolAllocator`` methods; ``factory.kvpool_page_interleave_capabilities``
declares what it supports (:class:`PageInterleaveCapabilities`). Targets: kvpool's own allocator
(:mod:`kvpool.impl.page_interleave`, checked) and SGLang's, loaded on first use (a fake
``kvcache``: the allocator only keeps it), whose capabilities come from the divergence registry
(target ``sglang-page-interleave``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, cast

import torch

from ...engine.capabilities import Capabilities, declare_all
from ...peers.declared import declared_by_registry


@dataclass(frozen=True)
class PageInterleaveCapabilities(Capabilities):
    """What a page-interleave target supports (beside ``page_sizes``, ``need_sort``,
    ``groups``, ``merge``, ``clear`` and ``divergences``):

    Attributes:
        checked: the types raised on caller errors (``True``: ContractViolation naming the
            spec's clause; ``False``: no bad input is sent; per call: ``free``,
            ``alloc_extend``, ``free_group_begin``).
        shard_sizes: the shard-group sizes ``N`` run (each example draws one).
    """

    UNUSED: ClassVar[tuple[str, ...]] = (
        "paged", "extend", "decode_ps1", "segments", "reference_order", "shortage_raises",
        "page_ids", "base_api", "resize", "capacity_hooks", "capacity_context", "ownership",
        "slot_forms")
    CHECKABLE_CALLS: ClassVar[tuple[str, ...]] = ("free", "alloc_extend", "free_group_begin")

    ownership: bool = False
    slot_forms: tuple[str, ...] = ()
    capacity_hooks: bool = False
    shard_sizes: tuple[int, ...] = (2, 4)

    def __post_init__(self) -> None:
        """``shard_sizes`` as ints (``--declare shard_sizes=2+4`` gives text); each at least 2.
        Raises ValueError otherwise."""
        super().__post_init__()
        sizes: Any = self.shard_sizes
        if isinstance(sizes, str):
            sizes = [part for part in sizes.split("+") if part]
        sizes = tuple(int(n) for n in (sizes if isinstance(sizes, (tuple, list)) else (sizes,)))
        if not sizes or min(sizes) < 2:
            raise ValueError(f"shard_sizes must be at least 2 each, got {sizes!r}")
        object.__setattr__(self, "shard_sizes", sizes)

    def replace(self, **changes: Any) -> PageInterleaveCapabilities:
        return cast(PageInterleaveCapabilities, super().replace(**changes))


FULL = cast(PageInterleaveCapabilities,
            declare_all(PageInterleaveCapabilities(checked=True)))


def kvpool_page_interleave(*, size: int, page_size: int, shard_size: int,
                           need_sort: bool = False, device: str = "cpu") -> Any:
    """``kvpool.impl.page_interleave.PageInterleavePoolAllocator`` (checked)."""
    from kvpool.impl.page_interleave import PageInterleavePoolAllocator

    return PageInterleavePoolAllocator(size, page_size, shard_size, torch.int64, device, None,
                                       need_sort)


def load_sglang_page_interleave() -> Any:
    """SGLang 0.5.23's ``sglang.srt.mem_cache.allocator.page_interleave`` module, imported on a
    CPU as the other allocators are. Raises PeerNotInstalled when SGLang is absent,
    PeerUnavailable when it fails to import."""
    from ...peers.peer_import import load_sglang_module

    return load_sglang_module("page_interleave")


def sglang_page_interleave(*, size: int, page_size: int, shard_size: int,
                           need_sort: bool = False, device: str = "cpu") -> Any:
    """SGLang 0.5.23's ``PageInterleavePoolAllocator`` (kvcache None, no shard spec)."""
    cls = load_sglang_page_interleave().PageInterleavePoolAllocator
    return cls(size, page_size, shard_size, torch.int64, device, None, need_sort)




kvpool_page_interleave.kvpool_page_interleave_capabilities = FULL  # type: ignore[attr-defined]
sglang_page_interleave.kvpool_page_interleave_capabilities = (  # type: ignore[attr-defined]
    declared_by_registry(FULL, "sglang-page-interleave"))


sglang_page_interleave.kvpool_probe = load_sglang_page_interleave  # type: ignore[attr-defined]
