"""The hybrid reference model's segment releases (``SWA-12``, ``SWA-14``), as a mixin of
:class:`~kvpool.spec.hybrid.HybridModel`: the SWA side of a row segment by one representative
slot per full page touched, after the boundary trim of a page shared with the previous segment
(``SEG-5``), then (``free_segments``) the full side's own segment free."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import hybrid_rules as hr
from . import rules
from .errors import ContractViolation
from .model import AllocatorModel
from .segments import rep_offsets, segment_layout_ok, trim_boundary
from .window import full_page_slots

Segments = Sequence[tuple[Sequence[int], int]]


class HybridSegmentReleases:
    """Mixin for :class:`~kvpool.spec.hybrid.HybridModel` (needs its two sides, page size, SWA
    page group and the pair steps it names below)."""

    full: AllocatorModel
    page_size: int
    swa_page_group: list[int]
    _peers: Callable[[Sequence[int]], list[int]]
    peer_of: Callable[[int], int]
    _clear_pairs: Callable[[list[int]], list[int]]
    _release_swa: Callable[[list[int], list[int]], None]

    def free_swa_segment(self, free_index: Sequence[int], *, start_pos: int) -> None:
        """The SWA side of a row segment: one SWA page per full page touched, in row order, no
        sort (SGLang's ``free_page_ids``; ``SWA-14``)."""
        self._free_swa_segments([(free_index, start_pos)])

    def free_segment(self, free_index: Sequence[int], *, start_pos: int) -> None:
        """``free_swa_segment`` then the full side's ``free_segment`` (``SWA-14``)."""
        self.free_segments([(free_index, start_pos)])

    def free_segments(self, segments: Segments) -> None:
        """Both sides of several segments of one row; a shared boundary page once (``SWA-14``)."""
        heads = self._check_swa_segments(segments)
        rules.check_segments(segments, page_size=self.page_size, num_pages=self.full.num_pages,
                             status_of=self.full.status_of)
        self._release_swa_segments(heads)
        self.full.free_segments(segments)

    def free_full_segment(self, free_index: Sequence[int], *, start_pos: int) -> None:
        """The full side of a segment whose SWA peers are gone (``SWA-12``, ``SWA-14``)."""
        self.free_full_segments([(free_index, start_pos)])

    def free_full_segments(self, segments: Segments) -> None:
        """The full side of several segments whose SWA peers are gone (``SWA-12``, ``SWA-14``)."""
        for free_index, _ in segments:
            hr.check_slots(free_index, self.page_size, self.full.num_pages)
            hr.check_peers_released(free_index, self._peers(free_index), "free_full_segments")
        self.full.free_segments(segments)

    def _free_swa_segments(self, segments: Segments) -> None:
        self._release_swa_segments(self._check_swa_segments(segments))

    def _check_swa_segments(self, segments: Segments) -> list[tuple[list[int], int]]:
        """The untrimmed part of each segment (``SEG-5``), its slots checked (``SWA-11``)."""
        out: list[tuple[list[int], int]] = []
        prev_end: int | None = None
        for free_index, start_pos in segments:
            idx = list(free_index)
            if not idx:
                continue
            rules.check_count(start_pos, "start_pos", "SEG-1")
            hr.check_slots(idx, self.page_size, self.full.num_pages)
            if not segment_layout_ok(idx, start_pos, self.page_size):
                raise ContractViolation("SEG-1", f"slots {idx} do not follow a row layout "
                                                 f"from position {start_pos}")
            trim = trim_boundary(start_pos, len(idx), prev_end, self.page_size)
            prev_end = start_pos + len(idx)
            hr.check_peers_live(idx[trim:], self._peers(idx[trim:]), "free_swa_segment", self.page_size)
            out.append((idx[trim:], start_pos + trim))
        return out

    def _release_swa_segments(self, heads: list[tuple[list[int], int]]) -> None:
        for idx, start in heads:
            if not idx:
                continue
            reps = [idx[k] for k in rep_offsets(len(idx), start, self.page_size)]
            pages = [self.peer_of(r) // self.page_size for r in reps]
            self._clear_pairs(full_page_slots(reps, self.page_size))
            self._release_swa(pages, self.swa_page_group)
