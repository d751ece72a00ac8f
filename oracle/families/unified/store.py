"""The data plane's stores for a unified target: its real K/V bytes, through its translations.

A unified composite's tokens are virtual ids; their K/V live in the rows of one ``uint8`` buffer
that each sub-pool views as its own ``k_buffer`` / ``v_buffer`` (SGLang's
``UnifiedMHATokenToKVPool``). :class:`KVRowStore` is a
:class:`~kvpool.oracle.engine.dataplane.SlotStore` over one sub-pool's layer-0 K and V rows,
addressed by virtual token id: ``write`` goes through the target's write translation
(``translate_write_loc`` on the full side, as a forward's ``set_kv_buffer``;
``translate_loc_from_full_to_swa`` on the SWA side), ``read`` through its read translation
(``translate_kv_loc`` / ``translate_loc_from_full_to_swa``). A signature (request, position)
is stored as base-1024 digits in the first four fp16 elements of K and of V, beside the side's
mark; a row whose K and V disagree reads as ``(-3, -3)``. Before a hand-out writes its
signatures, :class:`FreshBuffer` reads the fresh slots' whole K/V rows (every layer): a unified
pool zeroes each page it hands out, so they must read as zeros (``DATA-4``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from kvpool.spec.unified import UnifiedSWAModel, fresh_rows_read_zero

from ...engine.dataplane import CheckedBuffer

BASE = 1024  # fp16 holds every integer below 2048 exactly
TORN = -3  # what a row whose K and V disagree reads as


class KVRowStore:
    """One sub-pool's K/V rows by virtual token id (see the module docstring)."""

    def __init__(self, kv_pool: Any, mark: int, write_loc: Callable[[torch.Tensor], Any],
                 read_loc: Callable[[torch.Tensor], Any]) -> None:
        self.kv_pool, self.mark = kv_pool, mark
        self.write_loc, self.read_loc = write_loc, read_loc

    def _rows(self, locate: Callable[[torch.Tensor], Any], slots: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(locate(slots.to(torch.int64))).to(torch.int64).reshape(-1)

    def write(self, slots: torch.Tensor, signatures: torch.Tensor) -> None:
        """The rows ``write_loc(slots)`` of K and V := the encoded ``signatures``."""
        rows = self._rows(self.write_loc, slots)
        sig = signatures.to(torch.int64)
        digits = torch.stack([sig[:, 0] % BASE, sig[:, 0] // BASE, sig[:, 1] % BASE,
                              sig[:, 1] // BASE, torch.full_like(sig[:, 0], self.mark)], dim=1)
        for buffer in (self.kv_pool.k_buffer[0], self.kv_pool.v_buffer[0]):
            buffer[rows, 0, :5] = digits.to(buffer.dtype)

    def dirty(self, slots: torch.Tensor) -> torch.Tensor:
        """Which of ``slots`` (a bool tensor) have a byte that is not zero in some layer's K or
        V row ``write_loc(slot)``."""
        rows = self._rows(self.write_loc, slots)
        out = torch.zeros(len(rows), dtype=torch.bool)
        for buffers in (self.kv_pool.k_buffer, self.kv_pool.v_buffer):
            for layer in buffers:
                out |= (layer[rows].reshape(len(rows), -1) != 0).any(dim=1).cpu()
        return out

    def read(self, slots: torch.Tensor) -> torch.Tensor:
        """The signatures decoded from the rows ``read_loc(slots)`` (``(n, 2)``)."""
        rows = self._rows(self.read_loc, slots)
        k = self.kv_pool.k_buffer[0][rows, 0, :5].to(torch.int64)
        v = self.kv_pool.v_buffer[0][rows, 0, :5].to(torch.int64)
        out = torch.stack([k[:, 0] + BASE * k[:, 1], k[:, 2] + BASE * k[:, 3]], dim=1)
        torn = (k != v).any(dim=1) | (k[:, 4] != self.mark)
        out[torn] = TORN
        return out


@dataclass
class FreshBuffer(CheckedBuffer):
    """A side whose hand-outs first require the fresh slots' bytes to read as zeros
    (``DATA-4``), then write their signatures (``DATA-2``)."""

    def hand_out(self, slots: Sequence[int], request: int) -> None:
        if slots:
            dirty = self.store.dirty(torch.as_tensor(list(slots), dtype=torch.int64))
            fresh_rows_read_zero(list(slots), dirty.tolist(), self.name)
        super().hand_out(slots, request)


def unified_sides(target: Any, model: UnifiedSWAModel) -> list[FreshBuffer]:
    """The full and SWA sides of ``target``: a token is live on a side while ``model`` binds its
    virtual page there."""
    kv = target.get_kvcache()
    ps = model.page_size
    read_full = getattr(target, "translate_kv_loc", target.translate_kv_indices_for_transfer)
    to_swa = target.translate_loc_from_full_to_swa
    return [
        FreshBuffer("full",
                      KVRowStore(kv.full_kv_pool, 1, target.translate_write_loc, read_full),
                      lambda s: s // ps in model.full.v2p),
        FreshBuffer("swa", KVRowStore(kv.swa_kv_pool, 2, to_swa, to_swa),
                      lambda s: s // ps in model.swa.v2p),
    ]
