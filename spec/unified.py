"""Model of SGLang 0.5.23's ``UnifiedSWATokenToKVPoolAllocator``: full + SWA in one byte buffer.

The full sub-pool grows down from the buffer's top and owns the virtual page ids; the SWA
sub-pool grows up from the reserved sink and binds the same virtual ids to its own physical
pages (``UNI-10``). A virtual token id ``t`` lies on virtual page ``t // page_size``; the KV
bytes of ``t`` live at ``v2p[t // page_size] * page_size + t % page_size`` in each sub-pool's
rows (``UNI-11``). Capacity is counted in bytes (``UNI-7`` .. ``UNI-9``); ``census`` is
``verify_byte_accounting``: empty exactly when every invariant holds (``UNI-13``).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import unified_layout as ul
from . import unified_tokens as ut
from .contract import Divergence
from .errors import ContractViolation
from .unified_tables import EndPool
from .wording import counted


class UnifiedSWAModel:
    """A full + SWA unified composite over one byte buffer (``UNI-10``).

    Args:
        total_bytes: size of the shared buffer.
        page_size: tokens per page (``>= 1``).
        full_entry_bytes / swa_entry_bytes: bytes one token slot occupies in each sub-pool.
        lazy: lazy compaction (holes kept until an allocation needs them compacted).
        full_max_tokens / swa_max_tokens: the static caps the per-side views clamp to
            (``UNI-9``); default: each side's allocatable pages.

    Raises:
        ContractViolation: ``UNI-2`` when a sub-pool has no allocatable page above the sink.
    """

    def __init__(self, total_bytes: int, page_size: int, full_entry_bytes: int,
                 swa_entry_bytes: int, *, lazy: bool, full_max_tokens: int | None = None,
                 swa_max_tokens: int | None = None) -> None:
        self.total_bytes = total_bytes
        self.page_size = page_size
        self.lazy = lazy
        self.floor_bytes = ul.reserved_floor_bytes(max(full_entry_bytes, swa_entry_bytes), 0,
                                                   page_size)
        sides = []
        for name, entry, up in (("full", full_entry_bytes, False), ("swa", swa_entry_bytes, True)):
            pages = ul.num_pages(total_bytes, entry, page_size)
            min_page = ul.min_page_index(self.floor_bytes, entry, page_size)
            if pages <= min_page:
                raise ContractViolation("UNI-2", f"{name}: {counted(pages, 'page')}, none above the "
                                                f"sink (the first allocatable page is {min_page})")
            sides.append(EndPool(name, up, min_page, pages, page_size * entry, lazy))
        self.full, self.swa = sides
        self.full_max_tokens = full_max_tokens if full_max_tokens is not None else (
            self.full.pages - self.full.min_page) * page_size
        self.swa_max_tokens = swa_max_tokens if swa_max_tokens is not None else (
            self.swa.pages - self.swa.min_page) * page_size
        self.free_virtual: list[int] = []
        self.moves_blocked = False  # a move gate is closed (lazy only): no compaction may run
        self.clear()

    # -- lifecycle --

    def clear(self) -> None:
        """Back to empty (``UNI-12``): no live page, no hole, frontiers at the ends, the
        virtual ids ``[min_page, pages)`` of the full side free in ascending order."""
        self.full.clear()
        self.swa.clear()
        self.free_virtual = list(range(self.full.min_page, self.full.pages))

    # -- capacity --

    def gap_bytes(self) -> int:
        """Free bytes between the SWA (grow-up) and the full (grow-down) frontier (``UNI-7``)."""
        return ul.gap_bytes(self.swa.band()[1], self.full.band()[0])

    def available_size(self) -> int:
        """Tokens ``alloc`` takes now without compaction (``UNI-7``): eager
        ``eager_joint_pages``, lazy ``lazy_joint_pages``, times ``page_size``."""
        f, s = self.full, self.swa
        if not self.lazy:
            pages = ul.eager_joint_pages(self.gap_bytes(), f.page_bytes, s.page_bytes,
                                         f.room(), s.room())
        else:
            pages = ul.lazy_joint_pages(self.gap_bytes(), f.page_bytes, s.page_bytes,
                                        len(f.holes), len(s.holes), f.room(), s.room())
        return min(pages, len(self.free_virtual)) * self.page_size

    def schedulable_available_size(self, side: str) -> int:
        """Tokens one side could take after its neighbour's holes are compacted (``UNI-9``)."""
        pool, other = (self.full, self.swa) if side == "full" else (self.swa, self.full)
        credit = 0 if self.moves_blocked else len(other.holes) * other.page_bytes
        return ul.side_available_pages(self.gap_bytes() + credit, pool.page_bytes, pool.room(),
                                       len(pool.holes)) * self.page_size

    def full_available_size(self) -> int:
        """``min(static cap - live full tokens, schedulable full tokens)`` (``UNI-9``)."""
        return min(self.full_max_tokens - len(self.full.v2p) * self.page_size,
                   self.schedulable_available_size("full"))

    def swa_available_size(self) -> int:
        """``min(static cap - live SWA tokens, schedulable SWA tokens)`` (``UNI-9``)."""
        return min(self.swa_max_tokens - len(self.swa.v2p) * self.page_size,
                   self.schedulable_available_size("swa"))

    def fits(self, num_pages: int, *, compacted: bool, swa_pages: int | None = None) -> bool:
        """Whether ``num_pages`` new pages fit on both sides (``UNI-8``); ``compacted``: after
        both sides' holes are closed; ``swa_pages``: the SWA side takes only that many of them
        (default: all; ``alloc_extend_swa_tail``)."""
        f, s = self.full, self.swa
        swa = num_pages if swa_pages is None else swa_pages
        if num_pages > len(self.free_virtual):
            return False
        if not compacted:
            return ul.fits_pages(num_pages, swa, len(f.holes), len(s.holes), f.room(),
                                 s.room(), self.gap_bytes(), f.page_bytes, s.page_bytes)
        gap = ul.gap_bytes(s.min_page * s.page_bytes + len(s.v2p) * s.page_bytes,
                           f.pages * f.page_bytes - len(f.v2p) * f.page_bytes)
        return ul.fits_pages(num_pages, swa, 0, 0, f.room() + len(f.holes),
                             s.room() + len(s.holes), gap, f.page_bytes, s.page_bytes)

    def fits_after_reclaim(self, num_pages: int, full_reclaim: int, swa_reclaim: int, *,
                           compacted: bool = True) -> bool:
        """Whether ``num_pages`` new pages fit both sides once both are compacted and
        ``full_reclaim`` / ``swa_reclaim`` of their live pages are released (``UNI-8``'s
        eviction plan; ``(0, 0)`` is ``fits(num_pages, compacted=True)``). Each side's live
        pages plus the new ones stay within its pages above the sink and the virtual ids.
        ``compacted=False`` (a move gate is closed): the released pages become holes where
        they are, and the fit is ``fits(compacted=False)`` with those holes."""
        f, s = self.full, self.swa
        ids = f.pages - f.min_page
        full_back, swa_back = min(full_reclaim, len(f.v2p)), min(swa_reclaim, len(s.v2p))
        full_live, swa_live = len(f.v2p) - full_back, len(s.v2p) - swa_back
        if full_live + num_pages > ids or swa_live + num_pages > min(ids, s.pages - s.min_page):
            return False
        if not compacted:
            return num_pages <= len(self.free_virtual) + full_back and ul.fits_pages(
                num_pages, num_pages, len(f.holes) + full_back, len(s.holes) + swa_back,
                f.room(), s.room(), self.gap_bytes(), f.page_bytes, s.page_bytes)
        gap = ul.gap_bytes((s.min_page + swa_live) * s.page_bytes,
                           (f.pages - full_live) * f.page_bytes)
        return ul.fits_pages(num_pages, num_pages, 0, 0, ids - full_live,
                             s.pages - s.min_page - swa_live, gap, f.page_bytes, s.page_bytes)

    def reclaim_plan(self, num_tokens: int, full_evictable: int,
                     swa_evictable: int) -> tuple[int, int] | None:
        """The tokens ``evict_to_free_tokens`` asks a cache to evict, ``(full, swa)``
        (``UNI-8``): ``(0, 0)`` when ``ceil(num_tokens / page_size)`` pages fit after
        compaction; else, with at most ``min(live pages, evictable // page_size)`` pages a
        side, the least SWA reclaim that fits with all full reclaim, then the least full reclaim
        with that SWA reclaim, in whole pages (tokens); None when even all of it does not fit.
        While a move gate is closed (``moves_blocked``) the fits count no compaction.
        """
        ps = self.page_size
        need = -(-num_tokens // ps)

        def fits(full: int, swa: int) -> bool:
            return self.fits_after_reclaim(need, full, swa, compacted=not self.moves_blocked)

        if fits(0, 0):
            return (0, 0)
        most_full = min(len(self.full.v2p), full_evictable // ps)
        most_swa = min(len(self.swa.v2p), swa_evictable // ps)
        if not fits(most_full, most_swa):
            return None
        swa = next(n for n in range(most_swa + 1) if fits(most_full, n))
        full = next(n for n in range(most_full + 1) if fits(n, swa))
        return full * ps, swa * ps

    def _reserve(self, num_pages: int, swa_pages: int | None = None) -> list[int] | None:
        """Gate and take ``num_pages`` virtual pages bound on the full side, the last
        ``swa_pages`` of them (default: all) on the SWA side too (``UNI-8``); None, with
        nothing changed, when they do not fit even after compaction."""
        swa = num_pages if swa_pages is None else swa_pages
        if num_pages == 0:
            return []
        if not self.fits(num_pages, compacted=False, swa_pages=swa):
            if self.moves_blocked or not (
                    self.lazy and self.fits(num_pages, compacted=True, swa_pages=swa)):
                return None
            self.full.flush()
            self.swa.flush()
        virtual, self.free_virtual = self.free_virtual[:num_pages], self.free_virtual[num_pages:]
        self.full.bind(virtual, self.full.take(num_pages))
        self.swa.bind(virtual[num_pages - swa:], self.swa.take(swa))
        return virtual

    # -- allocation --

    def alloc(self, need_size: int) -> list[int] | None:
        """``need_size`` virtual token ids (a multiple of ``page_size``), whole pages bound on
        both sides (``UNI-8``); None when they do not fit, nothing changed.

        Raises:
            ContractViolation: ``UNI-8`` when ``need_size`` is not a multiple of ``page_size``.
        """
        if need_size < 0 or need_size % self.page_size:
            raise ContractViolation("UNI-8", f"need_size {need_size} is not whole pages")
        pages = self._reserve(need_size // self.page_size)
        if pages is None:
            return None
        return [v * self.page_size + k for v in pages for k in range(self.page_size)]

    def alloc_extend(self, prefix_lens: Sequence[int], seq_lens: Sequence[int],
                     last_locs: Sequence[int]) -> list[int] | None:
        """Grow each request from ``prefix_lens[i]`` to ``seq_lens[i]`` tokens (``UNI-8``): the
        rest of the prefix's last page continues ``last_locs[i]``, new pages are taken in
        request order. None when the new pages do not fit, nothing changed."""
        pages = self._reserve(sum(ut.extend_page_counts(prefix_lens, seq_lens, self.page_size)))
        if pages is None:
            return None
        return ut.extend_token_ids(prefix_lens, seq_lens, last_locs, pages, self.page_size)

    def alloc_extend_swa_tail(self, prefix_len: int, seq_len: int, last_loc: int,
                              swa_tail_len: int) -> list[int] | None:
        """One request grows from ``prefix_len`` to ``seq_len`` tokens as ``alloc_extend``
        does, but only the new pages holding its last ``swa_tail_len`` positions get an SWA
        page (``UNI-8``, a decode node's prealloc); the others read as the sink, as released
        pages do (``UNI-10``). The gate counts those SWA pages only. None when they do not fit.

        Raises:
            ContractViolation: ``UNI-8`` unless ``0 <= swa_tail_len <= seq_len - prefix_len``.
        """
        if not 0 <= swa_tail_len <= seq_len - prefix_len:
            raise ContractViolation("UNI-8", f"swa_tail_len {swa_tail_len} outside "
                                             f"0..{seq_len - prefix_len}")
        ps = self.page_size
        first_new, end = -(-prefix_len // ps), -(-seq_len // ps)
        swa = end - max(first_new, (seq_len - swa_tail_len) // ps) if swa_tail_len else 0
        pages = self._reserve(end - first_new, swa)
        if pages is None:
            return None
        return [last_loc + 1 + pos - prefix_len if pos < first_new * ps
                else pages[pos // ps - first_new] * ps + pos % ps
                for pos in range(prefix_len, seq_len)]

    def alloc_decode(self, seq_lens: Sequence[int],
                     last_locs: Sequence[int]) -> list[int] | None:
        """One token per request at position ``seq_lens[i] - 1`` (``UNI-8``): a new page when
        that position starts one, else ``last_locs[i] + 1``. None when the pages do not fit."""
        pages = self._reserve(sum(ut.decode_page_starts(seq_lens, self.page_size)))
        if pages is None:
            return None
        return ut.decode_token_ids(seq_lens, last_locs, pages, self.page_size)

    def check_decode_capacity(self, num_tokens: int) -> bool:
        """``check_decode_capacity(num_tokens=n, tree_cache=cache)``'s answer once its
        eviction hook ran (``UNI-15``; the hook is ``evict_to_free_tokens``, ``UNI-8``): the
        joint ``available_size() >= n``. Each decoded token takes a page's slot on both sides,
        so no single side's view (``full_available_size()``, ``UNI-9``) answers it."""
        return self.available_size() >= num_tokens

    def flush_opportunistic(self) -> int:
        """The idle-time compaction of both sides (``UNI-6``, :meth:`EndPool.flush_idle`):
        nothing under eager compaction or while a move gate is closed. Returns the pages moved
        (full side's, then SWA's)."""
        if not self.lazy or self.moves_blocked:
            return 0
        return self.full.flush_idle() + self.swa.flush_idle()

    # -- frees --

    def _live_pages(self, ids: Sequence[int]) -> list[int]:
        pages = sorted({t // self.page_size for t in ids})
        dead = [v for v in pages if v not in self.full.v2p]
        if dead:
            raise ContractViolation("UNI-11", f"virtual pages {dead} are not live")
        return pages

    def free(self, ids: Sequence[int]) -> None:
        """Free the pages of ``ids`` on both sides (SWA only where still bound) and return
        their virtual ids, ascending, to the back of the free list (``UNI-5``, ``UNI-10``).

        Raises:
            ContractViolation: ``UNI-11`` when a page is not live; nothing changed.
        """
        pages = self._live_pages(ids)
        self.swa.release([v for v in pages if v in self.swa.v2p])
        self.full.release(pages)
        self.free_virtual += pages

    def free_swa(self, ids: Sequence[int]) -> None:
        """Release the SWA pages of ``ids`` (the window slid past them), keeping the virtual ids
        and full pages live; already released pages are skipped (``UNI-10``).

        Raises:
            ContractViolation: ``UNI-11`` when a page is not live; nothing changed.
        """
        pages = self._live_pages(ids)
        self.swa.release([v for v in pages if v in self.swa.v2p])

    # -- translation and census --

    def translate(self, ids: Sequence[int], side: str = "full") -> list[int]:
        """Physical row of each live virtual token id in one sub-pool (``UNI-11``);
        ``translate_kv_indices_for_transfer`` is the full side's. A released SWA page reads as
        the sink row 0.

        Raises:
            ContractViolation: ``UNI-11`` when an id's page is not live (a freed id has no row).
        """
        pool = self.full if side == "full" else self.swa
        ps = self.page_size
        self._live_pages(ids)
        return [pool.v2p[t // ps] * ps + t % ps if t // ps in pool.v2p else 0 for t in ids]

    def census(self) -> list[str]:
        """``verify_byte_accounting`` of the model (``UNI-13``): every violation of UNI-3..6
        and UNI-10, as text; empty exactly when the state is healthy."""
        out = self.full.census() + self.swa.census()
        swa_high, full_low = self.swa.band()[1], self.full.band()[0]
        if swa_high > full_low or not ul.bands_ordered([self.swa.band(), self.full.band()]):
            out.append(f"[chain] UNI-3 swa high frontier {swa_high} crosses full low {full_low}")
        if self.swa.band()[0] < self.floor_bytes or self.full.band()[0] < self.floor_bytes:
            out.append("[chain] UNI-2 a band reaches into the reserved sink")
        if not set(self.swa.v2p) <= set(self.full.v2p):
            out.append("[chain] UNI-10 SWA binds a virtual page the full side does not hold")
        ids = set(range(self.full.min_page, self.full.pages))
        if (set(self.free_virtual) & set(self.full.v2p)
                or set(self.free_virtual) | set(self.full.v2p) != ids
                or len(set(self.free_virtual)) != len(self.free_virtual)):
            out.append("[chain] UNI-10 free virtual ids and live ones do not partition the ids")
        return out

    def check_invariants(self) -> None:
        """Raise ``AssertionError`` listing the census when the state is unhealthy."""
        problems = self.census()
        assert not problems, problems


def fresh_rows_read_zero(slots: Sequence[int], dirty: Sequence[bool], side: str) -> None:
    """``DATA-4``: every token slot an allocation hands out on ``side`` reads as zeros before
    its request writes it (its page was zeroed when handed out); ``dirty[i]``: some byte of
    slot ``slots[i]``'s K/V rows is not zero.

    Raises:
        Divergence: ``DATA-4`` naming the first dirty slot.
    """
    bad = [s for s, d in zip(slots, dirty, strict=True) if d]
    if bad:
        raise Divergence("DATA-4", f"{side} side: the freshly handed-out token {bad[0]} reads "
                                   f"old bytes (not zeros) before it is written "
                                   f"({counted(len(bad), 'slot')} of {len(slots)})")
