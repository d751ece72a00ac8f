"""The reference model of SGLang 0.5.23's ``SWATokenToKVPoolAllocator`` (``SWA-*``).

A hybrid allocator pairs each full-attention slot with a sliding-window (SWA) slot whose KV can
die first. Two :class:`~kvpool.spec.model.AllocatorModel` pools (token at page size 1, paged
above) page in step, joined by ``mapping`` (full slot -> SWA slot; absent means released).
Every public method validates its whole call first and raises
:class:`~kvpool.spec.errors.ContractViolation` without changing anything (``ERR-1``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from . import hybrid_rules as hr
from . import rules
from .census import describe_pages
from .errors import ContractViolation
from .hybrid_segments import HybridSegmentReleases
from .layout import merge_bound
from .model import AllocatorModel
from .window import RELEASED, full_page_slots, peer_pages


class HybridTreeCache(Protocol):
    """The capacity hooks' cache (``SWA-17``): evict for two shortfalls in one call."""

    def evict(self, num_tokens: int, swa_num_tokens: int) -> None: ...


@dataclass(frozen=True)
class HybridResizeConfig:
    """What the hybrid ``resize`` reads from SGLang's server config (``SWA-18``)."""

    full_max_total_num_tokens: int
    swa_max_total_num_tokens: int


class HybridModel(HybridSegmentReleases):
    """Both pools, the mapping and the SWA side's open group, in SGLang's reference order.

    ``full`` and ``swa`` are the two pools; ``mapping`` holds the live pairs (``SWA-1``);
    ``swa_page_group`` / ``swa_free_group`` hold the SWA pages that the open free group releases
    at its end (page-id frees, then ``free()``-shaped frees; ``SWA-15``). The full side defers
    through its own group.

    inv: not self.verify_byte_accounting()
    inv: self.full.page_size == self.swa.page_size == self.page_size
    """

    def __init__(self, size: int, size_swa: int, page_size: int = 1, *,
                 need_sort: bool = False) -> None:
        self.page_size = page_size
        self.need_sort = need_sort
        self.full = AllocatorModel(size, page_size, need_sort=need_sort)
        self.swa = AllocatorModel(size_swa, page_size, need_sort=need_sort)
        self.clear()

    # -- lifecycle -------------------------------------------------------------------------
    def clear(self) -> None:
        """Both pools cleared, every pair released, no open group (``SWA-18``)."""
        self.full.clear()
        self.swa.clear()
        self.mapping: dict[int, int] = {}
        self.swa_page_group: list[int] = []
        self.swa_free_group: list[int] = []

    def resize(self, config: HybridResizeConfig) -> None:
        """New sizes for both pools, then ``clear()`` (``SWA-18``)."""
        size = rules.check_count(config.full_max_total_num_tokens, "full size", "LIFE-2")
        size_swa = rules.check_count(config.swa_max_total_num_tokens, "swa size", "LIFE-2")
        self.full.size, self.swa.size = size, size_swa
        self.clear()

    # -- queries (SWA-5) ---------------------------------------------------------------------
    @property
    def size(self) -> int:
        """``min(size_full, size_swa)``."""
        return min(self.full.size, self.swa.size)

    def full_available_size(self) -> int:
        """The full pool's ``available_size()``."""
        return self.full.available_size()

    def swa_available_size(self) -> int:
        """The SWA pool's ``available_size()``."""
        return self.swa.available_size()

    def available_size(self) -> int:
        """``min(full, swa)``: a token needs a slot on both sides (``SWA-5``).

        post: __return__ == min(self.full.available_size(), self.swa.available_size())
        """
        return min(self.full.available_size(), self.swa.available_size())

    def peer_of(self, full_slot: int) -> int:
        """The SWA slot paired with ``full_slot``, or ``RELEASED`` (0); ``-1`` maps to ``-1``."""
        return -1 if full_slot == -1 else self.mapping.get(full_slot, RELEASED)

    def _peers(self, slots: Sequence[int]) -> list[int]:
        return [self.peer_of(s) for s in slots]

    def mapping_pairs(self) -> dict[int, int]:
        """The live pairs as ``full_to_swa_index_mapping`` lists them (``SWA-1``)."""
        return dict(self.mapping)

    def paired_slots(self) -> list[int]:
        """The full slots whose SWA KV is live (they have a peer)."""
        return list(self.mapping)

    def translate_loc_from_full_to_swa(self, kv_indices: Sequence[int]) -> list[int]:
        """The mapped SWA slot of each index: 0 where the peer is released, -1 for -1 (``SWA-16``).

        post: __return__ == [self.peer_of(s) for s in kv_indices]
        raises: rules.ContractViolation
        """
        hr.check_translate(kv_indices, self.full.status_of, self.page_size, self.full.num_pages)
        return [self.peer_of(s) for s in kv_indices]

    # -- allocation --------------------------------------------------------------------------
    def alloc(self, need_size: int) -> list[int] | None:
        """Page size 1: ``need_size`` slots on both sides, paired in order (``SWA-6``).

        None iff either side cannot cover it (free + staged), nothing changed.

        post: (__return__ is None) == (need_size > __old__.self.available_size())
        raises: rules.ContractViolation, NotImplementedError
        """
        if self.page_size != 1:
            raise NotImplementedError("SWA-6: the hybrid alloc() is for page size 1; use alloc_extend")
        rules.check_alloc(need_size, 1)
        if need_size > self.available_size():
            return None
        full, swa = self.full.alloc(need_size), self.swa.alloc(need_size)
        assert full is not None and swa is not None
        self.mapping.update(zip(full, swa))
        return full

    def alloc_extend(self, prefix_lens: Sequence[int], seq_lens: Sequence[int],
                     last_loc: Sequence[int], extend_num_tokens: int | None = None) -> list[int] | None:
        """Extend both sides in step; return the full slots (``SWA-7``).

        The same page count ``n`` on both sides; None iff ``n`` exceeds either side's free +
        staged pages, nothing changed. Else the full side extends from ``last_loc``, the SWA
        side from ``translate(last_loc)``, each merging by its own bound (``SORT-2``), and every
        new full slot is paired with the SWA slot of the same position.

        post: __return__ is None or len(__return__) == sum(seq_lens) - sum(prefix_lens)
        post: __return__ is None or all(self.peer_of(f) != 0 for f in __return__)
        raises: rules.ContractViolation, NotImplementedError
        """
        if self.page_size == 1:
            raise NotImplementedError("SWA-7: alloc_extend is for page size > 1 (EXTEND-9)")
        new_pages = rules.check_extend(prefix_lens, seq_lens, last_loc, page_size=self.page_size,
                                       num_pages=self.full.num_pages, status_of=self.full.status_of,
                                       extend_num_tokens=extend_num_tokens)
        hr.check_swa_last_loc(prefix_lens, seq_lens, self._peers(last_loc), self.page_size)
        bound = merge_bound(sum(seq_lens) - sum(prefix_lens), len(seq_lens), self.page_size)
        return self._extend_both(prefix_lens, seq_lens, last_loc, new_pages, bound)

    def alloc_extend_swa_tail(self, prefix_lens: Sequence[int], seq_lens: Sequence[int],
                              last_loc: Sequence[int], extend_num_tokens: int,
                              swa_tail_len: int) -> list[int] | None:
        """PD decode pre-allocation: the full side extends one request as ``alloc_extend``
        does; the SWA side gets fresh pages for the last ``swa_tail_len`` tokens only (``SWA-20``).

        None iff the full side is short of its new pages or the SWA side of
        ``ceil(swa_tail_len / ps)`` pages, nothing changed. Else the full side lays out the row
        from ``last_loc`` (merging by its bound, SORT-2), the SWA side lays out a fresh row of
        ``swa_tail_len`` slots (as ``alloc_extend`` with prefix 0 and ``last_loc = -1``), the
        tail's full slots are paired with it in order and the slots before the tail have no
        peer (their SWA KV is never written: the window starts at the tail).

        post: __return__ is None or len(__return__) == extend_num_tokens
        post: __return__ is None or all(self.peer_of(f) != 0 for f in __return__[len(__return__) - swa_tail_len:])
        raises: rules.ContractViolation, NotImplementedError
        """
        if self.page_size == 1:
            raise NotImplementedError("SWA-20: alloc_extend_swa_tail is for page size > 1")
        swa_pages = hr.check_swa_tail(prefix_lens, seq_lens, extend_num_tokens, swa_tail_len,
                                      self.page_size)
        new_pages = rules.check_extend(prefix_lens, seq_lens, last_loc, page_size=self.page_size,
                                       num_pages=self.full.num_pages, status_of=self.full.status_of,
                                       extend_num_tokens=extend_num_tokens)
        if (sum(new_pages) > len(self.full.free_pages) + len(self.full.staged)
                or swa_pages > len(self.swa.free_pages) + len(self.swa.staged)):
            return None
        full = self._lay_out_side(self.full, prefix_lens, seq_lens, last_loc, new_pages,
                                  merge_bound(extend_num_tokens, 1, self.page_size))
        if swa_tail_len == 0:
            return full
        swa = self._lay_out_side(self.swa, [0], [swa_tail_len], [-1], [swa_pages],
                                 merge_bound(swa_tail_len, 1, self.page_size))
        self._clear_pairs(full[:len(full) - swa_tail_len])
        self.mapping.update(zip(full[len(full) - swa_tail_len:], swa))
        return full

    @staticmethod
    def _lay_out_side(side: AllocatorModel, prefix_lens: Sequence[int], seq_lens: Sequence[int],
                      last_loc: Sequence[int], new_pages: list[int], bound: int) -> list[int]:
        """One side's extend after the None decision: merge when ``bound`` (SORT-2) exceeds its
        free list, then the layout."""
        if bound > len(side.free_pages):
            side.merge_and_sort_free()
        slots = side._lay_out(prefix_lens, seq_lens, last_loc, new_pages)
        assert slots is not None  # merge_bound is safe (Z3 lemma merge_bound_safe)
        return slots

    def alloc_decode(self, seq_lens: Sequence[int], last_loc: Sequence[int]) -> list[int] | None:
        """One slot per request on both sides for position ``seq - 1`` (``SWA-9``).

        None iff the new pages exceed either side's free + staged pages, and then neither side
        changed (SGLang 0.5.23 allocates the full side first and leaks it, bug B14).

        post: __return__ is None or len(__return__) == len(seq_lens)
        raises: rules.ContractViolation, NotImplementedError
        """
        if self.page_size == 1:
            raise NotImplementedError("SWA-9: alloc_decode is for page size > 1 (EXTEND-9)")
        new_pages = rules.check_decode(seq_lens, last_loc, page_size=self.page_size,
                                       num_pages=self.full.num_pages, status_of=self.full.status_of)
        prefix = [s - 1 for s in seq_lens]
        hr.check_swa_last_loc(prefix, seq_lens, self._peers(last_loc), self.page_size)
        return self._extend_both(prefix, seq_lens, last_loc, new_pages, len(seq_lens))

    def _extend_both(self, prefix_lens: Sequence[int], seq_lens: Sequence[int],
                     last_loc: Sequence[int], new_pages: list[int], bound: int) -> list[int] | None:
        n = sum(new_pages)
        if any(n > len(side.free_pages) + len(side.staged) for side in (self.full, self.swa)):
            return None
        swa_last_loc = [self.peer_of(loc) for loc in last_loc]
        full = self._lay_out_side(self.full, prefix_lens, seq_lens, last_loc, new_pages, bound)
        swa = self._lay_out_side(self.swa, prefix_lens, seq_lens, swa_last_loc, new_pages, bound)
        self.mapping.update(zip(full, swa))
        return full

    # -- release -----------------------------------------------------------------------------
    def free_swa(self, free_index: Sequence[int]) -> None:
        """Release the SWA peers of ``free_index`` and clear their pairs (``SWA-10``).

        Page size > 1: the pairs of every slot of the full pages touched are cleared and their
        SWA pages released as one sorted distinct ``free()``; page size 1: the peer slots in
        order. Inside a group the pairs are cleared now and the pages released at its end
        (SGLang PR #36381, bug B10). Every slot must still have its peer (``SWA-11``).
        """
        idx = list(free_index)
        if not idx:
            return
        hr.check_slots(idx, self.page_size, self.full.num_pages)
        hr.check_peers_live(idx, self._peers(idx), "free_swa", self.page_size)
        pages = peer_pages(self._clear_pairs(full_page_slots(idx, self.page_size)), self.page_size)
        if self.page_size == 1:
            self._release_swa(pages, self.swa_page_group)
        else:
            self._release_swa(pages, self.swa_free_group)

    def free_full(self, free_index: Sequence[int]) -> None:
        """Release the full side alone; every slot's SWA peer must be gone (``SWA-12``).

        Then exactly a full-pool ``free()`` (``FREE-*``), deferred inside a group.
        """
        idx = list(free_index)
        if not idx:
            return
        hr.check_slots(idx, self.page_size, self.full.num_pages)
        hr.check_peers_released(idx, self._peers(idx), "free_full")
        self.full.free(idx)

    def free(self, free_index: Sequence[int]) -> None:
        """``free_swa`` then ``free_full`` of the same slots, validated as one call (``SWA-13``)."""
        idx = list(free_index)
        if not idx:
            return
        hr.check_slots(idx, self.page_size, self.full.num_pages)
        hr.check_peers_live(idx, self._peers(idx), "free", self.page_size)
        self.full.pages_freed_by(idx)  # FREE-3 before anything moves
        self.free_swa(idx)
        self.full.free(idx)

    def _clear_pairs(self, slots: list[int]) -> list[int]:
        """Gather and clear the pairs of ``slots`` (duplicates read as released the second time)."""
        return [self.mapping.pop(s, RELEASED) for s in slots]

    def _release_swa(self, pages: list[int], group: list[int]) -> None:
        if not pages:
            return
        if self.full.free_group is not None:
            group.extend(pages)
        else:
            self.swa._release(pages)

    def free_group_begin(self) -> None:
        """Open a group on both sides; groups do not nest (``GROUP-1``, ``SWA-15``)."""
        self.full.free_group_begin()
        self.swa_page_group, self.swa_free_group = [], []

    def free_group_end(self) -> None:
        """Release the SWA page ids, then the SWA ``free()`` pages (sorted distinct), then end
        the full side's group (``SWA-15``). A no-op without an open group (``GROUP-2``)."""
        page_ids, freed = self.swa_page_group, self.swa_free_group
        self.swa_page_group, self.swa_free_group = [], []
        if page_ids:
            self.swa._release(page_ids)
        if freed:
            self.swa._release(sorted(set(freed)))
        self.full.free_group_end()

    # -- capacity hooks (SWA-17) -------------------------------------------------------------
    def evict_to_free_tokens(self, tree_cache: HybridTreeCache | None, num_tokens: int) -> None:
        """One eviction request for both shortfalls, when either is positive (``SWA-17``)."""
        full = max(0, num_tokens - self.full_available_size())
        swa = max(0, num_tokens - self.swa_available_size())
        if tree_cache is not None and (full or swa):
            tree_cache.evict(full, swa)

    def check_decode_capacity(self, *, num_tokens: int, tree_cache: HybridTreeCache | None) -> bool:
        """Evict for ``num_tokens``, then whether both sides fit them (``SWA-17``)."""
        self.evict_to_free_tokens(tree_cache, num_tokens)
        return self.available_size() >= num_tokens

    # -- diagnostics -------------------------------------------------------------------------
    def swa_deferred_pages(self) -> list[int]:
        """SWA pages the open group releases at its end: page ids as named, then the ``free()``
        pages once each."""
        return self.swa_page_group + sorted(set(self.swa_free_group))

    def verify_byte_accounting(self) -> list[str]:
        """Both pools' census (``CAP-3``, prefixed ``full:`` / ``swa:``) and ``SWA-2..4`` (``SWA-19``)."""
        return ([f"full: {p}" for p in self.full.verify_byte_accounting()]
                + [f"swa: {p}" for p in self.swa.verify_byte_accounting()]
                + hr.mapping_census(self.mapping.items(), page_size=self.page_size,
                                    full_status_of=self.full.status_of,
                                    swa_status_of=self.swa.status_of,
                                    swa_num_pages=self.swa.num_pages,
                                    swa_deferred=self.swa_deferred_pages()))

    def check_invariants(self) -> None:
        """Assert both pools' invariants and ``SWA-2..4``; dumps the state on failure."""
        self.full.check_invariants()
        self.swa.check_invariants()
        problems = self.verify_byte_accounting()
        if self.full.free_group is None and (self.swa_page_group or self.swa_free_group):
            problems.append("GROUP-2: SWA pages deferred without an open group")
        assert not problems, "\n".join(problems) + "\n" + self.debug_print()

    def debug_print(self) -> str:
        """Both pools and the mapping, one line each."""
        pairs = " ".join(f"{f}>{s}" for f, s in sorted(self.mapping.items()))
        return (f"hybrid ps={self.page_size} need_sort={self.need_sort}\n"
                f"full: {self.full.debug_print()}\nswa: {self.swa.debug_print()}\n"
                f"  swa deferred: {describe_pages(self.swa_deferred_pages())}\n"
                f"  mapping: {pairs or '-'}")

    def snapshot(self) -> tuple[object, ...]:
        """Everything observable, comparable with ``==``."""
        return (self.full.snapshot(), self.swa.snapshot(), tuple(sorted(self.mapping.items())),
                tuple(self.swa_page_group), tuple(self.swa_free_group))

    def copy(self) -> HybridModel:
        """An independent deep copy."""
        return copy.deepcopy(self)


__all__ = ["ContractViolation", "HybridModel", "HybridResizeConfig", "HybridTreeCache"]
