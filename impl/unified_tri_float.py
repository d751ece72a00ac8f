"""The SWA float of a tri-pool: a span of pages between the state end and the full end.

A middle sub-pool of ``[ state (grow-up end) | SWA (float) | full (grow-down end) ]``
(``UNI-14``), placed as SGLang 0.5.23's ``FloatMultiEndedAllocator`` places it:

- its span ``[low, high)`` holds live pages and holes (freed pages stay where they are, in both
  compaction modes); an empty float (no live page) parks at the top of its grid, holds no hole
  and is *transparent*: its neighbours see through it;
- a take reuses holes first (the whole request from one end of the ascending hole list, the
  next request's from the other end), then extends the span toward the roomier gap (the other
  side when that one is short); from empty it places the new run at the midpoint of the free
  region between the neighbours' frontiers;
- boundary holes are absorbed (the span shrinks past them, no copy) only by a flush;
- pages move only on demand (:meth:`FloatSubPool.make_room`), as SGLang moves them.

The neighbours' frontiers come from the composite (``below()``: the state end's high byte,
``above()``: the full end's low byte). Vectorised with numpy except the on-demand moves,
which walk the span once.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .unified_end import Mover

__all__ = ["FloatSubPool"]

_EMPTY = np.empty(0, dtype=np.int64)


class FloatSubPool:
    """The SWA float (module docstring); the same table interface as
    :class:`~kvpool.impl.unified_end.EndSubPool` (``v2p``, ``p2v``, ``take``, ``bind``,
    ``release``, ``rows``, ``census``).

    Args:
        min_page / num_pages / page_bytes: the geometry (``UNI-1``, ``UNI-2``).
        num_virtual: virtual page ids ``[0, num_virtual)`` it may bind.
        mover: issues page copies ``(dst, src)``.
        below / above: the byte frontiers of the members below and above.
        blocked: whether a move gate forbids page copies now.
    """

    grows_up = False
    lazy = False  # holes in both modes; never drained by an end's compaction

    def __init__(self, min_page: int, num_pages: int, page_bytes: int, num_virtual: int,
                 mover: Mover, below: Callable[[], int], above: Callable[[], int],
                 blocked: Callable[[], bool]) -> None:
        self.name = "swa"
        self.min_page, self.num_pages, self.page_bytes = min_page, num_pages, page_bytes
        self.mover, self.below, self.above, self.blocked = mover, below, above, blocked
        self.v2p = np.full(num_virtual, -1, dtype=np.int64)
        self.p2v = np.full(num_pages, -1, dtype=np.int64)
        self.last_run: tuple[int, int] | None = None
        self.next_end = "low"  # the hole list's end the next draining take starts at
        self.clear()

    # -- state --

    def clear(self) -> None:
        """Empty and parked (``UNI-12``); the end the next draining take starts at is kept (as
        SGLang keeps it)."""
        self.v2p.fill(-1)
        self.p2v.fill(-1)
        self.live = 0
        self._park()

    def _park(self) -> None:
        self.low = self.high = self.num_pages
        self.holes = _EMPTY
        self.holes_sorted = True
        self.dirty = False

    @property
    def transparent(self) -> bool:
        """No live page: the neighbours see through the float."""
        return self.live == 0

    def span(self) -> tuple[int, int]:
        return self.low, self.high

    def span_pages(self) -> int:
        return self.high - self.low

    def band(self) -> tuple[int, int]:
        """The byte band ``(low, high)`` of the span."""
        return self.low * self.page_bytes, self.high * self.page_bytes

    def num_holes(self) -> int:
        return len(self.holes)

    def region(self) -> tuple[int, int]:
        """Pages ``[lo, hi)`` of the free region between the neighbours' frontiers (``lo``
        rounded up to this grid, ``hi`` down, within the allocatable pages)."""
        pb = self.page_bytes
        return max(-(-self.below() // pb), self.min_page), min(self.above() // pb,
                                                               self.num_pages)

    def gaps(self) -> tuple[int, int]:
        """Free pages below and above the span (the whole region, twice, when empty)."""
        lo, hi = self.region()
        if self.transparent:
            room = max(0, hi - lo)
            return room, room
        return max(0, self.low - lo), max(0, hi - self.high)

    # -- hand-out --

    def _take_holes(self, count: int) -> np.ndarray:
        if count == len(self.holes):
            taken, self.holes = self.holes, _EMPTY
            self.holes_sorted = True
            return taken
        if not self.holes_sorted:
            self.holes, self.holes_sorted = np.sort(self.holes, kind="stable"), True
        if self.next_end == "low":
            taken, self.holes = self.holes[:count], self.holes[count:]
        else:
            taken, self.holes = self.holes[-count:], self.holes[:-count]
        return taken

    def take(self, num_pages: int) -> np.ndarray | None:
        """Physical pages for ``num_pages`` new virtual pages (module docstring); None, nothing
        changed, when the span cannot extend on either side."""
        drain = min(num_pages, len(self.holes))
        extend = num_pages - drain
        fresh = _EMPTY
        self.last_run = None
        if extend:
            lo, hi = self.region()
            if self.transparent:
                if extend > hi - lo:
                    return None
                start = lo + (hi - lo - extend) // 2
                self.low, self.high = start, start + extend
            else:
                gap_low, gap_high = self.low - lo, hi - self.high
                sides = ("high", "low") if gap_high >= gap_low else ("low", "high")
                for side in sides:
                    if side == "high" and extend <= gap_high:
                        start, self.high = self.high, self.high + extend
                        break
                    if side == "low" and extend <= gap_low:
                        start = self.low = self.low - extend
                        break
                else:
                    return None
            fresh = np.arange(start, start + extend, dtype=np.int64)
            if not drain:
                self.last_run = (start, start + extend)
                return fresh
        drained = self._take_holes(drain).copy() if drain else _EMPTY
        if drain:
            self.next_end = "high" if self.next_end == "low" else "low"
        return np.concatenate((drained, fresh)) if extend else drained

    def bind(self, virtual: np.ndarray, physical: np.ndarray,
             run: tuple[int, int] | None = None) -> None:
        """``v2p[virtual[i]] = physical[i]`` and back (``UNI-4``)."""
        self.v2p[virtual] = physical
        self.p2v[physical] = virtual
        self.live += len(virtual)

    # -- release and on-demand moves --

    def release(self, virtual: np.ndarray) -> None:
        """Unbind live virtual pages: their pages become holes where they are (appended in
        release order); an emptied float parks."""
        if len(virtual) == 0:
            return
        freed = self.v2p[virtual]
        self.v2p[virtual] = -1
        self.p2v[freed] = -1
        self.live -= len(virtual)
        self.holes = np.concatenate((self.holes, freed)) if len(self.holes) else freed.copy()
        self.holes_sorted = len(self.holes) < 2
        self.dirty = True
        if self.live == 0:
            self._park()

    def flush(self, *, urgent: bool = True) -> int:
        """Absorb the holes touching the span's boundaries (no copy); the pages given back.
        Nothing when no page was freed since the last absorb."""
        if self.live == 0:
            self._park()
            return 0
        if not self.dirty or len(self.holes) == 0:
            self.dirty = False
            return 0
        self.dirty = False
        before = self.high - self.low
        holes = set(self.holes.tolist())
        changed = False
        while self.low in holes:
            holes.remove(self.low)
            self.low += 1
            changed = True
        while self.high - 1 in holes:
            holes.remove(self.high - 1)
            self.high -= 1
            changed = True
        if changed:
            self.holes, self.holes_sorted = np.array(sorted(holes), dtype=np.int64), True
        return before - (self.high - self.low)

    def _move(self, src: list[int], dst: list[int]) -> None:
        s, d = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
        moved = self.p2v[s].copy()
        self.mover(d, s)
        self.v2p[moved] = d
        self.p2v[d] = moved
        self.p2v[s] = -1

    def make_room(self, side: str, min_bytes: int) -> int:
        """Open at least ``min_bytes`` of free bytes between the span's ``side`` (``"low"`` or
        ``"high"``) and the neighbour there by moving the fewest live boundary pages (onto holes
        on the far side first, then onto the far gap; every live page packed against the far
        edge when that is what it takes); the bytes open on ``side`` afterwards. Nothing moves
        when a move gate is closed, the float is empty, the side has the room already, or the
        ask cannot be met."""
        pb = self.page_bytes
        gap_low, gap_high = self.gaps()
        have = (gap_low if side == "low" else gap_high) * pb
        if self.blocked() or have >= min_bytes or self.transparent:
            return have
        lo, hi = self.region()
        live = self.live
        if (hi - lo - live) * pb < min_bytes:
            return have
        need = -(-(min_bytes - have) // pb)
        holes = set(self.holes.tolist())
        live_pages = [p for p in range(self.low, self.high) if p not in holes]
        if need >= live:
            final = list(range(lo, lo + live)) if side == "high" else list(range(hi - live, hi))
            self._relocate(live_pages, final)
        else:
            srcs = (live_pages[::-1] if side == "high" else live_pages)[:need]
            if side == "high":
                dsts = sorted(h for h in holes if h < min(srcs))[:len(srcs)]
            else:
                dsts = sorted((h for h in holes if h > max(srcs)), reverse=True)[:len(srcs)]
            fresh = len(srcs) - len(dsts)
            if fresh > (gap_low if side == "high" else gap_high):
                return have
            if fresh and side == "high":
                dsts += list(range(self.low - 1, self.low - 1 - fresh, -1))
            elif fresh:
                dsts += list(range(self.high, self.high + fresh))
            self._move(srcs, dsts)
            final_live = sorted((set(live_pages) - set(srcs)) | set(dsts))
            self.low, self.high = final_live[0], final_live[-1] + 1
            kept = set(final_live)
            self.holes = np.array([p for p in range(self.low, self.high) if p not in kept],
                                  dtype=np.int64)
            self.holes_sorted, self.dirty = True, True
            self.flush()
        gap_low, gap_high = self.gaps()
        return (gap_low if side == "low" else gap_high) * pb

    def _relocate(self, live_pages: list[int], final: list[int]) -> None:
        """Order-preserving moves of the live pages onto ``final`` (one batch when sources and
        destinations are disjoint, else one page at a time toward the move)."""
        pairs = [(s, d) for s, d in zip(live_pages, final) if s != d]
        if pairs and {s for s, _ in pairs}.isdisjoint({d for _, d in pairs}):
            self._move([s for s, _ in pairs], [d for _, d in pairs])
        elif pairs:
            ordered = pairs if final[0] <= live_pages[0] else pairs[::-1]
            for s, d in ordered:
                self._move([s], [d])
        self.low, self.high = final[0], final[-1] + 1
        self.holes, self.holes_sorted = _EMPTY, True

    # -- translation and census --

    def rows(self, ids: np.ndarray, page_size: int) -> np.ndarray:
        """Physical token rows of virtual token ids; an unbound page reads as row 0."""
        phys = self.v2p[ids // page_size] if page_size > 1 else self.v2p[ids]
        if page_size == 1:
            return np.where(phys >= 0, phys, 0)
        return np.where(phys >= 0, phys * page_size + ids % page_size, 0)

    def census(self) -> list[str]:
        """The float's violations of ``UNI-4`` and ``UNI-5`` (span = live + holes, holes free
        pages of the span, a parked float holding nothing); empty when healthy."""
        out: list[str] = []
        bound_v = np.flatnonzero(self.v2p >= 0)
        phys = self.v2p[bound_v]
        bad = (phys >= self.num_pages) | (phys < 0)
        if bad.any() or (self.p2v[phys[~bad]] != bound_v[~bad]).any() or int(
                (self.p2v >= 0).sum()) != len(bound_v) or len(bound_v) != self.live:
            out.append("[swa] UNI-4 v2p and p2v are not inverse on live pages")
        live_p = np.flatnonzero(self.p2v >= 0)
        if ((live_p < self.low) | (live_p >= self.high)).any():
            out.append("[swa] UNI-5 live float pages outside its span")
        holes = self.holes
        inside = (holes >= self.low) & (holes < self.high)
        if (~inside).any() or (self.p2v[holes[inside]] >= 0).any() or len(
                np.unique(holes)) != len(holes):
            out.append(f"[swa] UNI-5 holes not free pages of the span: {sorted(holes.tolist())}")
        if self.span_pages() != len(live_p) + len(holes):
            out.append(f"[swa] UNI-5 float span {self.span_pages()} != live {len(live_p)} + "
                       f"holes {len(holes)}")
        return out
