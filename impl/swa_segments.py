"""The hybrid allocator's segment frees: both sides of row segments (``SWA-14``), the SWA side
alone (``free_swa_segment``) or the full side alone (``SWA-12``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from kvpool.spec import hybrid_rules as hr
from kvpool.spec import rules
from kvpool.spec.errors import ContractViolation
from kvpool.spec.segments import rep_offsets, segment_layout_ok, trim_boundary

from .checked import host_list
from .swa_pairs import PairTable

Segment = tuple[torch.Tensor, int]


class SwaSegmentFrees:
    """Mixin for :class:`~kvpool.impl.swa.SWATokenToKVPoolAllocator` (needs its two sides,
    ``_pairs``, ``checked``, ``page_size``, the group lists and ``_peers``).

    A segment's SWA pages are found by one representative slot per logical page (the pairs of
    its full pages), after the boundary trim of a page shared with the previous segment
    (``SEG-5``); unchecked, the guard checks both sides before the pairs or either side change.
    """

    full_attn_allocator: Any
    swa_attn_allocator: Any
    _pairs: PairTable
    checked: bool
    page_size: int
    free_group: list[torch.Tensor] | None
    swa_page_ids_group: list[torch.Tensor]
    _peers: Callable[[torch.Tensor], list[int]]

    def free_swa_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        """SWA pages of a row segment by stride representatives, in row order (``SWA-14``)."""
        heads = self._swa_heads([(free_index, start_pos)])
        if not self.checked:  # the guard: the SWA pages first, before the pairs change
            self._check_swa_heads(heads)
        self._release_swa_heads(heads)

    def free_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        self.free_segments([(free_index, start_pos)])

    def free_segments(self, segments: Sequence[Segment]) -> None:
        """Both sides of each segment; a shared boundary page once (``SWA-14``)."""
        heads = self._swa_heads(segments)
        if self.checked:
            table = self.full_attn_allocator._table
            assert table is not None
            table.check_segments(segments, self.page_size)
        else:  # the guard: both sides first, before the pairs or either side change
            self.full_attn_allocator.check_release_of_segments(segments)
            self._check_swa_heads(heads)
        self._release_swa_heads(heads)
        self.full_attn_allocator.free_segments(segments)

    def free_full_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        self.free_full_segments([(free_index, start_pos)])

    def free_full_segments(self, segments: Sequence[Segment]) -> None:
        """The full side of segments whose SWA peers are gone (``SWA-12``)."""
        if self.checked:
            for free_index, _ in segments:
                slots = host_list(free_index)
                hr.check_slots(slots, self.page_size, self.full_attn_allocator.num_pages)
                hr.check_peers_released(slots, self._peers(free_index), "free_full_segments")
        self.full_attn_allocator.free_segments(segments)

    def _swa_heads(self, segments: Sequence[Segment]) -> list[tuple[torch.Tensor, int]]:
        """Each segment after the boundary trim (``SEG-5``), validated in checked mode."""
        out: list[tuple[torch.Tensor, int]] = []
        prev_end: int | None = None
        for free_index, start_pos in segments:
            n = free_index.numel()
            if n == 0:
                continue
            if self.checked:
                rules.check_count(start_pos, "start_pos", "SEG-1")
                slots = host_list(free_index)
                hr.check_slots(slots, self.page_size, self.full_attn_allocator.num_pages)
                if not segment_layout_ok(slots, start_pos, self.page_size):
                    raise ContractViolation("SEG-1", f"slots {slots} do not follow a row layout "
                                                     f"from position {start_pos}")
            trim = trim_boundary(start_pos, n, prev_end, self.page_size)
            prev_end = start_pos + n
            if self.checked:
                self._check_swa_release(free_index[trim:], "free_swa_segment")
            out.append((free_index[trim:], start_pos + trim))
        return out

    def _head_reps(self, heads: list[tuple[torch.Tensor, int]]) -> list[torch.Tensor]:
        """One full-page representative slot per logical page of each non-empty head."""
        ps = self.page_size
        out = []
        for free_index, start_pos in heads:
            n = free_index.numel()
            if n == 0:
                continue
            if ps == 1:
                out.append(free_index)
            elif start_pos % ps == 0:
                out.append(free_index[::ps])
            else:
                out.append(free_index[torch.tensor(rep_offsets(n, start_pos, ps))])
        return out

    def _check_swa_heads(self, heads: list[tuple[torch.Tensor, int]]) -> None:
        """The SWA side's guard on the pages a segment free would release (read from the
        pairs, which are left as they are): ``FREE-1..3`` before anything changes."""
        reps = self._head_reps(heads)
        if reps and self.free_group is None:
            pages = torch.cat([self._pairs.gather(r.reshape(-1)) for r in reps])
            self.swa_attn_allocator.check_release_of_pages(pages // self.page_size)

    def _release_swa_heads(self, heads: list[tuple[torch.Tensor, int]]) -> None:
        for reps in self._head_reps(heads):
            self._release_swa_page_ids(self._pairs.take_rep_pages(reps))

    def _check_swa_release(self, free_index: torch.Tensor, call: str) -> None:
        slots = host_list(free_index)
        hr.check_slots(slots, self.page_size, self.full_attn_allocator.num_pages)
        hr.check_peers_live(slots, self._peers(free_index), call, self.page_size)

    def _release_swa_page_ids(self, pages: torch.Tensor) -> None:
        if self.free_group is not None:
            self.swa_page_ids_group.append(pages)
        else:
            self.swa_attn_allocator.free_page_ids(pages)
