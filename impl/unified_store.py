"""The byte store of a unified full + SWA pool: one ``uint8`` buffer, two K/V views of it.

Laid out as SGLang 0.5.23's ``UnifiedKVPool`` lays out an MHA sub-pool: each sub-pool sees the
whole buffer as token *entries* of ``entry_bytes`` (``[K_0 | V_0 | K_1 | V_1 | ...]``, rounded up
to 32 bytes), so physical token row ``r`` of a sub-pool starts at byte ``r * entry_bytes`` and
physical page ``p`` covers ``[p * page_bytes, (p + 1) * page_bytes)`` (``UNI-1``). Each layer's
``k_buffer[l]`` / ``v_buffer[l]`` is a ``[rows, head_num, head_dim]`` fp16 view with the entry as
row stride, indexed by the physical token id (what the translations return).

Fresh pages are zeroed when handed out: SGLang's ``MultiEndedAllocator`` zeroes the page
envelopes of an MHA sub-pool on every hand-out (``_maybe_zero_pages`` ->
``UnifiedMHATokenToKVPool.zero_physical_pages``) so that never-written rows read as finite values;
the whole buffer starts zeroed too (``UnifiedKVPool._initialize_raw``). This store does the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = ["DEFAULT_LAYOUT", "ENTRY_ALIGN_BYTES", "KVSidePool", "SideLayout", "UnifiedByteStore",
           "page_mover"]

ENTRY_ALIGN_BYTES = 32  # SGLang's token-major entry alignment


@dataclass(frozen=True)
class SideLayout:
    """One sub-pool's token entry: ``layer_num`` layers of K and V rows of ``head_num`` heads
    of ``head_dim`` fp16 values (the default is one layer, one head of dim 8: 32 bytes)."""

    layer_num: int = 1
    head_num: int = 1
    head_dim: int = 8

    @property
    def row_bytes(self) -> int:
        """Bytes of one K (or V) row of one layer."""
        return self.head_num * self.head_dim * 2

    @property
    def entry_bytes(self) -> int:
        """Bytes one token slot occupies: every layer's K and V row, aligned to 32 bytes."""
        raw = self.layer_num * 2 * self.row_bytes
        return -(-raw // ENTRY_ALIGN_BYTES) * ENTRY_ALIGN_BYTES


DEFAULT_LAYOUT = SideLayout()  # 32 bytes a token: one layer, one head of dim 8


class KVSidePool:
    """One sub-pool's view of the shared buffer: per-layer ``k_buffer`` / ``v_buffer`` and whole
    page copies (``move_physical_pages``) and zeroing (``zero_physical_pages``)."""

    def __init__(self, raw: torch.Tensor, name: str, layout: SideLayout, page_size: int) -> None:
        self.name, self.layout, self.page_size = name, layout, page_size
        entry = layout.entry_bytes
        total = raw.numel()
        self.num_pages = total // entry // page_size
        self.page_bytes = page_size * entry
        rows = self.num_pages * page_size
        halves = raw[: total - total % 2].view(torch.float16)
        stride = (entry // 2, layout.head_dim, 1)
        shape = (rows, layout.head_num, layout.head_dim)
        layer_stride = 2 * layout.row_bytes
        self.k_buffer = [torch.as_strided(halves, shape, stride, (layer * layer_stride) // 2)
                         for layer in range(layout.layer_num)]
        self.v_buffer = [torch.as_strided(halves, shape, stride,
                                          (layer * layer_stride + layout.row_bytes) // 2)
                         for layer in range(layout.layer_num)]
        self.pages_view = raw[: self.num_pages * self.page_bytes].view(self.num_pages,
                                                                     self.page_bytes)
        # on the host, copies and zeroing go through numpy (no intra-op thread pool to wake)
        self.host_pages = self.pages_view.numpy() if raw.device.type == "cpu" else None
        # each page one opaque element: a gather of pages copies whole pages at once
        self.host_units = (None if self.host_pages is None else self.host_pages.view(
            np.dtype((np.void, self.page_bytes))).reshape(-1))
        self.zero_unit = np.zeros(1, dtype=np.dtype((np.void, self.page_bytes)))[0]

    def move_physical_pages(self, dst_pages: torch.Tensor, src_pages: torch.Tensor,
                            page_size: int | None = None) -> None:
        """Copy whole pages ``src_pages[i]`` -> ``dst_pages[i]`` of every layer (the two sets
        are disjoint, as compaction issues them).

        Raises:
            ValueError: ``page_size`` given and not this pool's.
        """
        if page_size is not None and page_size != self.page_size:
            raise ValueError(f"pages of {page_size} rows passed to a pool of {self.page_size}")
        if not dst_pages.numel():
            return
        if self.host_pages is not None:
            self.host_pages[dst_pages.numpy()] = self.host_pages[src_pages.numpy()]
        else:
            self.pages_view[dst_pages] = self.pages_view[src_pages]

    def move_host_pages(self, dst_pages: np.ndarray, src_pages: np.ndarray) -> bool:
        """``move_physical_pages`` of host page arrays when the buffer is on the host (the
        pages in range, as compaction issues them); False, nothing copied, when it is not."""
        if self.host_units is None:
            return False
        if len(dst_pages):
            self.host_units[dst_pages] = self.host_units[src_pages]
        return True

    def zero_page_run(self, low: int, high: int) -> None:
        """Zero the whole pages ``[low, high)``."""
        if self.host_pages is not None:
            self.host_pages[low:high] = 0
        else:
            self.pages_view[low:high].zero_()

    def zero_physical_pages(self, pages: np.ndarray) -> None:
        """Zero whole pages (every layer's rows of them); a contiguous run is zeroed as a
        slice."""
        n = len(pages)
        if n == 0:
            return
        if self.host_units is not None and n <= 256:
            self.host_units[pages] = self.zero_unit  # a few pages: one scatter, no range scan
            return
        lo, hi = int(pages.min()), int(pages.max())
        if self.host_pages is not None:
            if hi - lo + 1 == n:
                self.host_pages[lo:hi + 1] = 0
            else:
                assert self.host_units is not None
                self.host_units[pages] = self.zero_unit
        elif hi - lo + 1 == n:
            self.pages_view[lo:hi + 1].zero_()
        else:
            self.pages_view[torch.from_numpy(np.ascontiguousarray(pages)).to(
                self.pages_view.device)] = 0

    def get_cpu_copy(self, rows: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Every layer's ``(K, V)`` rows ``rows``, copied to the host."""
        return [(k[rows].cpu(), v[rows].cpu()) for k, v in zip(self.k_buffer, self.v_buffer)]

    def load_cpu_copy(self, copy: list[tuple[torch.Tensor, torch.Tensor]],
                      rows: torch.Tensor) -> None:
        """Write a :meth:`get_cpu_copy` result back into rows ``rows``."""
        for (k, v), kb, vb in zip(copy, self.k_buffer, self.v_buffer):
            kb[rows] = k.to(kb.device)
            vb[rows] = v.to(vb.device)


class UnifiedByteStore:
    """The shared ``total_bytes`` buffer (zeroed) and its ``full_kv_pool`` / ``swa_kv_pool``
    views; ``get_kvcache()`` of the composite returns this object."""

    def __init__(self, total_bytes: int, page_size: int, full: SideLayout, swa: SideLayout,
                 device: str = "cpu") -> None:
        self.total_bytes = total_bytes
        self.raw = torch.zeros(total_bytes, dtype=torch.uint8, device=device)
        self.full_kv_pool = KVSidePool(self.raw, "full", full, page_size)
        self.swa_kv_pool = KVSidePool(self.raw, "swa", swa, page_size)


def page_mover(kv_pool: Any, device: torch.device,
               page_size: int) -> Callable[[np.ndarray, np.ndarray], None]:
    """The page-copy callback an end sub-pool issues ``(dst_pages, src_pages)`` through:
    ``kv_pool.move_physical_pages`` (tensors on ``device``), or on the host the pool's own
    ``move_host_pages`` of the page arrays as they are, unless ``move_physical_pages`` was
    replaced on the pool object (a copy observer)."""
    host_move = getattr(kv_pool, "move_host_pages", None)

    def move(dst: np.ndarray, src: np.ndarray) -> None:
        if host_move is not None and "move_physical_pages" not in vars(kv_pool) and (
                host_move(dst, src)):
            return
        kv_pool.move_physical_pages(torch.from_numpy(dst).to(device),
                                    torch.from_numpy(src).to(device), page_size)

    return move
