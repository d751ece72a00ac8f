"""One end sub-pool of a unified buffer: page tables, frontier, holes and compaction.

A sub-pool hands out physical pages for virtual page ids and keeps the two tables as numpy
arrays (``v2p`` by virtual page, ``int64``; ``p2v`` by physical page, ``int32`` while the virtual
ids fit; ``-1`` unbound). A grow-up
pool's span is ``[min_page, watermark)``, a grow-down pool's ``(watermark, num_pages)``
(``UNI-5``). Placement follows SGLang 0.5.23's ``MultiEndedAllocator``:

- eager: a take is the next run past the frontier (ascending); a release closes its holes at
  once, the survivors of the vacated band (ascending) copied onto the holes of the kept band
  (ascending), one ``move_physical_pages`` call (``UNI-6``);
- lazy: released pages become holes (appended in release order); a take first extends the
  frontier by what the holes cannot give, then drains holes from the far end of the sorted list
  (the whole list, unsorted, when it takes all); an urgent flush absorbs the holes touching the
  frontier, then copies the topmost survivors onto the lowest holes (grow-up; mirrored
  grow-down) until they cross and retreats past every hole; a non-urgent flush makes at most
  ``max_moves`` copies, keeps the frontier, and the copied-from pages become holes.

Every method is vectorised over pages: no Python loop per page or token.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

__all__ = ["EndSubPool", "Mover"]

Mover = Callable[[np.ndarray, np.ndarray], None]  # (dst_pages, src_pages)
_EMPTY = np.empty(0, dtype=np.int64)


class EndSubPool:
    """One end sub-pool (``UNI-4`` .. ``UNI-6``).

    Args:
        name: ``"full"`` or ``"swa"``.
        grows_up: grows up from the sink (else down from the top).
        min_page / num_pages / page_bytes: the geometry (``UNI-1``, ``UNI-2``).
        num_virtual: virtual page ids ``[0, num_virtual)`` it may bind.
        lazy: lazy compaction.
        mover: issues page copies ``(dst, src)`` (the byte store's ``move_physical_pages``).
        max_moves: copies a non-urgent flush makes at most.
    """

    def __init__(self, name: str, grows_up: bool, min_page: int, num_pages: int,
                 page_bytes: int, num_virtual: int, lazy: bool, mover: Mover,
                 max_moves: int = 4096) -> None:
        self.name, self.grows_up, self.lazy = name, grows_up, lazy
        self.min_page, self.num_pages, self.page_bytes = min_page, num_pages, page_bytes
        self.mover, self.max_moves = mover, max_moves
        self.v2p = np.full(num_virtual, -1, dtype=np.int64)
        # p2v holds virtual page ids (< num_virtual): int32 where they fit, half the bytes
        p2v_dtype = np.int32 if num_virtual < 2**31 else np.int64
        self.p2v: np.ndarray = np.full(num_pages, -1, dtype=p2v_dtype)
        self.holes = _EMPTY
        self.watermark = 0
        self.live = 0
        self.last_run: tuple[int, int] | None = None  # the last take's pages, when one run
        self.clear()

    # -- state --

    def clear(self) -> None:
        """Empty: nothing bound, no hole, the frontier back at its end (``UNI-12``)."""
        self.v2p.fill(-1)
        self.p2v.fill(-1)
        self.holes = _EMPTY
        self.live = 0
        self.watermark = self.min_page if self.grows_up else self.num_pages - 1

    def span(self) -> tuple[int, int]:
        """The span ``[low, high)`` in physical pages."""
        if self.grows_up:
            return self.min_page, self.watermark
        return self.watermark + 1, self.num_pages

    def span_pages(self) -> int:
        """Pages of the span: live plus holes (``UNI-5``; ``unified_layout.allocated_pages``)."""
        if self.grows_up:
            return self.watermark - self.min_page
        return self.num_pages - 1 - self.watermark

    def band(self) -> tuple[int, int]:
        """The byte band ``(low, high)`` (``UNI-3``; ``unified_layout.frontier_bytes``)."""
        if self.grows_up:
            return self.min_page * self.page_bytes, self.watermark * self.page_bytes
        return (self.watermark + 1) * self.page_bytes, self.num_pages * self.page_bytes

    def room(self) -> int:
        """Pages the frontier may still advance by, bytes aside (``UNI-7``)."""
        if self.grows_up:
            return self.num_pages - self.watermark
        return self.watermark + 1 - self.min_page

    def num_holes(self) -> int:
        return len(self.holes)

    # -- hand-out --

    def take(self, num_pages: int) -> np.ndarray:
        """Physical pages for ``num_pages`` new virtual pages; the caller checked the bytes
        and index room (``UNI-8``). See the module docstring for the order. ``last_run`` is
        set to ``(low, high)`` when they are the ascending run ``[low, high)``, else None."""
        drain = min(num_pages, len(self.holes)) if self.lazy else 0
        extend = num_pages - drain
        wm = self.watermark
        if self.grows_up:
            self.watermark = wm + extend
            run = (wm, wm + extend)
        else:
            self.watermark = wm - extend
            run = (wm - extend + 1, wm + 1)
        fresh = np.arange(run[0], run[1], dtype=np.int64)
        if drain == 0:
            self.last_run = run
            return fresh
        self.last_run = None
        if not self.grows_up:
            fresh = fresh[::-1]
        if drain == len(self.holes):
            drained, self.holes = self.holes, _EMPTY
        else:
            ordered = np.sort(self.holes, kind="stable")
            if self.grows_up:
                drained, self.holes = ordered[:drain], ordered[drain:]
            else:
                drained, self.holes = ordered[-drain:], ordered[:-drain]
        return np.concatenate((drained, fresh)) if extend else drained

    def bind(self, virtual: np.ndarray, physical: np.ndarray,
             run: tuple[int, int] | None = None) -> None:
        """``v2p[virtual[i]] = physical[i]`` and back (``UNI-4``); ``run``: ``physical`` is the
        ascending run ``[low, high)`` (``last_run``), written back as one slice."""
        self.v2p[virtual] = physical
        if run is not None:
            self.p2v[run[0]:run[1]] = virtual
        else:
            self.p2v[physical] = virtual.astype(self.p2v.dtype)  # a cast first: faster
        self.live += len(virtual)

    # -- release and compaction --

    def release(self, virtual: np.ndarray) -> None:
        """Unbind live virtual pages (distinct, each bound here) and compact: eager closes the
        holes at once, lazy appends them to the holes (``UNI-5``)."""
        if len(virtual) == 0:
            return
        freed = self.v2p[virtual]
        self.v2p[virtual] = -1
        self.p2v[freed] = -1
        self.live -= len(virtual)
        if self.lazy:
            self.holes = np.concatenate((self.holes, freed)) if len(self.holes) else freed
            return
        count = len(freed)
        if self.grows_up:
            new_wm = low = self.watermark - count
            band = self.p2v[new_wm:self.watermark]
        else:
            new_wm = self.watermark + count
            low = self.watermark + 1
            band = self.p2v[low:new_wm + 1]
        self.watermark = new_wm
        survivors = (band >= 0).nonzero()[0]
        if len(survivors) == 0:
            return  # the freed pages were the vacated band: nothing to move
        moved = band[survivors]  # their virtual pages
        src = survivors + low
        dst = np.sort(freed[freed < new_wm] if self.grows_up else freed[freed > new_wm],
                      kind="stable")  # a run-merging sort: rows are released as runs
        self.mover(dst, src)  # as move(src, dst), the vacated band cleared as one slice
        self.v2p[moved] = dst
        self.p2v[dst] = moved
        band.fill(-1)

    def move(self, src: np.ndarray, dst: np.ndarray) -> None:
        """Copy the live pages ``src`` onto the free pages ``dst`` and rebind their virtual ids
        there (``UNI-6``); ``src`` becomes unbound."""
        moved = self.p2v[src]
        self.mover(dst, src)
        self.v2p[moved] = dst
        self.p2v[dst] = moved
        self.p2v[src] = -1

    def flush(self, *, urgent: bool = True) -> int:
        """Lazy compaction (see the module docstring); returns the number of page copies."""
        if not self.lazy or len(self.holes) == 0:
            return 0
        holes = np.sort(self.holes, kind="stable")
        wm, count = self.watermark, len(holes)
        if self.grows_up:  # absorb the holes touching the frontier
            if int(holes[-1]) != wm - 1:
                n = 0
            elif int(holes[0]) == wm - count:  # all of them: one run below the frontier
                n = count
            else:
                n = _leading_true(holes[::-1] == wm - 1 - np.arange(count))
            self.watermark, holes = wm - n, holes[:count - n]
        else:
            if int(holes[0]) != wm + 1:
                n = 0
            elif int(holes[-1]) == wm + count:
                n = count
            else:
                n = _leading_true(holes == wm + 1 + np.arange(count))
            self.watermark, holes = wm + n, holes[n:]
        if len(holes) == 0:
            self.holes = _EMPTY
            return 0
        low, high = self.span()
        live = np.flatnonzero(self.p2v[low:high] >= 0) + low
        if self.grows_up:
            survivors, targets = live[::-1], holes
        else:
            survivors, targets = live, holes[::-1]
        m = min(len(survivors), len(targets))
        ok = (survivors[:m] > targets[:m]) if self.grows_up else (survivors[:m] < targets[:m])
        k = _leading_true(ok)
        if not urgent:
            k = min(k, self.max_moves)
        src, dst = survivors[:k].copy(), targets[:k].copy()
        if k:
            self.move(src, dst)
        if urgent:
            self.watermark += -len(holes) if self.grows_up else len(holes)
            self.holes = _EMPTY
        else:
            rest = holes[k:] if self.grows_up else holes[:len(holes) - k]
            self.holes = np.concatenate((rest, src))
        return k

    # -- translation --

    def rows(self, ids: np.ndarray, page_size: int) -> np.ndarray:
        """Physical token rows of virtual token ids: ``v2p[t // ps] * ps + t % ps``; an
        unbound page reads as the sink row 0 (``UNI-10``, ``UNI-11``)."""
        if page_size == 1:
            phys = self.v2p[ids]
            return np.where(phys >= 0, phys, 0)
        phys = self.v2p[ids // page_size]
        return np.where(phys >= 0, phys * page_size + ids % page_size, 0)

    def pages_tensor(self, pages: np.ndarray, device: torch.device | str) -> torch.Tensor:
        """``pages`` as an int64 tensor on ``device``."""
        return torch.from_numpy(np.ascontiguousarray(pages)).to(device)

    # -- census --

    def census(self) -> list[str]:
        """This sub-pool's violations of ``UNI-3`` .. ``UNI-5``; empty when healthy."""
        out: list[str] = []
        low, high = self.band()
        if not 0 <= low <= high <= self.num_pages * self.page_bytes:
            out.append(f"[{self.name}] UNI-3 frontier out of bounds: low={low}, high={high}")
        bound_v = np.flatnonzero(self.v2p >= 0)
        phys = self.v2p[bound_v]
        bad = (phys >= self.num_pages) | (phys < 0)
        if bad.any() or (self.p2v[phys[~bad]] != bound_v[~bad]).any() or int(
                (self.p2v >= 0).sum()) != len(bound_v) or len(bound_v) != self.live:
            out.append(f"[{self.name}] UNI-4 v2p and p2v are not inverse on live pages")
        s_low, s_high = self.span()
        live_p = np.flatnonzero(self.p2v >= 0)
        stray = live_p[(live_p < s_low) | (live_p >= s_high)]
        if len(stray):
            out.append(f"[{self.name}] UNI-5 live pages outside the span: {stray.tolist()}")
        holes = self.holes
        in_span = (holes >= s_low) & (holes < s_high)
        bad_holes = (~in_span).any() or (self.p2v[holes[in_span]] >= 0).any() or len(
            np.unique(holes)) != len(holes) or (len(holes) and not self.lazy)
        if bad_holes:
            out.append(f"[{self.name}] UNI-5 holes not free pages of the span: "
                       f"{sorted(holes.tolist())}")
        if self.span_pages() != len(live_p) + len(holes):
            out.append(f"[{self.name}] UNI-5 span {self.span_pages()} != live {len(live_p)} + "
                       f"holes {len(holes)}")
        return out


def _leading_true(flags: np.ndarray) -> int:
    """How many of ``flags`` are True before the first False (all of them: ``len``)."""
    if len(flags) == 0:
        return 0
    first = int(flags.argmin())
    return len(flags) if flags[first] else first
