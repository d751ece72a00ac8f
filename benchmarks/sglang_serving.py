"""W6: one serving trace through SGLang 0.5.23's own scheduler-side code, per scheduler step.

The trace of :mod:`kvpool.integrations.sglang_replay` (shared prefixes, chunked prefill,
eviction under pressure, retraction, aborts), scaled up, drives SGLang's ``Req``,
``ScheduleBatch``, ``RadixCache``, ``ReqToTokenPool`` and ``mem_cache`` helpers once around
SGLang's allocator and once around kvpool's (:mod:`kvpool.integrations.sglang`, unchecked); the
two replays advance one scheduler step each in turn, and the row is the median time per step of
the whole step (SGLang's Python included), so the ratio is what the allocator buys a scheduler;
each case replays the trace ``REPEATS`` times (one in quick mode) for enough steps per window.
The digest (events and final census) shows both handed out the same slots. The hybrid row
(``serving_hybrid``, ps 16) replays the same trace in the hybrid SWA configuration
(:mod:`kvpool.integrations.sglang_replay_hybrid`: SGLang's ``UnifiedRadixCache`` with FULL and
SWA components, SGLang's ``SWATokenToKVPoolAllocator`` or kvpool's, the SWA side half the full
side). Needs SGLang's CPU runtime (``pip install -e ".[sglang]"``); without it the runner logs
the error and skips W6.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from benchmarks.workloads import Case, Config

NUM_REQUESTS = 160
QUICK_REQUESTS = 40
POOL_TOKENS = 4096
CHUNK_TOKENS = 256
REPEATS = 6  # replays per case (a fresh pool each): more steps per window, less noise


def _factory(token_cls: Any, paged_cls: Any) -> Any:
    def make(pool_tokens: int, page_size: int) -> Any:
        if page_size == 1:
            return token_cls(pool_tokens, torch.int64, "cpu", None, False)
        return paged_cls(pool_tokens, page_size, torch.int64, "cpu", None, False)
    return make


def w6_sglang_serving(cfg: Config) -> Iterator[Case]:
    """Cases for page sizes 1 and 16 and the hybrid SWA row at 16, kvpool and SGLang (need_sort
    off, CPU only)."""
    if cfg.device != "cpu":
        return
    from kvpool.oracle.peers.peer_import import load_sglang_runtime

    load_sglang_runtime()
    import kvpool.integrations.sglang as ks
    from kvpool.integrations import sglang_replay as rp
    from kvpool.integrations import sglang_replay_hybrid as hy
    from kvpool.integrations.sglang_hybrid import SWATokenToKVPoolAllocator as KvpoolSWA
    from sglang.srt.mem_cache import allocator as sg
    from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator as SglangSWA

    quick = cfg.trace_steps < 1000
    impls = {"kvpool": _factory(ks.TokenToKVPoolAllocator, ks.PagedTokenToKVPoolAllocator),
             "sglang": _factory(sg.TokenToKVPoolAllocator, sg.PagedTokenToKVPoolAllocator)}
    hybrid = {"kvpool": hy.hybrid_allocator_factory(KvpoolSWA),
              "sglang": hy.hybrid_allocator_factory(SglangSWA)}
    # (name, kind, page size, allocator factories, tree cache): the hybrid row is the SWA
    # configuration (SGLang's UnifiedRadixCache with FULL and SWA components, windows sliding)
    rows = [("serving", "token", 1, impls, rp.radix_cache),
            ("serving", "paged", 16, impls, rp.radix_cache),
            ("serving_hybrid", "hybrid", 16, hybrid, hy.swa_cache())]
    for case_name, kind, ps, factories, make_cache in rows:
        trace = rp.synthetic_trace(7, num_requests=QUICK_REQUESTS if quick else NUM_REQUESTS,
                                   page_size=ps, pool_tokens=POOL_TOKENS // 4 if quick
                                   else POOL_TOKENS, chunk_tokens=CHUNK_TOKENS)
        for name, factory in factories.items():
            def make(trace: Any = trace, factory: Any = factory,
                     make_cache: Any = make_cache) -> tuple[Any, None]:
                def steps() -> Iterator[float]:
                    digests = set()
                    for _ in range(1 if quick else REPEATS):
                        result = yield from rp.replay_steps(trace, factory,
                                                            make_cache=make_cache)
                        digests.add(rp.digest(result))
                    if len(digests) != 1:
                        raise RuntimeError("replays of one trace differ")
                    return digests.pop()
                return steps(), None

            yield Case("w6", case_name, kind, ps, False, trace.pool_tokens // ps, name, make,
                       lockstep=True)
