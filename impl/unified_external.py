"""A unified pool's byte store owned by someone else (SGLang's ``UnifiedSWAKVPool``).

:class:`ExternalKVStore` gives :class:`~kvpool.impl.unified_swa.UnifiedSWAAllocator` the store
interface of :class:`~kvpool.impl.unified_store.UnifiedByteStore` over any object whose
``full_kv_pool`` / ``swa_kv_pool`` have SGLang 0.5.23's page API:
``move_physical_pages(dst_pages, src_pages, page_size)`` (tensors of physical page ids, disjoint
sets) and ``zero_physical_pages(pages)`` (a tensor of physical page ids), plus per-layer
``k_buffer`` / ``v_buffer`` indexed by physical token row. Every page copy and every zeroing then
runs through the owner's own methods, so whatever reads the owner's buffers (an attention
backend) sees the bytes the allocator placed. On a GPU, a copy or zeroing is queued behind the
latest forward pass's ``forward_done`` event when one was handed in
(:meth:`ExternalKVStore.set_forward_done_event`: SGLang's overlap scheduler hands it to the
allocator), so no page moves under a forward still reading it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["ExternalKVStore", "ExternalSidePool", "external_state"]


class ExternalSidePool:
    """One sub-pool of an external store, seen through kvpool's store interface (a state pool,
    SGLang's ``UnifiedMambaPool``, has page copies only: no K/V buffers)."""

    def __init__(self, pool: Any, device: torch.device) -> None:
        self.pool, self.device = pool, device
        self.k_buffer: Any = getattr(pool, "k_buffer", None)
        self.v_buffer: Any = getattr(pool, "v_buffer", None)
        self.forward_done: Any = None  # the latest forward's event (GPU only)

    def _after_forward(self) -> None:
        """Queue what follows behind the latest forward (no-op off the GPU or without one)."""
        if self.forward_done is not None and self.device.type == "cuda":
            torch.cuda.current_stream(self.device).wait_event(self.forward_done)

    def _ids(self, pages: np.ndarray | torch.Tensor) -> torch.Tensor:
        ids = torch.as_tensor(np.ascontiguousarray(pages) if isinstance(pages, np.ndarray)
                              else pages, dtype=torch.int64)
        return ids.to(self.device)

    def move_physical_pages(self, dst_pages: torch.Tensor, src_pages: torch.Tensor,
                            page_size: int) -> None:
        """The owner's ``move_physical_pages`` (nothing for no pages)."""
        if dst_pages.numel():
            self._after_forward()
            self.pool.move_physical_pages(self._ids(dst_pages), self._ids(src_pages), page_size)

    def zero_physical_pages(self, pages: np.ndarray | torch.Tensor) -> None:
        """The owner's ``zero_physical_pages`` (nothing for no pages)."""
        if len(pages):
            self._after_forward()
            self.pool.zero_physical_pages(self._ids(pages))

    def zero_page_run(self, low: int, high: int) -> None:
        """Zero the whole pages ``[low, high)`` through the owner."""
        if high > low:
            self._after_forward()
            self.pool.zero_physical_pages(torch.arange(low, high, device=self.device))

    def get_cpu_copy(self, rows: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Every layer's ``(K, V)`` rows ``rows``, copied to the host."""
        return [(k[rows].cpu(), v[rows].cpu()) for k, v in zip(self.k_buffer, self.v_buffer)]

    def load_cpu_copy(self, copy: list[tuple[torch.Tensor, torch.Tensor]],
                      rows: torch.Tensor) -> None:
        """Write a :meth:`get_cpu_copy` result back into rows ``rows``."""
        for (k, v), kb, vb in zip(copy, self.k_buffer, self.v_buffer):
            kb[rows] = k.to(kb.device)
            vb[rows] = v.to(vb.device)


class ExternalKVStore:
    """``kv_store`` (its token sub-pools ``sides``, default ``full_kv_pool`` / ``swa_kv_pool``;
    module docstring) as a unified pool's byte store; ``raw`` is a zero-length tensor on
    ``device`` (the owner holds the bytes). ``owner`` is ``kv_store`` itself; each side is an
    attribute of the same name. A state pool joins with :meth:`state_side`.

    Raises:
        TypeError: a sub-pool lacks ``move_physical_pages`` or ``zero_physical_pages``.
    """

    full_kv_pool: ExternalSidePool
    swa_kv_pool: ExternalSidePool

    def __init__(self, kv_store: Any, device: str | torch.device,
                 sides: tuple[str, ...] = ("full_kv_pool", "swa_kv_pool")) -> None:
        self.device = torch.device(device)
        for name in sides:
            pool = getattr(kv_store, name, None)
            missing = [m for m in ("move_physical_pages", "zero_physical_pages", "k_buffer",
                                   "v_buffer") if not hasattr(pool, m)]
            if missing:
                raise TypeError(f"kv_store.{name} has no {', '.join(missing)}")
        self.owner = kv_store
        self.raw = torch.empty(0, dtype=torch.uint8, device=self.device)
        self._sides = [ExternalSidePool(getattr(kv_store, name), self.device) for name in sides]
        for name, side in zip(sides, self._sides):
            setattr(self, name, side)

    def state_side(self, pool: Any) -> ExternalSidePool:
        """``pool`` (a state pool: ``move_physical_pages(dst, src, 1)``) as one more side,
        waiting on the forward events as the token sides do.

        Raises:
            TypeError: ``pool`` has no ``move_physical_pages``.
        """
        if not hasattr(pool, "move_physical_pages"):
            raise TypeError(f"{type(pool).__name__} has no move_physical_pages")
        side = ExternalSidePool(pool, self.device)
        self._sides.append(side)
        return side

    def set_forward_done_event(self, event: Any) -> None:
        """The latest forward pass's ``forward_done`` event (None: none in flight); page copies
        and zeroing on a GPU wait for it."""
        for side in self._sides:
            side.forward_done = event


def external_state(store: Any, pool: Any) -> Any:
    """A state pool's page copies: through ``store``'s forward events when ``store`` is an
    :class:`ExternalKVStore`, else ``pool`` itself."""
    if isinstance(store, ExternalKVStore):
        return store.state_side(pool)
    return pool
