"""A tiny prefix cache for the capacity hooks (``CAP-1``, ``CAP-2``).

Holds finished requests' slot lists, oldest first; ``evict(n)`` frees whole entries through the
allocator until at least ``n`` tokens came back or nothing is left. It speaks both the spec's
protocol (``evict(num_tokens)``) and SGLang 0.5.23's (``supports_prefix_sharing()``,
``evict_for_alloc(EvictParams)`` / ``evict(EvictParams)``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class EvictResult:
    """What one ``evict`` call released (SGLang's ``EvictResult`` fields)."""

    num_tokens_evicted: int = 0
    swa_num_tokens_evicted: int = 0
    mamba_num_evicted: int = 0


class TinyTreeCache:
    """Evictable entries (lists of slots), evicted oldest first through ``free_fn``."""

    def __init__(
        self, free_fn: Callable[[list[int]], None], entries: Sequence[Sequence[int]]
    ) -> None:
        self.free_fn = free_fn
        self.entries = [list(e) for e in entries]
        self.num_evicted = 0  # entries released so far

    @classmethod
    def for_torch(
        cls, allocator: Any, entries: Sequence[Sequence[int]], device: str = "cpu"
    ) -> TinyTreeCache:
        """A cache whose entries are freed with ``allocator.free(torch.tensor(slots))``."""
        import torch

        def free(slots: list[int]) -> None:
            allocator.free(torch.tensor(slots, dtype=torch.int64, device=device))

        return cls(free, entries)

    def supports_prefix_sharing(self) -> bool:
        return True

    def evict(self, params: Any) -> EvictResult:
        """Free entries until ``params`` tokens (an int or ``.num_tokens``) came back."""
        want = params if isinstance(params, int) else int(params.num_tokens)
        freed = 0
        while freed < want and self.entries:
            entry = self.entries.pop(0)
            self.free_fn(entry)
            freed += len(entry)
            self.num_evicted += 1
        return EvictResult(num_tokens_evicted=freed)

    evict_for_alloc = evict

    def check_invariants(self) -> None:
        assert all(isinstance(e, list) for e in self.entries)
