"""The token ids a unified pool's paged allocations return, given the virtual pages they took.

Shared by the unified composites (:class:`~.unified_swa.UnifiedSWAAllocator` and
:class:`~.unified_mamba.UnifiedMambaAllocator`), whose ``alloc_extend`` / ``alloc_decode``
hand out the same ids as SGLang 0.5.23's ``alloc_extend_kernel`` / ``alloc_decode_kernel`` run
over the free virtual page ids: the rest of a request's last prefix page continues its
``last_loc``, then its new pages in request order, ``page * page_size + offset``. Vectorised
over tokens (numpy); no Python loop per request.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["decode_starts", "extend_rows", "into", "new_page_counts", "sink_rows"]


def new_page_counts(prefix: np.ndarray, seq: np.ndarray, page_size: int) -> np.ndarray:
    """New pages each request needs to grow from ``prefix[i]`` to ``seq[i]`` tokens:
    ``ceil(seq / ps) - ceil(prefix / ps)``."""
    counts: np.ndarray = -(-seq // page_size) - -(-prefix // page_size)
    return counts


def extend_rows(pages: np.ndarray, prefix: np.ndarray, seq: np.ndarray, last: np.ndarray,
                page_size: int, offsets: np.ndarray) -> np.ndarray:
    """The token ids ``alloc_extend`` returns once ``pages`` (the new virtual pages, request
    order, as many as :func:`new_page_counts` sums to) are taken: request ``i``'s positions
    ``prefix[i] .. seq[i] - 1``, the ones inside its last prefix page as ``last[i] + 1 + k``,
    the others on its new pages. ``offsets`` is ``arange(page_size)``. A fresh array."""
    ps = page_size
    if ps == 1:
        return pages.copy()
    lens = seq - prefix
    if not ((prefix | seq) & (ps - 1)).any() if ps & (ps - 1) == 0 else (
            (prefix % ps == 0).all() and (seq % ps == 0).all()):
        # whole new pages only (no continuation, no partial last page): in request order
        out_whole: np.ndarray = (pages[:, None] * ps + offsets).reshape(-1)
        return out_whole
    first_new = -(-prefix // ps)
    counts = -(-seq // ps) - first_new
    req = np.repeat(np.arange(len(lens)), lens)
    pos = prefix[req] + np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    fresh = pos >= first_new[req] * ps
    page_at = np.repeat(np.cumsum(counts) - counts - first_new, lens) + pos // ps
    rows = pages[np.where(fresh, page_at, 0)] * ps + pos % ps if len(pages) else pos * 0
    out: np.ndarray = np.where(fresh, rows, last[req] + 1 + pos - prefix[req])
    return out


def decode_starts(seq: np.ndarray, page_size: int) -> np.ndarray:
    """Which requests open a new page on a decode step (position ``seq[i] - 1`` starts one)."""
    starts: np.ndarray = (seq - 1) % page_size == 0
    return starts


def sink_rows(pool: Any, ids: np.ndarray, page_size: int) -> np.ndarray:
    """``pool.rows(ids, page_size)`` (an end's physical rows of virtual token ids) with every id
    outside the virtual id range, negative ones too, read as the sink row 0 (an unchecked
    translation)."""
    limit = len(pool.v2p) * page_size
    if len(ids) and (ids.min() < 0 or ids.max() >= limit):
        inside = (ids >= 0) & (ids < limit)
        out = np.zeros(len(ids), dtype=np.int64)
        out[inside] = pool.rows(ids[inside], page_size)
        return out
    rows: np.ndarray = pool.rows(ids, page_size)
    return rows


def into(rows: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """``rows``, or ``out`` with ``rows`` written into it in place (a translation's ``out=``,
    as a captured CUDA graph needs)."""
    if out is None:
        return rows
    out.copy_(rows.reshape(out.shape))
    return out
