"""``PureSWATokenToKVPoolAllocator``: the hybrid allocator's variant for models whose every
layer is sliding-window attention (``SWA-21..25``, :class:`kvpool.spec.hybrid_pure.PureSWAModel`).

Drop-in for SGLang 0.5.23's class of that name: one token pool serves as both sides
(``full_attn_allocator is swa_attn_allocator``), the mapping is the identity, and the three
capacity views are that pool's ``available_size()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from kvpool.spec import hybrid_rules as hr
from kvpool.spec import rules
from kvpool.spec.census import describe_pages
from kvpool.spec.errors import ContractViolation
from kvpool.spec.hybrid_pure import check_pure_page_size, check_pure_resize
from kvpool.spec.rules import OWNED
from kvpool.spec.window import RELEASED

from .checked import host_list
from .swa import SWATokenToKVPoolAllocator
from .token import TokenToKVPoolAllocator

Segment = tuple[torch.Tensor, int]


def identity_mapping(size: int, device: Any) -> torch.Tensor:
    """SGLang's pure mapping: ``arange(size + 1)`` then ``-1`` (``SWA-22``)."""
    return torch.cat([torch.arange(size + 1, dtype=torch.int64, device=device),
                      torch.tensor([-1], dtype=torch.int64, device=device)])


class PureSWATokenToKVPoolAllocator(SWATokenToKVPoolAllocator):
    """One kvpool token allocator as both sides of the hybrid surface (``SWA-21``).

    Why: a model whose every layer slides its window has no full-attention KV to keep, so a
    token's slot dies with its SWA KV. ``free_swa`` / ``free`` / the SWA segment frees release
    slots to the one pool (in the given order; inside a group at its end, as one free);
    ``free_full`` and the full segment frees change nothing (``SWA-24``). Translation is the
    identity and returns its input (``SWA-22``). ``alloc_extend`` / ``alloc_decode`` /
    ``alloc_extend_swa_tail`` raise NotImplementedError; a page size above 1 raises
    ContractViolation (``SWA-21``) at construction, in every mode.

    ``checked=True``: a release of a slot that is not held (free, staged or deferred by the
    open group) or named twice raises ``SWA-11``; a translation of a free slot ``SWA-16``; a
    resize to unequal sizes ``SWA-25``; all before anything changes.
    """

    def __init__(self, size_swa: int, page_size: int, dtype: torch.dtype, device: Any,
                 kvcache: Any, need_sort: bool, *, checked: bool = False) -> None:
        check_pure_page_size(page_size)
        self.page_size, self.dtype, self.device = 1, dtype, device
        self.need_sort, self.checked = need_sort, checked
        self._kvcache, self._req_to_token_pool = kvcache, None
        pool = self.token_allocator_class(size_swa, dtype, device,
                                          getattr(kvcache, "swa_kv_pool", None), need_sort,
                                          checked=checked)
        self.swa_attn_allocator: TokenToKVPoolAllocator = pool
        self.full_attn_allocator = pool
        self._identity = identity_mapping(size_swa, device)
        self.clear()

    # -- lifecycle (SWA-25) ------------------------------------------------------------------
    @property
    def full_to_swa_index_mapping(self) -> torch.Tensor:
        """The identity mapping (``SWA-22``; registered with the KV pool)."""
        return self._identity

    @full_to_swa_index_mapping.setter
    def full_to_swa_index_mapping(self, mapping: torch.Tensor) -> None:
        raise ContractViolation("SWA-22", "a pure sliding-window pool's mapping is the identity")

    def clear(self) -> None:
        """The pool cleared, no open group. O(size)."""
        self.swa_attn_allocator.clear()
        self.free_group: list[torch.Tensor] | None = None
        self.swa_free_group, self.swa_page_ids_group = [], []
        if self._kvcache is not None and hasattr(self._kvcache, "register_mapping"):
            self._kvcache.register_mapping(self._identity)

    def resize(self, config: Any) -> None:
        """The pool's size from ``config`` (``full_max_total_num_tokens`` and
        ``swa_max_total_num_tokens``, equal: ``SWA-25``, checked mode; unchecked the SWA size
        is taken), a new identity mapping, then ``clear()``."""
        size, size_swa = int(config.full_max_total_num_tokens), int(config.swa_max_total_num_tokens)
        if self.checked:
            check_pure_resize(size, size_swa)
        self.swa_attn_allocator.size = size_swa
        self._identity = identity_mapping(size_swa, self.device)
        self.clear()

    # -- queries (SWA-22) --------------------------------------------------------------------
    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
        """``kv_indices`` itself (``SWA-22``). O(1); checked mode: ``SWA-16``, O(k)."""
        if self.checked:
            table = self.swa_attn_allocator._table
            assert table is not None
            hr.check_translate(host_list(kv_indices), table.status_of, 1,
                               self.swa_attn_allocator.num_pages)
        return kv_indices

    def set_full_to_swa_mapping(self, full_indices: torch.Tensor,
                                swa_indices: torch.Tensor) -> None:
        raise NotImplementedError("SWA-22: a pure sliding-window pool has no mapping to rewrite")

    def clear_full_to_swa_mapping(self, full_indices: torch.Tensor) -> None:
        raise NotImplementedError("SWA-22: a pure sliding-window pool has no mapping to clear")

    # -- allocation (SWA-21, SWA-23) ---------------------------------------------------------
    def alloc(self, need_size: int) -> torch.Tensor | None:
        """``need_size`` slots of the pool; None iff it has fewer free + staged (``SWA-23``)."""
        if self.checked:
            rules.check_alloc(need_size, 1)
        return self.swa_attn_allocator.alloc(need_size)

    def alloc_extend(self, *args: Any, **kwargs: Any) -> torch.Tensor | None:
        raise NotImplementedError("SWA-21: a pure sliding-window pool allocates by alloc()")

    def alloc_decode(self, *args: Any, **kwargs: Any) -> torch.Tensor | None:
        raise NotImplementedError("SWA-21: a pure sliding-window pool allocates by alloc()")

    def alloc_extend_swa_tail(self, *args: Any, **kwargs: Any) -> torch.Tensor | None:
        raise NotImplementedError("SWA-21: a pure sliding-window pool allocates by alloc()")

    # -- release (SWA-24) --------------------------------------------------------------------
    def _release_slots(self, free_index: torch.Tensor, call: str) -> None:
        """The pool's ``free`` of ``free_index`` (deferred inside a group), after the checked
        mode's ``SWA-11``: every slot held, none named twice."""
        if free_index.numel() == 0:
            return
        if self.checked:
            pool = self.swa_attn_allocator
            table = pool._table
            assert table is not None
            slots = host_list(free_index)
            hr.check_slots(slots, 1, pool.num_pages)
            peers = [s if table.status_of(s) == OWNED else RELEASED for s in slots]
            hr.check_peers_live(slots, peers, call, 1)
        self.swa_attn_allocator.free(free_index)
        if self.free_group is not None:  # SGLang's view of the group (diagnostics)
            self.free_group.append(free_index.reshape(-1).to(torch.int64, copy=True))

    def free_swa(self, free_index: torch.Tensor) -> None:
        """Release the slots: their SWA side is their only side (``SWA-24``)."""
        self._release_slots(free_index, "free_swa")

    def free(self, free_index: torch.Tensor) -> None:
        """Release the slots, as ``free_swa`` (``SWA-24``)."""
        self._release_slots(free_index, "free")

    def free_full(self, free_index: torch.Tensor) -> None:
        """Nothing to release (``SWA-24``); checked mode checks the slot ids (``FREE-1/2``)."""
        if self.checked and free_index.numel():
            hr.check_slots(host_list(free_index), 1, self.swa_attn_allocator.num_pages)

    def free_swa_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        """``free_swa`` of the segment (``SWA-24``)."""
        self.free_segments([(free_index, start_pos)])

    def free_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        """``free`` of the segment (``SWA-24``)."""
        self.free_segments([(free_index, start_pos)])

    def free_segments(self, segments: Sequence[Segment]) -> None:
        """The segments' slots in row order, as one ``free`` (``SWA-24``)."""
        parts = [idx.reshape(-1).to(torch.int64) for idx, _ in segments if idx.numel()]
        if self.checked:
            for _, start_pos in segments:
                rules.check_count(start_pos, "start_pos", "SEG-1")
        if parts:
            self._release_slots(torch.cat(parts), "free_segments")

    def free_full_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        """Nothing to release (``SWA-24``)."""
        self.free_full_segments([(free_index, start_pos)])

    def free_full_segments(self, segments: Sequence[Segment]) -> None:
        """Nothing to release (``SWA-24``); checked mode checks ids and starts."""
        for free_index, start_pos in segments:
            if self.checked:
                rules.check_count(start_pos, "start_pos", "SEG-1")
            self.free_full(free_index)

    def free_group_begin(self) -> None:
        """Open the pool's group (``GROUP-1``)."""
        self.swa_attn_allocator.free_group_begin()
        self.free_group = []

    def free_group_end(self) -> None:
        """Release the group's slots in enqueue order, as one free (``SWA-24``, ``GROUP-4``)."""
        if self.free_group is None:
            return
        self.swa_attn_allocator.free_group_end()
        self.free_group = None

    # -- diagnostics (SWA-25) ----------------------------------------------------------------
    def swa_deferred_pages(self) -> list[int]:
        """Slots the open group releases at its end."""
        return [s for chunk in self.free_group or [] for s in host_list(chunk)]

    def verify_byte_accounting(self) -> list[str]:
        """The pool's census (prefixed ``pool:``) and the identity mapping; empty when healthy.
        O(pool)."""
        problems = [f"pool: {p}" for p in self.swa_attn_allocator.verify_byte_accounting()]
        size = self.swa_attn_allocator.size
        if not torch.equal(self._identity.cpu(), identity_mapping(size, "cpu")):
            problems.append(f"SWA-22: the mapping is not the identity on slots 0..{size}")
        if self.full_attn_allocator is not self.swa_attn_allocator:
            problems.append("SWA-21: the full and SWA sides are two objects")
        return problems

    def check_invariants(self) -> None:
        """Assert the pool's invariants and the census; dumps the state on failure."""
        self.swa_attn_allocator.check_invariants()
        problems = self.verify_byte_accounting()
        assert not problems, "\n".join(problems) + "\n" + self.describe()

    def describe(self) -> str:
        """The pool and the open group's slots."""
        return (f"pool: {self.swa_attn_allocator.debug_print()}\n"
                f"  deferred: {describe_pages(self.swa_deferred_pages())}")
