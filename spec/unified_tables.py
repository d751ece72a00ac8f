"""One end sub-pool of a unified memory pool: virtual ids, physical pages, the two tables.

A sub-pool hands out *virtual* page ids; each live virtual page is bound to one physical page
through ``v2p`` and back through ``p2v`` (``UNI-4``: a bijection on live pages). A grow-up pool's
live pages lie in ``[min_page, watermark)``, a grow-down pool's in ``(watermark, pages)``.
Freeing leaves a *hole* in that span. Eager compaction closes holes at once, lazy compaction
keeps them for reuse and closes them on demand (``UNI-5``). Compaction moves a live page's
bytes to a hole and rebinds its virtual id there (``UNI-6``); ``content`` records whose bytes
each physical page holds, so the census can tell a lost move from a stale table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import unified_layout as ul


@dataclass
class EndPool:
    """One end sub-pool (``UNI-4``, ``UNI-5``, ``UNI-6``).

    Attributes:
        name: ``"full"`` or ``"swa"``.
        grows_up: True for the pool that grows up from the sink.
        min_page: first allocatable physical page (``UNI-2``).
        pages: physical pages of the pool's view of the buffer (``UNI-1``).
        page_bytes: bytes one page occupies.
        lazy: lazy compaction (holes kept) instead of eager.
        watermark: frontier page (see ``unified_layout.frontier_bytes``).
        v2p / p2v: the two tables, live pages only.
        holes: freed physical pages inside the span, ascending (lazy only).
        content: physical page -> virtual page whose bytes it holds (live pages only).
        moves: ``(src, dst)`` physical page copies issued, in order.
    """

    name: str
    grows_up: bool
    min_page: int
    pages: int
    page_bytes: int
    lazy: bool
    watermark: int = 0
    v2p: dict[int, int] = field(default_factory=dict)
    p2v: dict[int, int] = field(default_factory=dict)
    holes: list[int] = field(default_factory=list)
    content: dict[int, int] = field(default_factory=dict)
    moves: list[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Empty the pool: no live page, no hole, the frontier back at its end (``UNI-12``)."""
        self.watermark = self.min_page if self.grows_up else self.pages - 1
        self.v2p.clear()
        self.p2v.clear()
        self.holes.clear()
        self.content.clear()

    def span_pages(self) -> int:
        """Pages between the pool's end and its frontier: live pages plus holes (``UNI-5``)."""
        return ul.allocated_pages(self.grows_up, self.watermark, self.min_page, self.pages)

    def band(self) -> tuple[int, int]:
        """The pool's byte band ``(low, high)`` (``UNI-3``)."""
        return ul.frontier_bytes(self.grows_up, self.watermark, self.min_page, self.pages,
                                 self.page_bytes)

    def room(self) -> int:
        """Index room: pages the frontier may still advance by, bytes aside (``UNI-7``)."""
        return self.pages - self.min_page - self.span_pages()

    def take(self, num_pages: int) -> list[int]:
        """Physical pages for ``num_pages`` new virtual pages (``UNI-5``); the caller checked
        the bytes (``UNI-8``). Eager: the next pages past the frontier (ascending). Lazy: the
        frontier first extends by what the holes cannot give, then holes are drained from the
        pool's far end (lowest for grow-up, highest for grow-down), as SGLang does.
        """
        drain = min(num_pages, len(self.holes)) if self.lazy else 0
        extend = num_pages - drain
        if self.grows_up:
            fresh = list(range(self.watermark, self.watermark + extend))
            self.watermark += extend
        else:
            fresh = list(range(self.watermark - extend + 1, self.watermark + 1))
            if drain:
                fresh.reverse()
            self.watermark -= extend
        if drain == 0:
            return fresh
        if self.grows_up:
            drained, self.holes[:] = self.holes[:drain], self.holes[drain:]
        else:
            drained, self.holes[:] = self.holes[-drain:], self.holes[:-drain]
        return drained + fresh

    def bind(self, virtual_pages: list[int], physical_pages: list[int]) -> None:
        """Bind each virtual page to the physical page at the same position (``UNI-4``); the
        page's bytes become that virtual page's."""
        for v, p in zip(virtual_pages, physical_pages, strict=True):
            self.v2p[v] = p
            self.p2v[p] = v
            self.content[p] = v

    def release(self, virtual_pages: list[int]) -> None:
        """Unbind live virtual pages and compact (``UNI-5``): eager closes the holes at once
        (``compact``), lazy keeps them in ``holes``."""
        freed = [self.v2p.pop(v) for v in virtual_pages]
        for p in freed:
            del self.p2v[p]
            del self.content[p]
        if self.lazy:
            self.holes = sorted(self.holes + freed)
        else:
            self.compact(freed)

    def compact(self, freed: list[int]) -> None:
        """Close ``freed`` holes (``UNI-6``): the frontier retreats by their number; each live
        page left in the vacated band moves to a hole in the kept band (ascending pairs), its
        bytes copied and its virtual id rebound. No other page moves."""
        count = len(freed)
        if self.grows_up:
            new_wm = self.watermark - count
            vacated = range(new_wm, self.watermark)
            kept_holes = sorted(p for p in freed if p < new_wm)
        else:
            new_wm = self.watermark + count
            vacated = range(self.watermark + 1, new_wm + 1)
            kept_holes = sorted(p for p in freed if p > new_wm)
        survivors = [p for p in vacated if p in self.p2v]
        self.watermark = new_wm
        for src, dst in zip(survivors, kept_holes, strict=True):
            self.move(src, dst)

    def move(self, src: int, dst: int) -> None:
        """Copy page ``src``'s bytes to the free page ``dst`` and rebind its virtual id there
        (``UNI-6``): the virtual id keeps its bytes and its binding is the only one changed."""
        v = self.p2v.pop(src)
        self.content[dst] = self.content.pop(src)
        self.v2p[v] = dst
        self.p2v[dst] = v
        self.moves.append((src, dst))

    def flush(self) -> None:
        """Lazy compaction on demand (``UNI-6``): close every hole as eager compaction would."""
        holes, self.holes = self.holes, []
        self.compact(holes)

    def flush_idle(self, max_moves: int = 4096) -> int:
        """Lazy compaction at idle time (``UNI-6``; SGLang's non-urgent ``flush_opportunistic``):
        the holes touching the frontier are absorbed (it retreats past them); then the live
        pages nearest the frontier move, one by one, to the holes farthest from it, while the
        move goes toward the pool's end, at most ``max_moves``; the frontier stays where it is
        and each moved-from page becomes a hole. Returns the pages moved (0 under eager
        compaction or without holes)."""
        if not self.lazy or not self.holes:
            return 0
        holes = sorted(self.holes)
        step = -1 if self.grows_up else 1
        while holes and holes[-1 if self.grows_up else 0] == self.watermark + step:
            holes.pop(-1 if self.grows_up else 0)
            self.watermark += step
        live = sorted(self.p2v, reverse=self.grows_up)  # nearest the frontier first
        targets = holes if self.grows_up else holes[::-1]  # farthest from it first
        pairs: list[tuple[int, int]] = []
        for src, dst in zip(live, targets):
            if (src < dst if self.grows_up else src > dst) or len(pairs) >= max_moves:
                break
            pairs.append((src, dst))
        for src, dst in pairs:
            self.move(src, dst)
        kept = targets[len(pairs):]
        self.holes = sorted(kept + [src for src, _ in pairs])
        return len(pairs)

    def census(self) -> list[str]:
        """This pool's violations of ``UNI-4`` / ``UNI-5`` / ``UNI-6``; empty when healthy."""
        out: list[str] = []
        low, high = self.band()
        if not 0 <= low <= high <= self.pages * self.page_bytes:
            out.append(f"[{self.name}] UNI-3 frontier out of bounds: low={low}, high={high}")
        if any(self.p2v.get(p) != v for v, p in self.v2p.items()) or len(self.p2v) != len(
                self.v2p):
            out.append(f"[{self.name}] UNI-4 v2p and p2v are not inverse on live pages")
        inside = range(self.min_page, self.watermark) if self.grows_up else range(
            self.watermark + 1, self.pages)
        stray = sorted(p for p in self.p2v if p not in inside)
        if stray:
            out.append(f"[{self.name}] UNI-5 live pages outside the span: {stray}")
        bad_holes = sorted(p for p in self.holes if p not in inside or p in self.p2v)
        if bad_holes or len(set(self.holes)) != len(self.holes) or (self.holes and not self.lazy):
            out.append(f"[{self.name}] UNI-5 holes not free pages of the span: {self.holes}")
        if self.span_pages() != len(self.p2v) + len(self.holes):
            out.append(f"[{self.name}] UNI-5 span {self.span_pages()} != live {len(self.p2v)}"
                       f" + holes {len(self.holes)}")
        lost = sorted(v for v, p in self.v2p.items() if self.content.get(p) != v)
        if lost:
            out.append(f"[{self.name}] UNI-6 virtual pages whose bytes are elsewhere: {lost}")
        return out
