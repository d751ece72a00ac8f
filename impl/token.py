"""``TokenToKVPoolAllocator``: page size 1, a FIFO free list of slots (SGLang's token order)."""

from __future__ import annotations

from typing import Any

import torch

from .base import AllocatorBase
from .freelist import PageRing


class TokenToKVPoolAllocator(AllocatorBase):
    """Token-granular KV slot allocator, drop-in for SGLang 0.5.23's class of the same name.

    Representation: slots ``1..size`` (slot 0 is padding) in a preallocated int64 ring buffer
    on ``device`` with host-side ``head`` / ``count`` (:class:`~kvpool.impl.freelist.PageRing`),
    plus a staging buffer for ``need_sort`` frees. Order (``FREE-5``): ``alloc`` takes from the
    head, ``free`` appends at the tail (FIFO); with ``need_sort`` frees are staged and sorted into
    the free list only when an ``alloc`` runs short.

    Complexity (k = slots moved, F = free, S = staged, N = size):

    | operation | cost | host-device sync |
    |---|---|---|
    | alloc(k) | O(k) (+ merge when short) | none |
    | free(k) / free_segment(s) | O(k) | none |
    | free_group_end | O(k) over the group's slots | none |
    | merge_and_sort_free | O(S + F below max staged) CPU; O((F + S) log(F + S)) CUDA | none |
    | available_size | O(1) | none |
    | get_all_free_pages | O(F + S) | none |
    | clear / resize | O(N) | none |
    | verify_byte_accounting | O(N) | yes (reads the lists) |

    Backend (:mod:`kvpool.impl.backend`, chosen at construction): torch ops on CUDA; on CPU
    compiled loops over the same memory (:mod:`kvpool.impl.native_ops`) or numpy where the
    extension is not built; same results, same costs in O terms.

    ``alloc_extend`` / ``alloc_decode`` raise NotImplementedError (``EXTEND-9``). With
    ``checked=True`` every caller error raises ContractViolation before any change (``ERR-1``);
    checked calls read their arguments on the host (a sync) and cost O(k) more.
    """

    paged = False

    def __init__(self, size: int, dtype: torch.dtype, device: Any, kvcache: Any,
                 need_sort: bool, *, checked: bool = False, guard: bool = True) -> None:
        super().__init__(size, 1, dtype, device, kvcache, need_sort, checked=checked,
                         guard=guard)

    def _new_free_list(self, capacity: int) -> PageRing:
        return PageRing(capacity, self.device, self._ops)

    def _pages_of_free(self, free_index: torch.Tensor) -> torch.Tensor:
        return free_index if free_index.dim() == 1 else free_index.reshape(-1)

    def _pages_of_group(self, parts: list[Any]) -> Any:
        return self._ops.undefer(parts)

    def free_page_ids(self, page_ids: torch.Tensor) -> None:
        """Page size 1: page ids are slot ids, so this is ``free``."""
        self.free(page_ids)
