"""The full -> SWA mapping tensor of the hybrid allocator and its O(slots moved) operations.

SGLang's layout: ``size + page_size`` entries (one per full slot, page 0 included) plus a
trailing ``-1``, so that ``mapping[-1] == -1`` translates an empty prefix's ``last_loc``
(``SWA-1``). Entry 0 means "no SWA peer". The KV pool reads the tensor by identity (it is
registered once), so it is never rebound except by ``resize`` (then registered again).

On the CPU the gathers and clears run in numpy on the tensor's memory (torch's per-op dispatch
costs more than the work for short rows); on CUDA they are torch ops without a host sync
(``index_fill_`` takes its 0 as a kernel argument).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from kvpool.spec.errors import ContractViolation
from kvpool.spec.window import RELEASED

from .checked import host_list


class PairTable:
    """``mapping[full_slot] -> swa_slot`` with SGLang's trailing ``-1``; see the module doc."""

    def __init__(self, size: int, page_size: int, device: Any) -> None:
        self.page_size = page_size
        self.device = device
        self.mapping = torch.cat([torch.zeros(size + page_size, dtype=torch.int64, device=device),
                                  torch.tensor([-1], dtype=torch.int64, device=device)])
        self._np = self.mapping.numpy() if self.mapping.device.type == "cpu" else None
        self._offsets = torch.arange(page_size, dtype=torch.int64, device=device)

    def rebind(self, mapping: torch.Tensor) -> None:
        """Use ``mapping`` from now on (no copy): it must have this table's shape, int64, on its
        device (``SWA-1``; else ContractViolation, nothing changed)."""
        if (not isinstance(mapping, torch.Tensor) or mapping.shape != self.mapping.shape
                or mapping.dtype != torch.int64 or mapping.device != self.mapping.device):
            got = getattr(mapping, "dtype", type(mapping)), tuple(getattr(mapping, "shape", ()))
            raise ContractViolation("SWA-1", f"the mapping must be an int64 tensor of shape "
                                             f"{tuple(self.mapping.shape)} on "
                                             f"{self.mapping.device}, got {got}")
        self.mapping = mapping
        self._np = mapping.numpy() if mapping.device.type == "cpu" else None

    def clear(self) -> None:
        """Every pair released; the trailing ``-1`` stays. O(size)."""
        self.mapping[:-1].zero_()

    def set(self, full: torch.Tensor, swa: torch.Tensor) -> None:
        """Pair ``full[k]`` with ``swa[k]``. O(k)."""
        if full.numel() == 0:
            return
        if self._np is not None:
            self._np[full.numpy()] = swa.numpy()
        else:
            self.mapping[full.to(torch.int64)] = swa.to(torch.int64)

    def gather(self, full: torch.Tensor) -> torch.Tensor:
        """The mapped values of ``full`` (a new tensor; ``-1`` reads ``-1``). O(k)."""
        if self._np is not None:
            return torch.from_numpy(self._np[full.numpy()])
        return self.mapping[full.to(torch.int64)]

    def take(self, full: torch.Tensor) -> torch.Tensor:
        """Gather, then release, the pairs of ``full``: all values are read before any is
        cleared, so a slot named twice reads its peer twice. O(k)."""
        values = self.gather(full)
        if self._np is not None:
            self._np[full.numpy()] = RELEASED
        else:
            self.mapping.index_fill_(0, full.to(torch.int64), RELEASED)
        return values

    def take_peer_pages(self, slots: torch.Tensor) -> torch.Tensor | None:
        """CPU fast path of ``free_swa`` at page size > 1: the sorted distinct SWA pages of the
        full pages ``slots`` touch, their pairs released (``window.peer_pages`` of the
        expansion). Each full page is expanded once (SGLang expands every slot: k * ps entries;
        here distinct pages * ps). None on CUDA (a dedup would sync; the caller expands)."""
        if self._np is None:
            return None
        ps = self.page_size
        pages = np.unique(slots.numpy() // ps)
        expanded = (pages[:, None] * ps + np.arange(ps)).reshape(-1)
        peers = self._np[expanded]
        self._np[expanded] = RELEASED
        return torch.from_numpy(np.unique(peers[peers > 0] // ps))

    def take_rep_pages(self, reps: torch.Tensor) -> torch.Tensor:
        """``free_swa_segment``: the SWA page of each full-page representative, in order, and
        the pairs of those full pages released (numpy on the CPU). O(pages * page_size)."""
        ps = self.page_size
        if self._np is None:
            pages = self.gather(reps) // ps
            self.take(self.expand_to_full_pages(reps))
            return pages
        rep = reps.numpy()
        pages = self._np[rep] // ps
        self._np[(rep // ps * ps)[:, None] + np.arange(ps)] = RELEASED
        return torch.from_numpy(pages)

    def expand_to_full_pages(self, slots: torch.Tensor) -> torch.Tensor:
        """Every slot of the full pages of ``slots``, duplicates kept (``window.full_page_slots``,
        vectorised; ``SWA-10``). O(k * page_size)."""
        ps = self.page_size
        if ps == 1:
            return slots.to(torch.int64)
        base = slots.to(torch.int64) // ps * ps
        return (base[:, None] + self._offsets[None, :]).reshape(-1)

    def peer_of(self, slot: int) -> int:
        """Host read of one entry (checked mode; syncs on CUDA)."""
        return int(self.mapping[slot].item())

    def pairs(self) -> list[tuple[int, int]]:
        """The live pairs, on the host (the census; syncs). O(size)."""
        values = host_list(self.mapping[:-1])
        return [(f, s) for f, s in enumerate(values) if s != RELEASED]

    def check_invariants(self) -> list[str]:
        """The trailing ``-1`` and entry values within range."""
        problems = [] if self.peer_of(-1) == -1 else ["SWA-1: the mapping lost its trailing -1"]
        if bool((self.mapping[:-1] < 0).any()):
            problems.append("SWA-1: a mapping entry is negative")
        return problems

