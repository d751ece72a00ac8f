"""Allocator metadata per page: free lists, staging, per-block objects.

For the tensor-based allocators (kvpool, SGLang) the tensors reachable from the allocator's
attributes (directly, or inside lists / tuples / dicts, two levels deep) are counted once per
storage (``untyped_storage().nbytes()``), plus the Python containers' ``sys.getsizeof``. For vLLM's
``BlockPool`` the Python heap growth of its construction is measured with ``tracemalloc`` (the
``KVCacheBlock`` objects, the free queue, the hash map). No KV buffer is built (``kvcache=None``),
so none is counted. Figures are taken after ``clear()`` and again after a churn that holds half
the pool and frees it back (staging and grown lists included). kvpool's ownership guard (a
bytearray of one bit per page) is counted, and also reported on its own
(``guard_bytes_per_page``).
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from typing import Any

import torch

from benchmarks.adapters import make_allocator


def tensor_bytes(obj: Any, depth: int = 2) -> int:
    """Bytes of distinct tensor storages and containers reachable from ``obj``'s attributes."""
    seen: set[int] = set()
    total = 0

    def visit(x: Any, d: int) -> None:
        nonlocal total
        if isinstance(x, bytearray):  # kvpool's ownership bitmap (numpy views of it: not again)
            if id(x) not in seen:
                seen.add(id(x))
                total += len(x)
            return
        if isinstance(x, torch.Tensor):
            st = x.untyped_storage()
            key = st.data_ptr() if st.nbytes() else id(x)
            if key not in seen:
                seen.add(key)
                total += st.nbytes()
            return
        if d <= 0 or id(x) in seen:
            return
        if isinstance(x, (list, tuple, set, dict)):
            seen.add(id(x))
            total += sys.getsizeof(x)
            items = x.values() if isinstance(x, dict) else x
            for y in items:
                visit(y, d - 1)
        elif hasattr(x, "__dict__") and not isinstance(x, type):
            seen.add(id(x))
            for y in vars(x).values():
                visit(y, d - 1)

    visit(obj, depth + 1)
    return total


def _churn(a: Any, num_pages: int, ps: int) -> None:
    """Hold half the pool in 64 pieces, free them back one by one, then take one page."""
    piece = max(1, num_pages // 128)
    got = [a.alloc(piece * ps) for _ in range(64)]
    for x in got:
        if x is not None:
            a.free(x)
    a.free(a.alloc(ps))


def allocator_metadata(module: Any, kind: str, num_pages: int, ps: int,
                       need_sort: bool) -> dict[str, float]:
    """Bytes per page of a fresh allocator and after churn."""
    a = make_allocator(module, kind, num_pages, ps, need_sort)
    fresh = tensor_bytes(a)
    _churn(a, num_pages, ps)
    churned = tensor_bytes(a)
    owners = getattr(a, "_owners", None)  # kvpool's ownership guard: one bit per page
    guard = len(owners.raw) if owners is not None else 0
    return {"fresh_bytes_per_page": fresh / num_pages,
            "churned_bytes_per_page": churned / num_pages,
            "guard_bytes_per_page": guard / num_pages}


def vllm_metadata(block_pool_cls: Any, num_pages: int) -> dict[str, float]:
    """Bytes per block of a vLLM ``BlockPool`` (Python heap, via tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    pool = block_pool_cls(num_pages + 1, enable_caching=False, hash_block_size=16)
    fresh = tracemalloc.get_traced_memory()[0] - base
    blocks = pool.get_new_blocks(num_pages // 2)
    pool.free_blocks(blocks)
    del blocks
    churned = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del pool
    return {"fresh_bytes_per_page": fresh / num_pages,
            "churned_bytes_per_page": churned / num_pages}
