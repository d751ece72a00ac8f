"""Build allocators of each implementation behind one small vocabulary.

kvpool and SGLang share SGLang 0.5.23's API, so one factory serves both (``module`` is
``kvpool.impl`` or ``sglang.srt.mem_cache.allocator``). vLLM's ``BlockPool`` speaks blocks
(``KVCacheBlock`` objects) instead of slot tensors; block 0 is its null block, so a pool of
``num_pages`` usable blocks is built with ``num_pages + 1``.
"""

from __future__ import annotations

import time
from typing import Any

import torch

KV_DTYPE = torch.float16  # only passed through; no KV buffer is built (kvcache=None)


def make_allocator(
    module: Any, kind: str, num_pages: int, page_size: int, need_sort: bool, device: str = "cpu"
) -> Any:
    """A fresh allocator with ``num_pages`` usable pages of ``page_size`` slots.

    ``kind`` is ``"token"`` (``TokenToKVPoolAllocator``, page_size must be 1) or ``"paged"``
    (``PagedTokenToKVPoolAllocator``). Raises ValueError for an unknown kind or a token
    allocator with page_size != 1.
    """
    if kind == "token":
        if page_size != 1:
            raise ValueError("token allocators have page_size 1")
        return module.TokenToKVPoolAllocator(num_pages, KV_DTYPE, device, None, need_sort)
    if kind == "paged":
        alloc = module.PagedTokenToKVPoolAllocator(
            num_pages * page_size, page_size, KV_DTYPE, device, None, need_sort
        )
        if torch.device(device).type == "cpu" and getattr(alloc, "use_triton_kernels", False):
            # SGLang picks its Triton kernels by platform: on a GPU machine they would be
            # launched on CPU tensors and refuse them; its torch path is its CPU path
            alloc.use_triton_kernels = False
        return alloc
    raise ValueError(f"unknown allocator kind {kind!r}")


class VllmPools:
    """One ``BlockPool`` per pool size, built once (construction is O(P) Python objects).

    Each pool keeps half of its blocks held for its whole life, like the other implementations'
    set-ups; workloads must return every block they take.
    """

    def __init__(self, block_pool_cls: Any) -> None:
        self.cls = block_pool_cls
        self.pools: dict[int, Any] = {}
        self.held: dict[int, list[Any]] = {}

    def get(self, num_pages: int) -> Any:
        """The pool with ``num_pages`` usable blocks, half of them held."""
        if num_pages not in self.pools:
            pool = self.cls(num_pages + 1, enable_caching=False, hash_block_size=16)
            self.held[num_pages] = pool.get_new_blocks(num_pages // 2)
            self.pools[num_pages] = pool
        return self.pools[num_pages]

    def check_invariants(self) -> None:
        """Assert every pool has exactly its held blocks out (workloads gave everything back)."""
        for n, pool in self.pools.items():
            free = pool.get_num_free_blocks()
            assert free == n - len(self.held[n]), (
                f"vLLM pool of {n} blocks: {free} free, expected {n - len(self.held[n])}")

    def drop(self, num_pages: int) -> None:
        """Forget the pool of this size (frees its memory)."""
        self.pools.pop(num_pages, None)
        self.held.pop(num_pages, None)


def vllm_round_trip(pools: VllmPools, num_pages: int, k: int) -> Any:
    """Case factory: ``free_blocks(get_new_blocks(k))`` on the shared pool of this size."""
    def make() -> Any:
        pool = pools.get(num_pages)

        def step() -> None:
            pool.free_blocks(pool.get_new_blocks(k))
        return step, None
    return make


def vllm_extend(pools: VllmPools, num_pages: int, counts: list[int]) -> Any:
    """Case factory: one ``get_new_blocks(n_i)`` per request (timed), then their release."""
    def make() -> Any:
        pool = pools.get(num_pages)

        def step() -> float:
            t0 = time.perf_counter()
            got = [pool.get_new_blocks(n) for n in counts]
            t = time.perf_counter() - t0
            for blocks in got:
                pool.free_blocks(blocks)
            return t
        return step, None
    return make


def vllm_free_row(pools: VllmPools, num_pages: int, row_pages: int) -> Any:
    """Case factory: ``free_blocks`` of a ``row_pages``-block row (timed), then its re-take."""
    def make() -> Any:
        pool = pools.get(num_pages)
        state = {"blocks": pool.get_new_blocks(row_pages)}

        def step() -> float:
            t0 = time.perf_counter()
            pool.free_blocks(state["blocks"])
            t = time.perf_counter() - t0
            state["blocks"] = pool.get_new_blocks(row_pages)
            return t

        def cleanup() -> None:
            pool.free_blocks(state["blocks"])
        return step, cleanup
    return make
