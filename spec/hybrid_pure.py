"""The reference model of SGLang 0.5.23's ``PureSWATokenToKVPoolAllocator`` (``SWA-21..25``).

A model whose every layer is sliding-window attention keeps one KV pool: the hybrid allocator's
full and SWA sides are the same token pool (page size 1 only), the full -> SWA mapping is the
identity, and the three capacity views are one number. :class:`PureSWAModel` is the hybrid
model's declared variant: the same surface (``free_swa``, ``free_full``, ``translate_...``), with
the rules of SPEC.md section 15 that name two pools read for one. A token's slot is released
with its SWA side (``free_swa``, ``free``, the SWA segment frees); ``free_full`` then has nothing
left to release. Every public method validates its whole call first and raises
:class:`~kvpool.spec.errors.ContractViolation` without changing anything (``ERR-1``).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import hybrid_rules as hr
from . import rules
from .census import describe_pages
from .errors import ContractViolation
from .hybrid import HybridModel, HybridResizeConfig
from .hybrid_segments import Segments
from .model import AllocatorModel
from .rules import OWNED
from .window import RELEASED


def check_pure_page_size(page_size: int) -> None:
    """A pure sliding-window pool is a token pool: page size 1 only (``SWA-21``).

    pre: -4 <= page_size <= 64
    post: page_size == 1
    raises: ContractViolation
    """
    if page_size != 1:
        raise ContractViolation("SWA-21", f"a pure sliding-window pool has page size 1, got "
                                          f"{page_size}")


def check_pure_resize(size: int, size_swa: int) -> int:
    """``resize`` of the one pool: both sizes >= 0 (``LIFE-2``) and equal (``SWA-25``).

    pre: -4 <= size <= 64 and -4 <= size_swa <= 64
    post: __return__ == size == size_swa
    raises: ContractViolation
    """
    size = rules.check_count(size, "full size", "LIFE-2")
    size_swa = rules.check_count(size_swa, "swa size", "LIFE-2")
    if size != size_swa:
        raise ContractViolation("SWA-25", f"a pure sliding-window pool has one size: full "
                                          f"{size} and swa {size_swa} differ")
    return size


class PureSWAModel(HybridModel):
    """One token pool serving as both sides (``SWA-21``): ``full is swa``.

    ``mapping`` stays empty: the mapping is the identity (``SWA-22``), read through
    :meth:`mapping_pairs`; a slot "has its SWA peer" while it is held and not deferred by the
    open group, so ``SWA-11`` reads as "every slot released is held, none named twice".

    inv: self.full is self.swa and self.page_size == 1
    inv: self.full_available_size() == self.swa_available_size() == self.available_size()
    """

    def __init__(self, size_swa: int, page_size: int = 1, *, need_sort: bool = False) -> None:
        check_pure_page_size(page_size)
        self.page_size = 1
        self.need_sort = need_sort
        self.full = self.swa = AllocatorModel(size_swa, 1, need_sort=need_sort)
        self.clear()

    # -- lifecycle (SWA-25) ------------------------------------------------------------------
    def clear(self) -> None:
        """The one pool cleared, no open group."""
        self.full.clear()
        self.mapping = {}
        self.swa_page_group, self.swa_free_group = [], []

    def resize(self, config: HybridResizeConfig) -> None:
        """The one pool's new size (both sizes equal, ``SWA-25``), then ``clear()``; the identity
        mapping covers the new size."""
        self.full.size = check_pure_resize(config.full_max_total_num_tokens,
                                           config.swa_max_total_num_tokens)
        self.clear()

    # -- queries (SWA-22, SWA-23) ------------------------------------------------------------
    def peer_of(self, full_slot: int) -> int:
        """The slot itself while it is held and not deferred, else ``RELEASED``; -1 is -1."""
        if full_slot == -1:
            return -1
        return full_slot if self.full.status_of(full_slot) == OWNED else RELEASED

    def _peers(self, slots: Sequence[int]) -> list[int]:
        return [self.peer_of(s) for s in slots]

    def mapping_pairs(self) -> dict[int, int]:
        """The identity on every slot of the pool (``SWA-22``), held or free.

        post: all(k == v for k, v in __return__.items())
        """
        return {s: s for s in range(1, self.full.size + 1)}

    def paired_slots(self) -> list[int]:
        """The slots whose SWA KV is live: the held ones."""
        return [s for s in range(1, self.full.size + 1) if self.full.status_of(s) == OWNED]

    def translate_loc_from_full_to_swa(self, kv_indices: Sequence[int]) -> list[int]:
        """``kv_indices`` themselves (``SWA-22``); a slot on a free pool page is a caller error
        as in the hybrid (``SWA-16``).

        post: __return__ == list(kv_indices)
        raises: rules.ContractViolation
        """
        hr.check_translate(kv_indices, self.full.status_of, 1, self.full.num_pages)
        return list(kv_indices)

    # -- allocation (SWA-21, SWA-23) ---------------------------------------------------------
    def alloc(self, need_size: int) -> list[int] | None:
        """``need_size`` slots of the one pool; None iff it has fewer free + staged (``SWA-23``).

        post: (__return__ is None) == (need_size > __old__.self.available_size())
        raises: rules.ContractViolation
        """
        rules.check_alloc(need_size, 1)
        return self.full.alloc(need_size)

    def alloc_extend(self, prefix_lens: Sequence[int], seq_lens: Sequence[int],
                     last_loc: Sequence[int], extend_num_tokens: int | None = None) -> list[int] | None:
        """Not available: page size 1 allocates by ``alloc`` (``SWA-21``)."""
        raise NotImplementedError("SWA-21: a pure sliding-window pool allocates by alloc()")

    def alloc_decode(self, seq_lens: Sequence[int], last_loc: Sequence[int]) -> list[int] | None:
        """Not available: page size 1 allocates by ``alloc`` (``SWA-21``)."""
        raise NotImplementedError("SWA-21: a pure sliding-window pool allocates by alloc()")

    def alloc_extend_swa_tail(self, prefix_lens: Sequence[int], seq_lens: Sequence[int],
                              last_loc: Sequence[int], extend_num_tokens: int,
                              swa_tail_len: int) -> list[int] | None:
        """Not available (``SWA-21``)."""
        raise NotImplementedError("SWA-21: a pure sliding-window pool allocates by alloc()")

    # -- release (SWA-24) --------------------------------------------------------------------
    def _release(self, slots: list[int], call: str) -> None:
        """Validate, then one token free of ``slots`` in order (deferred inside a group)."""
        if not slots:
            return
        hr.check_slots(slots, 1, self.full.num_pages)
        hr.check_peers_live(slots, self._peers(slots), call, 1)
        self.full.free(slots)

    def free_swa(self, free_index: Sequence[int]) -> None:
        """Release the slots: their SWA side is their only side (``SWA-24``)."""
        self._release(list(free_index), "free_swa")

    def free(self, free_index: Sequence[int]) -> None:
        """Release the slots, as ``free_swa`` (``SWA-24``)."""
        self._release(list(free_index), "free")

    def free_full(self, free_index: Sequence[int]) -> None:
        """Nothing to release: the slots went with their SWA side (``SWA-24``). Slot ids are
        checked (``FREE-1``, ``FREE-2``); a slot may be held again by another request."""
        hr.check_slots(list(free_index), 1, self.full.num_pages)

    def free_swa_segment(self, free_index: Sequence[int], *, start_pos: int) -> None:
        """``free_swa`` of the segment's slots (``SWA-24``)."""
        self.free_segments([(free_index, start_pos)])

    def free_segment(self, free_index: Sequence[int], *, start_pos: int) -> None:
        """``free`` of the segment's slots (``SWA-24``)."""
        self.free_segments([(free_index, start_pos)])

    def free_segments(self, segments: Segments) -> None:
        """Every segment's slots released as one ``free`` in row order (``SWA-24``)."""
        for _, start_pos in segments:
            rules.check_count(start_pos, "start_pos", "SEG-1")
        self._release([s for idx, _ in segments for s in idx], "free_segments")

    def free_full_segment(self, free_index: Sequence[int], *, start_pos: int) -> None:
        """Nothing to release (``SWA-24``)."""
        self.free_full_segments([(free_index, start_pos)])

    def free_full_segments(self, segments: Segments) -> None:
        """Nothing to release; slot ids and starts checked (``SWA-24``)."""
        for free_index, start_pos in segments:
            rules.check_count(start_pos, "start_pos", "SEG-1")
            self.free_full(free_index)

    def free_group_begin(self) -> None:
        """Open the pool's group (``GROUP-1``)."""
        self.full.free_group_begin()

    def free_group_end(self) -> None:
        """Release what the group deferred, in enqueue order, as one free (``SWA-24``)."""
        self.full.free_group_end()

    # -- diagnostics -------------------------------------------------------------------------
    def swa_deferred_pages(self) -> list[int]:
        """Slots the open group releases at its end."""
        return self.full.deferred_pages()

    def verify_byte_accounting(self) -> list[str]:
        """The one pool's census (``CAP-3``, prefixed ``pool:``; ``SWA-25``)."""
        return [f"pool: {p}" for p in self.full.verify_byte_accounting()]

    def check_invariants(self) -> None:
        """Assert the pool's invariants and that both sides are the one pool."""
        self.full.check_invariants()
        problems = self.verify_byte_accounting()
        if self.full is not self.swa:
            problems.append("SWA-21: the full and SWA sides are two objects")
        assert not problems, "\n".join(problems) + "\n" + self.debug_print()

    def debug_print(self) -> str:
        """The one pool and its deferred slots."""
        return (f"pure swa need_sort={self.need_sort}\npool: {self.full.debug_print()}\n"
                f"  deferred: {describe_pages(self.swa_deferred_pages())}")

    def snapshot(self) -> tuple[object, ...]:
        """Everything observable, comparable with ``==``."""
        return (self.full.snapshot(),)


__all__ = ["PureSWAModel", "check_pure_page_size", "check_pure_resize"]
