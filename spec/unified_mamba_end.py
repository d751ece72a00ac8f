"""An end sub-pool whose lazy holes keep SGLang's order, so that placement is exact (``UMB-7``).

:class:`~kvpool.spec.unified_tables.EndPool` keeps its holes sorted and compacts a flush as eager
compaction does: the contract leaves lazy placement free. SGLang 0.5.23's ``MultiEndedAllocator``
fixes it, and its non-urgent flush (``flush_opportunistic``) moves pages by placement, so the
frontier a flush leaves depends on it. This end pool places as SGLang does:

- a lazy release appends the freed pages to the holes in the order freed;
- a take that drains only some holes first sorts them (the rest stay sorted), one that drains
  all takes them in their order;
- a flush sorts the holes, absorbs those touching the frontier, then pairs the live page nearest
  the frontier with the hole farthest from it while the move goes toward the pool's end
  (at most ``max_moves`` when not urgent). Urgent: the frontier then retreats past every hole
  and none is left. Idle: the frontier stays; the unused holes (ascending) and then the
  moved-from pages (in move order) are the holes.
"""

from __future__ import annotations

from .unified_tables import EndPool

MAX_IDLE_MOVES = 4096  # SGLang's SGLANG_LAZY_COMPACTION_MAX_MOVES_PER_CALL default


class OrderedEndPool(EndPool):
    """:class:`EndPool` with SGLang's hole order and flush pairing (``UMB-7``)."""

    def release(self, virtual_pages: list[int]) -> None:
        """Unbind live virtual pages; lazy appends their pages to the holes in that order,
        eager compacts at once (``UNI-5``, ``UNI-6``)."""
        if not self.lazy:
            super().release(virtual_pages)
            return
        freed = [self.v2p.pop(v) for v in virtual_pages]
        for p in freed:
            del self.p2v[p]
            del self.content[p]
        self.holes = self.holes + freed

    def take(self, num_pages: int) -> list[int]:
        """As :meth:`EndPool.take`; a partial drain first sorts the holes."""
        if self.lazy and 0 < num_pages < len(self.holes):
            self.holes.sort()
        return super().take(num_pages)

    def _walk(self, max_moves: int | None) -> tuple[list[int], list[tuple[int, int]]]:
        """Absorb the holes touching the frontier; return the interior holes (farthest from
        the frontier first) and the ``(src, dst)`` moves of one flush walk."""
        holes = sorted(self.holes)
        step = -1 if self.grows_up else 1
        while holes and holes[-1 if self.grows_up else 0] == self.watermark + step:
            holes.pop(-1 if self.grows_up else 0)
            self.watermark += step
        live = sorted(self.p2v, reverse=self.grows_up)  # nearest the frontier first
        targets = holes if self.grows_up else holes[::-1]  # farthest from it first
        pairs: list[tuple[int, int]] = []
        for src, dst in zip(live, targets):
            if (src < dst if self.grows_up else src > dst) or (
                    max_moves is not None and len(pairs) >= max_moves):
                break
            pairs.append((src, dst))
        return targets, pairs

    def flush(self) -> None:
        """The urgent flush (SGLang's ``flush_for_allocation``): every hole closes."""
        if not self.holes:
            return
        targets, pairs = self._walk(None)
        for src, dst in pairs:
            self.move(src, dst)
        self.watermark += -len(targets) if self.grows_up else len(targets)
        self.holes = []

    def flush_idle(self, max_moves: int = MAX_IDLE_MOVES) -> int:
        """The idle-time flush (SGLang's ``flush_opportunistic`` of one end); returns the pages
        moved (0 under eager compaction or without holes)."""
        if not self.lazy or not self.holes:
            return 0
        targets, pairs = self._walk(max_moves)
        for src, dst in pairs:
            self.move(src, dst)
        self.holes = sorted(targets[len(pairs):]) + [src for src, _ in pairs]
        return len(pairs)
