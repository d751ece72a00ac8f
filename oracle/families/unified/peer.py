"""SGLang 0.5.23's unified memory pools on a CPU: the composites, built by SGLang's own fixtures.

``sglang.test.unified_allocator_fixtures`` builds ``UnifiedSWATokenToKVPoolAllocator`` (full +
SWA in one byte buffer, :func:`build_unified_swa`) and the tri-pool (full + SWA + mamba) over
real CPU tensors. The sub-pools' ``alloc_extend`` / ``alloc_decode`` launch SGLang's paged
Triton kernels unconditionally; :func:`load_unified` points those two kernel objects at SGLang's
own torch fallbacks (``alloc_extend_naive`` / ``alloc_decode_naive``, the ones its paged
allocator uses without Triton). Everything else runs unmodified.
"""

from __future__ import annotations

import importlib
import types
from typing import Any

FIXTURES = "sglang.test.unified_allocator_fixtures"
SUB_POOL = "sglang.srt.mem_cache.allocator.unified_sub_pool"
PAGED = "sglang.srt.mem_cache.allocator.paged"
ENTRY_BYTES = 32  # one token of one layer: K and V, 1 head of dim 8, fp16

_fixtures: types.ModuleType | None = None


class _Grid:
    """A Triton kernel object's launch form, ``kernel[grid](*args)``, over a torch function."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __getitem__(self, grid: Any) -> Any:
        return self.fn


def _torch_extend(prefix_lens: Any, seq_lens: Any, last_loc: Any, free_pages: Any,
                  out_indices: Any, _bs_pow2: int, page_size: int) -> None:
    paged = importlib.import_module(PAGED)
    paged.alloc_extend_naive(prefix_lens, seq_lens, last_loc, free_pages, out_indices,
                             page_size, out_indices.device)


def _torch_decode(seq_lens: Any, last_loc: Any, free_pages: Any, out_indices: Any,
                  _bs_pow2: int, page_size: int) -> None:
    paged = importlib.import_module(PAGED)
    opened = int(((seq_lens - 1) % page_size == 0).sum())
    paged.alloc_decode_naive(seq_lens, last_loc, free_pages, out_indices, page_size, opened)


def load_unified() -> types.ModuleType:
    """SGLang's unified-pool fixtures module, its runtime imported on the CPU (once) and the
    sub-pool kernels routed to torch.

    Raises:
        PeerUnavailable: SGLang or its CPU runtime dependencies cannot be imported.
    """
    global _fixtures
    if _fixtures is not None:
        return _fixtures
    from ...peers.peer_import import PeerUnavailable, load_sglang_runtime

    load_sglang_runtime()
    try:
        fixtures = importlib.import_module(FIXTURES)
    except Exception as exc:
        raise PeerUnavailable(f"cannot import {FIXTURES} ({type(exc).__name__}: {exc})") from exc
    sub_pool = importlib.import_module(SUB_POOL)
    setattr(sub_pool, "alloc_extend_kernel", _Grid(_torch_extend))  # noqa: B010
    setattr(sub_pool, "alloc_decode_kernel", _Grid(_torch_decode))  # noqa: B010
    fixtures.setup_allocator_context()
    _fixtures = fixtures
    return fixtures


STATIC_CAP_PAGES = 100  # the fixture's full_/swa_max_total_num_tokens, in pages


def build_unified_swa(*, total_bytes: int, page_size: int, lazy: bool) -> Any:
    """SGLang's ``UnifiedSWATokenToKVPoolAllocator`` over a ``total_bytes`` buffer: one full
    and one SWA layer of :data:`ENTRY_BYTES` a token each, static caps of
    :data:`STATIC_CAP_PAGES` pages a side (the fixture's)."""
    return load_unified().build_swa_pool(page_size=page_size, lazy=lazy, total_bytes=total_bytes)
