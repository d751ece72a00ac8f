"""``alloc_extend_swa_tail``: SGLang's PD-decode pre-allocation on the hybrid allocator
(``SWA-20``): the full side extends the whole row, the SWA side gets fresh pages for the tail."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from kvpool.spec import hybrid_rules as hr

from .checked import host_list
from .swa_pairs import PairTable


class SwaTailAllocation:
    """Mixin for :class:`~kvpool.impl.swa.SWATokenToKVPoolAllocator` (needs its two sides,
    ``_pairs``, ``checked``, ``page_size``, ``device`` and ``new_pages_available``)."""

    full_attn_allocator: Any
    swa_attn_allocator: Any
    _pairs: PairTable
    checked: bool
    page_size: int
    device: Any
    new_pages_available: Callable[[int, int], bool]

    def alloc_extend_swa_tail(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                              seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                              last_loc: torch.Tensor, extend_num_tokens: int,
                              swa_tail_len: int) -> torch.Tensor | None:
        """Full slots for the whole extend of one request; SWA peers for its last
        ``swa_tail_len`` tokens only, on fresh SWA pages (``SWA-20``).

        None iff the full side is short of its new pages or the SWA side of
        ``ceil(swa_tail_len / ps)`` pages; nothing changed then. The slots before the tail have
        no SWA peer. Raises ContractViolation (``SWA-20``) for more than one request, a tail
        outside ``[0, extend_num_tokens]`` or one that does not start on a page boundary (host
        reads of the one-element ``*_cpu`` lengths only); checked mode adds the full side's
        extend rules. NotImplementedError at page size 1. No host-device sync.
        """
        ps = self.page_size
        if ps == 1:
            raise NotImplementedError("SWA-20: alloc_extend_swa_tail is for page size > 1")
        swa_pages = hr.check_swa_tail(host_list(prefix_lens_cpu), host_list(seq_lens_cpu),
                                      extend_num_tokens, swa_tail_len, ps)
        full_side = self.full_attn_allocator
        if self.checked:
            full_side._table.check_extend(prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu,
                                          last_loc, extend_num_tokens, ps)
        num_full_pages = full_side._ops.extend_new_pages(prefix_lens_cpu, seq_lens_cpu)
        if not self.new_pages_available(num_full_pages, swa_pages):
            return None
        full = full_side.alloc_extend(prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu,
                                      last_loc, extend_num_tokens, num_new_pages=num_full_pages)
        assert full is not None
        if swa_tail_len == 0:
            return full  # type: ignore[no-any-return]
        tail_cpu = torch.tensor([swa_tail_len], dtype=torch.int64)
        zero_cpu = torch.zeros(1, dtype=torch.int64)
        swa = self.swa_attn_allocator.alloc_extend(
            zero_cpu.to(self.device), zero_cpu, tail_cpu.to(self.device), tail_cpu,
            torch.full((1,), -1, dtype=torch.int64, device=self.device), swa_tail_len,
            num_new_pages=swa_pages)
        assert swa is not None
        head = full.numel() - swa_tail_len
        if head:
            self._pairs.take(full[:head])
        self._pairs.set(full[head:], swa)
        return full  # type: ignore[no-any-return]
