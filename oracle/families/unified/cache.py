"""The unified composite's capacity hook with a prefix cache that holds evictable tokens.

``evict_to_free_tokens(tree_cache, num_tokens)`` of SGLang 0.5.23's
``UnifiedSWATokenToKVPoolAllocator`` reads the cache's ``full_evictable_size()`` and
``swa_evictable_size()``, makes an eviction plan (``UNI-8``: the spec's
:meth:`~kvpool.spec.unified.UnifiedSWAModel.reclaim_plan`), asks the cache to evict it
(``evict_for_alloc(EvictParams(num_tokens=full, swa_num_tokens=swa))``) when it is not
``(0, 0)``, then gates the allocation (compacting under lazy compaction when that makes it fit).

:class:`SWACache` stands in for SGLang's SWA radix cache: finished requests it still holds, each
``(slots, front)`` (the row's virtual token ids; its positions below ``front`` have no SWA page
left), oldest first. It counts every held token as full-evictable and those at or past ``front``
as SWA-evictable. Asked to evict, it frees whole rows through the allocator's ``free``, oldest
first, until the full request is met, then releases the SWA pages of the next rows
(``free_swa`` of ``slots[front:]``) until the SWA request is met too (rows freed whole count for
both). The same cache runs against the spec model (lists) and the target (tensors), so both see
the same frees; the call's result is ``(hook result, eviction requests)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from kvpool.spec.unified import UnifiedSWAModel

from ...engine.call import Call
from ...engine.callforms import Args
from ..single.treecache import EvictParams, EvictResult

__all__ = ["SWACache", "TriCache", "cache_of", "decode_gate_call", "evict_call", "evict_spec",
           "gate"]

Cached = Sequence[tuple[Sequence[int], int]]


class SWACache:
    """Finished rows held for reuse, ``(slots, front)`` each, evicted oldest first through
    ``allocator`` (the model, or a target when ``tensors``); ``requests`` records every
    ``evict_for_alloc`` request as ``(full tokens, swa tokens)``, ``released`` every release
    it made as ``(method, ids)``. It holds no state slot (``mamba_evictable_size()`` is 0) and
    evicts what it is asked whatever ``allocation_reclaim_satisfied`` says (:class:`TriCache`
    stops when it holds)."""

    stops_when_satisfied = False

    def __init__(self, allocator: Any, rows: Cached, *, tensors: bool = True) -> None:
        self.allocator = allocator
        self.rows = [(sorted(slots), int(front)) for slots, front in rows]
        self.tensors = tensors
        self.requests: list[tuple[int, int]] = []
        self.released: list[tuple[str, list[int]]] = []

    def supports_prefix_sharing(self) -> bool:
        return True

    def full_evictable_size(self) -> int:
        return sum(len(slots) for slots, _ in self.rows)

    def swa_evictable_size(self) -> int:
        return sum(max(0, len(slots) - front) for slots, front in self.rows)

    def mamba_evictable_size(self) -> int:
        return 0

    def _release(self, name: str, ids: list[int]) -> None:
        self.released.append((name, ids))
        arg: Any = torch.tensor(ids, dtype=torch.int64) if self.tensors else ids
        getattr(self.allocator, name)(arg)

    def evict_for_alloc(self, params: Any, *,
                        allocation_reclaim_satisfied: Callable[[], bool] | None = None,
                        **_: Any) -> EvictResult:
        """Free rows until ``params.num_tokens`` full tokens came back, then release SWA pages
        until ``params.swa_num_tokens`` SWA tokens did (module docstring); a
        :class:`TriCache` stops before a release once ``allocation_reclaim_satisfied()``
        holds. Returns the tokens evicted on each side."""
        full, swa = int(params.num_tokens), int(params.swa_num_tokens)
        self.requests.append((full, swa))
        stop = allocation_reclaim_satisfied if self.stops_when_satisfied else None
        freed_full = freed_swa = 0
        while self.rows and freed_full < full and not (stop and stop()):
            slots, front = self.rows.pop(0)
            self._release("free", slots)
            freed_full += len(slots)
            freed_swa += max(0, len(slots) - front)  # front: past the end with no SWA page
        for i, (slots, front) in enumerate(self.rows):
            if freed_swa >= swa or (stop and stop()):
                break
            if front < len(slots):
                self._release("free_swa", slots[front:])
                freed_swa += len(slots) - front
                self.rows[i] = (slots, len(slots))
        return EvictResult(num_tokens_evicted=freed_full, swa_num_tokens_evicted=freed_swa)


class TriCache(SWACache):
    """A :class:`SWACache` for a tri-pool: as SGLang 0.5.23's caches do when an allocator
    passes ``allocation_reclaim_satisfied``, it stops evicting once that predicate holds (the
    tri-pool's hook asks it to, ``UNI-14``)."""

    stops_when_satisfied = True


def cache_of(allocator: Any, a: Args) -> SWACache:
    """The cache a call's args describe, over ``allocator``'s tensors: the rows ``cached``, a
    :class:`TriCache` when ``a["cache"]`` is ``"tri"``."""
    kind = TriCache if a.get("cache") == "tri" else SWACache
    return kind(allocator, a.get("cached", ()))


def gate(model: UnifiedSWAModel, num_tokens: int) -> bool:
    """The allocation gate the hook ends with (``UNI-8``): True when
    ``ceil(num_tokens / page_size)`` pages fit now; under lazy compaction, when they fit after
    both sides are compacted and no move gate is closed, both are compacted and True; else
    False."""
    pages = -(-num_tokens // model.page_size)
    if pages == 0 or model.fits(pages, compacted=False):
        return True
    if model.lazy and not model.moves_blocked and model.fits(pages, compacted=True):
        model.full.flush()
        model.swa.flush()
        return True
    return False


def evict_spec(model: UnifiedSWAModel, num_tokens: int,
               cached: Cached = ()) -> tuple[bool | None, list[tuple[int, int]]]:
    """``evict_to_free_tokens`` on the model with a :class:`SWACache` of ``cached`` rows
    (``UNI-8``): the plan (:meth:`~kvpool.spec.unified.UnifiedSWAModel.reclaim_plan`); None and
    nothing asked when even every evictable page would not make the pages fit; else the
    cache evicts the plan (unless it is ``(0, 0)``) and the gate decides. Returns the hook's
    result and the eviction requests made."""
    cache = SWACache(model, cached, tensors=False)
    plan = model.reclaim_plan(num_tokens, cache.full_evictable_size(),
                              cache.swa_evictable_size())
    if plan is None:
        return None, []
    if plan != (0, 0):
        cache.evict_for_alloc(EvictParams(num_tokens=plan[0], swa_num_tokens=plan[1]))
    return gate(model, num_tokens), cache.requests


def _target(x: Any, a: Args, dev: str) -> tuple[Any, list[Any]]:
    cache = cache_of(x, a)
    return (x.evict_to_free_tokens(cache, a["num_tokens"]), cache.requests), []


def _cache_lines(a: Args) -> list[str]:
    """The repro's lines that build the call's cache (:func:`cache_of`) as ``cache``."""
    rows = [(list(slots), front) for slots, front in a.get("cached", ())]
    kind = "TriCache" if a.get("cache") == "tri" else "SWACache"
    return [f"from kvpool.oracle.families.unified.cache import {kind}",
            f"cache = {kind}(a, {rows!r})"]


def _source(a: Args, var: str) -> list[str]:
    return [*_cache_lines(a),
            f"{var} = (a.evict_to_free_tokens(cache, {a['num_tokens']}), cache.requests)"]


def evict_call() -> Call:
    """``evict_to_free_tokens`` in the unified call table: args ``num_tokens`` and ``cached``
    (the rows the cache holds, ``(slots, front)``); result ``(hook result, requests)``."""
    return Call(
        "evict_to_free_tokens", "cache", ("num_tokens", "cached"),
        spec=lambda m, a: evict_spec(m, a["num_tokens"], a.get("cached", ())), target=_target,
        source=_source, raise_clause="UNI-8", order_clause="UNI-8", result_clause="UNI-8",
        checks=lambda a, e, var: [f"assert {var} == {e!r}"])


def _gate_spec(model: UnifiedSWAModel, num_tokens: int,
               cached: Cached) -> tuple[bool, list[tuple[int, int]]]:
    """``check_decode_capacity`` on the model: the eviction hook (:func:`evict_spec`), then
    the model's answer (``UNI-15``); with the eviction requests made."""
    _, requests = evict_spec(model, num_tokens, cached)
    return model.check_decode_capacity(num_tokens), requests


def _gate_target(x: Any, a: Args, dev: str) -> tuple[Any, list[Any]]:
    cache = cache_of(x, a)
    return (bool(x.check_decode_capacity(num_tokens=a["num_tokens"], tree_cache=cache)),
            cache.requests), []


def _gate_source(a: Args, var: str) -> list[str]:
    return [*_cache_lines(a),
            f"{var} = (a.check_decode_capacity(num_tokens={a['num_tokens']}, "
            "tree_cache=cache), cache.requests)"]


def decode_gate_call() -> Call:
    """``check_decode_capacity`` in the unified call table (the scheduler's decode gate): args
    as :func:`evict_call`'s; result ``(answer, eviction requests)`` (``UNI-15``)."""
    return Call(
        "check_decode_capacity", "cache", ("num_tokens", "cached"),
        spec=lambda m, a: _gate_spec(m, a["num_tokens"], a.get("cached", ())),
        target=_gate_target, source=_gate_source, raise_clause="UNI-15",
        order_clause="UNI-15", result_clause="UNI-15",
        checks=lambda a, e, var: [f"assert {var} == {e!r}  # [UNI-15]"])
