"""A tiny prefix cache for the capacity hooks (``CAP-1``, ``CAP-2``), in every SGLang protocol.

Holds finished requests' slot lists, oldest first, and frees whole entries through the
allocator, oldest first, until at least the asked number of tokens came back or nothing is left.
An allocator may talk to it the way any SGLang release's does:

- ``evict(num_tokens)`` with an int (older releases, and the spec's ``TreeCache``);
- ``evict(EvictParams(num_tokens=...))`` and ``evict_for_alloc(EvictParams(...))`` (0.5.23; any
  object with a ``num_tokens`` attribute will do, SGLang's own ``EvictParams`` included), with
  0.5.23's optional ``allocation_reclaim_satisfied`` predicate (evict until it holds);
- ``supports_prefix_sharing()`` (0.5.23 asks it before evicting) and ``evictable_size()``.

Every call returns an :class:`EvictResult` and is counted in ``protocol_calls``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class EvictParams:
    """What ``evict`` is asked for (SGLang 0.5.23's ``EvictParams`` fields)."""

    num_tokens: int = 0
    swa_num_tokens: int = 0
    mamba_num: int = 0


@dataclass
class EvictResult:
    """What one ``evict`` call released (SGLang's ``EvictResult`` fields)."""

    num_tokens_evicted: int = 0
    swa_num_tokens_evicted: int = 0
    mamba_num_evicted: int = 0


def requested_tokens(params: Any) -> int:
    """The token count of an ``evict`` argument: an int or anything with ``num_tokens``."""
    if isinstance(params, int):
        return params
    num = getattr(params, "num_tokens", None)
    if num is None:
        raise TypeError(f"evict takes an int or EvictParams, got {params!r}")
    return int(num)


class TinyTreeCache:
    """Evictable entries (lists of slots), evicted oldest first through ``free_fn``."""

    def __init__(
        self, free_fn: Callable[[list[int]], None], entries: Sequence[Sequence[int]]
    ) -> None:
        self.free_fn = free_fn
        self.entries = [list(e) for e in entries]
        self.num_evicted = 0  # entries released so far
        self.protocol_calls: Counter[str] = Counter()

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
        self.protocol_calls["supports_prefix_sharing"] += 1
        return True

    def evictable_size(self) -> int:
        """Tokens held by the entries not evicted yet."""
        return sum(len(e) for e in self.entries)

    def evict_entries(self, num_entries: int) -> int:
        """Free the ``num_entries`` oldest entries (fewer if fewer are left); returns tokens."""
        freed = 0
        for _ in range(min(num_entries, len(self.entries))):
            entry = self.entries.pop(0)
            self.free_fn(entry)
            freed += len(entry)
            self.num_evicted += 1
        return freed

    def _evict(self, want: int) -> EvictResult:
        freed = 0
        while self.entries and freed < want:
            freed += self.evict_entries(1)
        return EvictResult(num_tokens_evicted=freed)

    def evict(self, params: Any) -> EvictResult:
        """Free entries until ``params`` tokens (an int or ``.num_tokens``) came back."""
        self.protocol_calls["evict(int)" if isinstance(params, int) else "evict(params)"] += 1
        return self._evict(requested_tokens(params))

    def evict_for_alloc(
        self, params: Any, *, allocation_reclaim_satisfied: Callable[[], bool] | None = None
    ) -> EvictResult:
        """SGLang 0.5.23's allocation path: ``evict(params)``, or, given the predicate, evict
        until it holds (``params`` then is a quota: at most that many tokens' worth)."""
        self.protocol_calls["evict_for_alloc"] += 1
        want = requested_tokens(params)
        if allocation_reclaim_satisfied is None:
            return self._evict(want)
        freed = 0
        while self.entries and freed < want and not allocation_reclaim_satisfied():
            freed += self.evict_entries(1)
        return EvictResult(num_tokens_evicted=freed)

    def check_invariants(self) -> None:
        """Raises AssertionError unless every entry is a list of slots and the count of
        evicted entries is not negative."""
        assert all(isinstance(e, list) for e in self.entries), "an entry is not a list of slots"
        assert self.num_evicted >= 0, f"num_evicted is {self.num_evicted}"
