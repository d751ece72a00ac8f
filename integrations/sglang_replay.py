"""Replay a synthetic serving trace through SGLang's own scheduler-side memory code.

Drives SGLang 0.5.23's real components -- ``Req``, ``ScheduleBatch`` (``check_decode_mem``),
``ReqToTokenPool``, ``RadixCache`` and the ``mem_cache`` helpers its scheduler calls:
``alloc_for_extend`` / ``alloc_for_decode`` (allocation), ``checkpoint_kv_cache`` (a chunk of an
unfinished prefill), ``release_kv_cache`` (finish, abort) and ``release_req`` (retraction) --
around any allocator that SGLang would accept. The loop is a small scheduler: FIFO admission
under a chunked-prefill token budget, one decode step for every running request, retraction of
the least-advanced request when ``check_decode_mem`` says the next step does not fit, aborts at
fixed steps. Everything the allocator hands out or takes back is recorded as :class:`Event` s.

Needs :func:`kvpool.oracle.peers.peer_import.load_sglang_runtime` (or a full SGLang install) first.
"""

from __future__ import annotations

import random
import time
import zlib
from array import array
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch
from sglang.srt.managers.schedule_batch import (
    FINISH_ABORT,
    FINISH_LENGTH,
    Req,
    ScheduleBatch,
    release_req,
)
from sglang.srt.mem_cache.allocation import alloc_for_decode, alloc_for_extend
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.common import checkpoint_kv_cache, release_kv_cache
from sglang.srt.mem_cache.memory_pool import ReqToTokenPool
from sglang.srt.mem_cache.radix_cache import RadixCache
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.srt.runtime_context import SpawnRanks, publish, reset_context
from sglang.srt.sampling.sampling_params import SamplingParams
from sglang.srt.server_args import ServerArgs
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

from .sglang_replay_kv import KVForward

# (what, details): ("extend"|"decode", slots), ("evict", (asked, evicted)), ("retract"|"abort"|
# "finish", rid)
Event = tuple[str, Any]
AllocatorFactory = Callable[[int, int], Any]  # (pool_tokens, page_size) -> allocator
CacheFactory = Callable[[Any, Any, int], Any]  # (req_to_token_pool, allocator, page_size) -> cache


@dataclass(frozen=True)
class TraceRequest:
    """One request: arrives at ``arrive_step``; aborted at ``abort_step`` if not done by then."""

    rid: str
    prompt: tuple[int, ...]
    max_new_tokens: int
    arrive_step: int
    abort_step: int | None = None


@dataclass(frozen=True)
class ServingTrace:
    """Requests plus the scheduler's limits."""

    requests: tuple[TraceRequest, ...]
    pool_tokens: int
    page_size: int
    chunk_tokens: int
    max_running: int


def synthetic_trace(seed: int, *, num_requests: int = 24, page_size: int = 4,
                    pool_tokens: int = 512, chunk_tokens: int = 64) -> ServingTrace:
    """Requests sharing a few system prompts (unaligned lengths), some long enough to need
    several prefill chunks, arriving over time; every fifth is aborted mid-flight. The pool
    is small enough that the radix cache must evict and decode must retract."""
    rng = random.Random(seed)
    systems = [tuple(rng.randrange(1, 30000) for _ in range(rng.randrange(9, 40)))
               for _ in range(3)]
    requests = []
    for i in range(num_requests):
        prompt = rng.choice(systems) + tuple(rng.randrange(1, 30000)
                                             for _ in range(rng.randrange(3, 110)))
        arrive = i // 2 + rng.randrange(0, 3)
        abort = arrive + rng.randrange(3, 10) if i % 5 == 4 else None
        requests.append(TraceRequest(f"r{i}", prompt, rng.randrange(4, 40), arrive, abort))
    return ServingTrace(tuple(requests), pool_tokens, page_size, chunk_tokens, max_running=8)


@dataclass
class ReplayResult:
    """What the allocator did, in order, and the state at the end."""

    events: list[Event] = field(default_factory=list)
    free_pages_end: list[int] = field(default_factory=list)  # reference order
    available_end: int = 0
    evictable_end: int = 0
    steps: int = 0
    kv_reads: int = 0  # (position, layer) pairs of live requests and cached tokens checked


def publish_cpu_runtime(page_size: int) -> None:
    """Publish SGLang's process-wide config for a CPU run (as SGLang's own tests do)."""
    args = ServerArgs(model_path="dummy", attention_backend="torch_native",
                      page_size=page_size, device="cpu")
    reset_context()
    publish(args, role="test", ranks=SpawnRanks(world_rank=0, dp_rank=None))


# The only model fact the memory path reads (there is no model here).
_DECODER_ONLY = SimpleNamespace(is_encoder_decoder=False)


def _token(rid: str, position: int) -> int:
    """The 'sampled' token: deterministic per request and position."""
    return 30000 + zlib.crc32(f"{rid}:{position}".encode()) % 4096


def radix_cache(pool: Any, allocator: Any, page_size: int) -> Any:
    """SGLang's ``RadixCache`` (the default tree cache of the replay)."""
    return RadixCache(CacheInitParams(disable=False, req_to_token_pool=pool,
                                      token_to_kv_pool_allocator=allocator, page_size=page_size))


def free_pages_of(allocator: Any) -> list[int]:
    """The free pages in reference order; a hybrid allocator's full side, ``-1``, then its SWA
    side (its composite has no list of its own)."""
    pages = allocator.get_all_free_pages()
    if pages is not None:
        return [int(p) for p in pages.tolist()]
    return [*free_pages_of(allocator.full_attn_allocator), -1,
            *free_pages_of(allocator.swa_attn_allocator)]


class _Scheduler:
    """The loop: state of one replay. ``check`` runs after every step (e.g. invariants)."""

    def __init__(self, trace: ServingTrace, allocator: Any, check: Callable[[], None],
                 make_cache: CacheFactory = radix_cache, check_kv: bool = False) -> None:
        self.trace, self.allocator, self.check = trace, allocator, check
        self.kv = KVForward(allocator) if check_kv else None  # K/V writes and their check
        self.pool = ReqToTokenPool(size=trace.max_running + 2, max_context_len=512,
                                   device="cpu", enable_memory_saver=False)
        self.cache = make_cache(self.pool, allocator, trace.page_size)
        self.result = ReplayResult()
        self._record_evictions()
        self.waiting: list[Req] = []
        self.running: list[Req] = []
        self.chunked: Req | None = None
        self.meta = {r.rid: r for r in trace.requests}

    def _record_evictions(self) -> None:
        """Record each eviction the allocator asks for: ``(asked, evicted)``; with an SWA tree
        cache (whose ``evict_for_alloc`` does not go through ``evict``) ``(asked, evicted,
        swa_asked, swa_evicted)``."""
        cache, events = self.cache, self.result.events
        name = "evict_for_alloc" if cache.supports_swa() else "evict"
        evict = getattr(cache, name)

        def recording_evict(params: Any, **kwargs: Any) -> Any:
            out = evict(params, **kwargs)
            record: tuple[int, ...] = (params.num_tokens, out.num_tokens_evicted)
            if name == "evict_for_alloc":
                record += (params.swa_num_tokens, out.swa_num_tokens_evicted)
            events.append(("evict", record))
            return out

        setattr(cache, name, recording_evict)

    def batch(self, reqs: list[Req]) -> Any:
        return ScheduleBatch(reqs=reqs, req_to_token_pool=self.pool,
                             token_to_kv_pool_allocator=self.allocator, tree_cache=self.cache,
                             device="cpu", spec_algorithm=SpeculativeAlgorithm.NONE,
                             model_config=_DECODER_ONLY)

    def arrive_and_abort(self, step: int) -> None:
        for t in self.trace.requests:
            if t.arrive_step == step:
                self.waiting.append(Req(t.rid, "", array("q", t.prompt),
                                        SamplingParams(max_new_tokens=t.max_new_tokens)))
        for req in [*self.running, *([self.chunked] if self.chunked else [])]:
            if self.meta[req.rid].abort_step == step:
                req.finished_reason = FINISH_ABORT()
                release_kv_cache(req, self.cache, checkpoint=False)
                self.result.events.append(("abort", req.rid))
                if req is self.chunked:
                    self.chunked = None
                else:
                    self.running.remove(req)
        self.waiting = [r for r in self.waiting if self.meta[r.rid].abort_step != step]

    def headroom(self, num_new_reqs: int) -> int:
        """Tokens an extend may take now: free + evictable (the scarcer side of a hybrid
        allocator), less one page per running request (its next decode) and two pages per
        request in the extend (unaligned ends)."""
        ps, alloc, cache = self.trace.page_size, self.allocator, self.cache
        spare = alloc.available_size() + cache.evictable_size()
        if cache.supports_swa():  # each side with what the tree can give back on that side
            spare = min(alloc.full_available_size() + cache.full_evictable_size(),
                        alloc.swa_available_size() + cache.swa_evictable_size())
        return int(spare) - ps * (len(self.running) + 2 * num_new_reqs)

    def prefill(self) -> None:
        budget, reqs = self.trace.chunk_tokens, []
        if self.chunked is not None:  # the next chunk of a request already holding its row
            req = self.chunked
            left = len(req.full_untruncated_fill_ids) - req.prefix_len
            take = min(budget, left, self.headroom(1))
            if take <= 0:
                return  # wait for decodes to finish or be retracted
            self.chunked = None
            req.extend_end = req.prefix_len + take
            budget -= take
            reqs.append(req)
            if req.extend_end < len(req.full_untruncated_fill_ids):
                self.chunked = req
        while (self.waiting and budget > 0 and self.chunked is None
               and len(self.running) + len(reqs) < self.trace.max_running):
            req = self.waiting[0]
            req.init_next_round_input(self.cache)
            want = len(req.full_untruncated_fill_ids) - req.prefix_len
            req.lock = self.cache.lock(req.last_node)  # as the scheduler's admission does
            used = self.trace.chunk_tokens - budget  # by the requests admitted before
            if self.headroom(len(reqs) + 1) - used < min(want, budget):
                self.cache.unlock(req.lock)  # not admitted after all
                req.lock = None
                break
            self.waiting.pop(0)
            req.extend_end = req.prefix_len + min(want, budget)
            budget -= req.extend_len
            reqs.append(req)
            if req.extend_end < len(req.full_untruncated_fill_ids):
                self.chunked = req  # stop admitting: the next chunk goes first
        if not reqs:
            return
        batch = self.batch(reqs)
        batch.prefix_lens = [r.prefix_len for r in reqs]
        batch.extend_lens = [r.extend_len for r in reqs]
        batch.seq_lens = torch.tensor([r.extend_end for r in reqs], dtype=torch.int64)
        batch.seq_lens_cpu = batch.seq_lens.clone()
        batch.extend_num_tokens = sum(batch.extend_lens)
        batch.forward_mode = ForwardMode.EXTEND
        out, _, _ = alloc_for_extend(batch)
        self.result.events.append(("extend", out.tolist()))
        if self.kv is not None:
            self.kv.extend(reqs, out)
        for req in reqs:
            if req is self.chunked:
                checkpoint_kv_cache(req, self.cache)
            else:
                req.output_ids.append(_token(req.rid, len(req.output_ids)))
                self.running.append(req)

    def decode(self) -> None:
        if not self.running:
            return
        batch = self.batch(list(self.running))
        if not batch.check_decode_mem():
            order = batch._get_decode_retraction_order(batch.reqs)
            while len(order) > 1 and not batch.check_decode_mem(selected_indices=order):
                req = batch.reqs[order.pop()]
                release_req(req=req, remaing_req_count=len(order), req_to_token_pool=self.pool,
                            token_to_kv_pool_allocator=self.allocator, tree_cache=self.cache,
                            hisparse_coordinator=None)
                self.running.remove(req)
                self.waiting.insert(0, req)
                self.result.events.append(("retract", req.rid))
            batch = self.batch(list(self.running))
        batch.req_pool_indices = torch.tensor([r.kv.req_pool_idx for r in batch.reqs])
        batch.req_pool_indices_cpu = batch.req_pool_indices.clone()
        batch.seq_lens = torch.tensor([r.kv.kv_committed_len for r in batch.reqs])
        batch.seq_lens_cpu = batch.seq_lens.clone()
        batch.forward_mode = ForwardMode.DECODE  # an SWA cache slides windows in decode only
        out = alloc_for_decode(batch, 1)
        if self.kv is not None:
            self.kv.decode(batch.reqs, out)
        for req in batch.reqs:
            req.decode_batch_idx += 1  # as ScheduleBatch.prepare_for_decode does
        self.result.events.append(("decode", out.tolist()))
        for req in list(self.running):
            req.output_ids.append(_token(req.rid, len(req.output_ids)))
            if len(req.output_ids) >= req.sampling_params.max_new_tokens:
                req.finished_reason = FINISH_LENGTH(len(req.output_ids))
                req.finished_len = len(req.output_ids)
                release_kv_cache(req, self.cache, checkpoint=True)
                self.running.remove(req)
                self.result.events.append(("finish", req.rid))

    def steps(self, max_steps: int) -> Generator[float, None, ReplayResult]:
        """Run the trace, yielding the seconds of each scheduler step; returns the result."""
        step = 0
        last_arrival = max(t.arrive_step for t in self.trace.requests)
        while step <= last_arrival or self.waiting or self.running or self.chunked:
            if step >= max_steps:
                raise RuntimeError(f"trace did not drain in {max_steps} steps")
            start = time.perf_counter()
            self.arrive_and_abort(step)
            self.prefill()
            self.decode()
            elapsed = time.perf_counter() - start
            self.check()
            if self.kv is not None:  # every live request: running, or between prefill chunks
                live = [*self.running, *([self.chunked] if self.chunked else [])]
                self.result.kv_reads += self.kv.check(live, self.pool.req_to_token)
                self.result.kv_reads += self.kv.check_tree(self.cache)
            step += 1
            yield elapsed
        result = self.result
        result.steps = step
        result.free_pages_end = free_pages_of(self.allocator)
        result.available_end = self.allocator.available_size()
        result.evictable_end = self.cache.evictable_size()
        return result


def replay_steps(trace: ServingTrace, make_allocator: AllocatorFactory, *,
                 check: Callable[[Any], None] | None = None, max_steps: int = 2000,
                 make_cache: CacheFactory = radix_cache,
                 check_kv: bool = False) -> Generator[float, None, ReplayResult]:
    """:func:`replay` one scheduler step at a time: yields each step's seconds (``check``
    excluded), returns the :class:`ReplayResult`."""
    publish_cpu_runtime(trace.page_size)
    allocator = make_allocator(trace.pool_tokens, trace.page_size)
    scheduler = _Scheduler(trace, allocator, lambda: check(allocator) if check else None,
                           make_cache, check_kv)
    return (yield from scheduler.steps(max_steps))


def replay(trace: ServingTrace, make_allocator: AllocatorFactory, *,
           check: Callable[[Any], None] | None = None, max_steps: int = 2000,
           make_cache: CacheFactory = radix_cache, check_kv: bool = False) -> ReplayResult:
    """Run ``trace`` through SGLang's components with ``make_allocator(pool_tokens, page_size)``
    and the tree cache ``make_cache(req_to_token_pool, allocator, page_size)`` (SGLang's
    ``RadixCache`` by default; :mod:`kvpool.integrations.sglang_replay_hybrid` has the hybrid
    SWA configuration).

    ``check(allocator)`` runs after every step. ``check_kv``: the allocator's KV cache (a real
    SGLang pool, :mod:`kvpool.integrations.sglang_replay_kv`) gets every new token's K/V at its
    ``out_cache_loc``, and every live request's K/V is checked after every step (``kv_reads``
    counts the reads; :class:`~kvpool.integrations.sglang_replay_kv.KVMismatch` on a wrong one).
    Publishes SGLang's runtime config for the trace's page size. Raises RuntimeError when
    SGLang's helpers run out of memory or the trace does not drain in ``max_steps``.
    """
    steps = replay_steps(trace, make_allocator, check=check, max_steps=max_steps,
                         make_cache=make_cache, check_kv=check_kv)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: ReplayResult = done.value
            return result


def digest(result: ReplayResult) -> int:
    """A 32-bit digest of everything the replay recorded (equal digests: equal replays)."""
    return zlib.crc32(repr((result.events, result.free_pages_end, result.available_end,
                            result.evictable_end)).encode())


def first_difference(a: ReplayResult, b: ReplayResult) -> str | None:
    """Where two replays first differ (event index and both sides), or None if identical."""
    for i, (x, y) in enumerate(zip(a.events, b.events)):
        if x != y:
            return f"event {i}: {x!r} != {y!r}"
    if len(a.events) != len(b.events):
        return f"{len(a.events)} events != {len(b.events)} events"
    for name in ("free_pages_end", "available_end", "evictable_end", "steps"):
        if getattr(a, name) != getattr(b, name):
            return f"{name}: {getattr(a, name)!r} != {getattr(b, name)!r}"
    return None
