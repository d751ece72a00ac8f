"""W7: the hybrid sliding-window allocator (``SWATokenToKVPoolAllocator``), kvpool vs SGLang.

Both implementations side by side in one run (interleaved windows): kvpool's
:class:`kvpool.impl.SWATokenToKVPoolAllocator` and SGLang 0.5.23's own class, loaded through
:mod:`kvpool.oracle.peers.peer_swa` (a KV pool object of its ``BaseSWAKVPool`` type, naive CPU
kernels). Pools: ``P`` full pages and ``P // 2`` SWA pages, half of each held, so that the free
lists are pool-sized.

- ``decode_slide`` (ps 16; ps 1: ``alloc`` for the batch): 64 requests, each with a window of
  4 pages. One step is one page of decode for the batch: ``alloc_decode`` opens a page on both
  sides for every request (``seq = k * ps + 1``), then every window slides by one page
  (``free_swa`` of the oldest page's slots) and that page's full side is freed
  (``free_full``), so the state is stationary.
- ``free_swa_row``: one 32k-token row (ps 16: 2048 pages on both sides) whose window slides out
  whole: ``free_swa(row)`` (``free_swa_segment(row, 0)`` for the ``segment`` variant). Only
  that call is timed; the row's SWA side is then allocated and paired again, untimed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import torch

from benchmarks.workloads import Case, Config

BATCH = 64
WINDOW_PAGES = 4
ROW_TOKENS = 32 * 1024
KV_DTYPE = torch.float16


def make_hybrid(impl: str, num_pages: int, page_size: int, need_sort: bool, device: str) -> Any:
    """A fresh hybrid allocator of ``num_pages`` full pages and ``num_pages // 2`` SWA pages."""
    size, size_swa = num_pages * page_size, num_pages // 2 * page_size
    if impl == "kvpool":
        from kvpool.impl import SWATokenToKVPoolAllocator

        return SWATokenToKVPoolAllocator(size, size_swa, page_size, KV_DTYPE, device, None,
                                         need_sort)
    from kvpool.oracle.peers.peer_swa import load_sglang_swa, make_swa_kv_pool

    return load_sglang_swa().SWATokenToKVPoolAllocator(
        size, size_swa, page_size, KV_DTYPE, device, make_swa_kv_pool(), need_sort)


def _take_row(a: Any, num_tokens: int, ps: int, device: str) -> Any:
    """A row of ``num_tokens`` slots, paired on both sides (``alloc`` at ps 1, else one
    ``alloc_extend`` from an empty prefix)."""
    if ps == 1:
        return a.alloc(num_tokens)
    t = torch.tensor([num_tokens], dtype=torch.int64)
    return a.alloc_extend(torch.zeros(1, dtype=torch.int64, device=device),
                          torch.zeros(1, dtype=torch.int64), t.to(device), t,
                          torch.tensor([-1], dtype=torch.int64, device=device), num_tokens)


def _hold_half(a: Any, num_pages: int, ps: int, device: str) -> Any:
    """Take half of the SWA side (a quarter of the full side) and keep it."""
    return _take_row(a, num_pages // 4 * ps, ps, device)


def _decode_slide(cfg: Config, impl: str, num_pages: int, ps: int, ns: bool) -> Any:
    dev = cfg.device
    a = make_hybrid(impl, num_pages, ps, ns, dev)
    held = _hold_half(a, num_pages, ps, dev)
    # ring[i, j]: first slot of request i's j-th window page (a page per decode step)
    if ps == 1:
        ring = a.alloc(BATCH * WINDOW_PAGES).reshape(WINDOW_PAGES, BATCH).T.contiguous()
    else:
        seq0 = torch.full((BATCH,), 1, dtype=torch.int64)
        lasts = torch.full((BATCH,), -1, dtype=torch.int64, device=dev)
        cols = []
        for _ in range(WINDOW_PAGES):
            cols.append(a.alloc_decode(seq0.to(dev), seq0, lasts))
            lasts = cols[-1] + ps - 1
        ring = torch.stack(cols, dim=1)
    seq_cpu = torch.full((BATCH,), ps + 1, dtype=torch.int64)
    seq_dev = seq_cpu.to(dev)
    state = {"k": 0}

    def step() -> None:
        k = state["k"]
        newest = ring[:, (k - 1) % WINDOW_PAGES]
        out = a.alloc(BATCH) if ps == 1 else a.alloc_decode(seq_dev, seq_cpu, newest + ps - 1)
        oldest = ring[:, k].clone()
        a.free_swa(oldest)
        a.free_full(oldest)
        ring[:, k] = out
        state["k"] = (k + 1) % WINDOW_PAGES
        _ = held

    return step, None


def _free_swa_row(cfg: Config, impl: str, num_pages: int, ps: int, ns: bool,
                  segment: bool) -> Any:
    dev = cfg.device
    a = make_hybrid(impl, num_pages, ps, ns, dev)
    held = _hold_half(a, num_pages, ps, dev)
    row = _take_row(a, ROW_TOKENS, ps, dev)

    def step() -> float:
        t0 = time.perf_counter()
        if segment:
            a.free_swa_segment(row, start_pos=0)
        else:
            a.free_swa(row)
        elapsed = time.perf_counter() - t0
        swa = a.swa_attn_allocator.alloc(ROW_TOKENS)  # untimed: pair the row again
        a.full_to_swa_index_mapping[row] = swa
        _ = held
        return elapsed

    return step, None


def w7_hybrid(cfg: Config) -> Iterator[Case]:
    """The W7 cases: kvpool and SGLang for every pool size, page size and need_sort."""
    impls = [name for name in ("kvpool", "sglang") if name in cfg.impls]
    for num_pages in cfg.sizes:
        for ps in cfg.page_sizes:
            for ns in cfg.need_sorts:
                for impl in impls:
                    yield Case("w7_hybrid", "decode_slide", "swa", ps, ns, num_pages, impl,
                               lambda i=impl, n=num_pages, p=ps, s=ns:
                               _decode_slide(cfg, i, n, p, s))
            if ps == 1 or num_pages // 4 < ROW_TOKENS // ps + BATCH:
                continue  # the row must fit beside the held quarter of the SWA pool
            for variant, segment in (("free_swa_row", False), ("free_swa_row_segment", True)):
                for ns in cfg.need_sorts:
                    for impl in impls:
                        yield Case("w7_hybrid", variant, "swa", ps, ns, num_pages, impl,
                                   lambda i=impl, n=num_pages, p=ps, s=ns, g=segment:
                                   _free_swa_row(cfg, i, n, p, s, g))
