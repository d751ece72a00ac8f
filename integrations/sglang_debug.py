"""SGLang 0.5.23's debug switches on kvpool's allocators, with kvpool's clause names.

Two switches, read as SGLang reads them (the table is ``docs/sglang-debug-checks.md``):

- **``debug_mode``** per allocator (``SGLANG_DEBUG_MEMORY_POOL`` at construction, assignable
  later, as SGLang's tests do): SGLang's paged debug asserts -- an unaligned ``alloc``
  (``ALLOC-1``), a ``last_loc`` at the wrong in-page offset (``EXTEND-3`` / ``DECODE-3``), a
  segment whose stride representatives miss a page (``SEG-1``), a release that would put a page
  in the free list twice (``FREE-3``, at the call where SGLang's check runs: a grouped ``free()``
  at ``free_group_end``) -- and, on the hybrid allocator when its SWA side's ``debug_mode`` is
  on, SGLang's check that a segment's SWA pages are exactly the mapped pages (``SWA-3``).
  SGLang's token allocator has no debug checks, and neither has kvpool's. Off, nothing is
  installed: :class:`DebugSwitch` puts the checking methods on the instance only while it is on.
- **``SGLANG_INVARIANT_CHECK``** (SGLang's levels; unset falls back to
  ``SGLANG_ENABLE_ASYNC_ASSERT`` as STRICT): the hybrid allocator's ``expect`` checks -- a slot
  given to an SWA release whose peer is already gone (``SWA-11``; SGLang's ``swa.peer_mapped``,
  fatal from WARN) and one given to ``free_full`` whose peer is still mapped (``SWA-12``;
  ``swa.peer_released``, fatal at STRICT, a warning at WARN). Off (neither variable set, the
  SWA side's ``debug_mode`` off), a hybrid release call costs one more Python frame, two
  ``os.environ`` lookups and (segments) an attribute read.

Every failure is a :class:`ContractAssertionError` (an ``AssertionError`` carrying the clause),
raised before anything changes -- SGLang's own paged asserts run after the free list changed.
The checks read the host copy of what they check (a sync on CUDA, as SGLang's do). kvpool's
``checked=True`` stays the stricter mode: it checks every caller rule on every call.
"""

from __future__ import annotations

import logging
import os
import types
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import torch
from kvpool.impl.checked import host_list
from kvpool.spec.errors import ContractViolation
from kvpool.spec.segments import rep_offsets

__all__ = ["PAGED_DEBUG_CHECKS", "ContractAssertionError", "DebugSwitch", "HybridDebugChecks",
           "invariant_level"]

logger = logging.getLogger(__name__)

INVARIANT_ENV, LEGACY_ASSERT_ENV = "SGLANG_INVARIANT_CHECK", "SGLANG_ENABLE_ASYNC_ASSERT"
OFF, WARN, STRICT = 0, 1, 2  # SGLang's InvariantCheckLevel values


class ContractAssertionError(ContractViolation, AssertionError):  # type: ignore[misc]
    """A caller error (clause in ``.clause``) raised where SGLang's debug mode asserts."""


def _fail(clause: str, detail: str) -> None:
    raise ContractAssertionError(clause, detail)


# -- debug_mode: SGLang's paged allocator's asserts ------------------------------------------
def _no_page_twice(alloc: Any, pages: Iterable[int], call: str) -> None:
    """``FREE-3``: the pages released are distinct and none is free or staged already (SGLang's
    ``_debug_check_no_duplicate_pages``, checked before the release instead of after)."""
    named = list(pages)
    free = set(host_list(alloc.get_all_free_pages()))
    seen: set[int] = set()
    for page in named:
        if page in free or page in seen:
            _fail("FREE-3", f"{call}: double free of page {page}: the free list would hold it "
                            "twice (SGLang's debug check: no duplicate free pages)")
        seen.add(page)


def _check_alloc(alloc: Any, need_size: int) -> None:
    if need_size % alloc.page_size:
        _fail("ALLOC-1", f"alloc({need_size}): The allocation size should be page-aligned "
                         f"(page size {alloc.page_size})")


def _check_offsets(last_loc: torch.Tensor, lengths: torch.Tensor, offset: int, page_size: int,
                   clause: str) -> None:
    """``(last_loc + offset) % ps == lengths % ps`` for every request (SGLang's alignment
    assert; ``offset`` 1 for extend with prefix lengths, 2 for decode with sequence lengths)."""
    bad = (last_loc + offset) % page_size != lengths.to(last_loc.device) % page_size
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        _fail(clause, f"request {i}: last_loc {int(last_loc[i])} is not at the in-page offset "
                      f"of position {int(lengths[i]) - offset} (page size {page_size})")


def _check_alloc_extend(alloc: Any, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                        seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                        last_loc: torch.Tensor, *args: Any, **kwargs: Any) -> None:
    _check_offsets(last_loc, prefix_lens, 1, alloc.page_size, "EXTEND-3")


def _check_alloc_decode(alloc: Any, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                        last_loc: torch.Tensor) -> None:
    _check_offsets(last_loc, seq_lens, 2, alloc.page_size, "DECODE-3")


def _check_free(alloc: Any, free_index: torch.Tensor) -> None:
    if free_index.numel() and alloc.free_group is None:
        pages = torch.unique(free_index.reshape(-1).to(torch.int64) // alloc.page_size)
        _no_page_twice(alloc, host_list(pages), "free")


def _check_free_page_ids(alloc: Any, page_ids: torch.Tensor) -> None:
    if page_ids.numel() and alloc.free_group is None:
        _no_page_twice(alloc, host_list(page_ids.reshape(-1)), "free_page_ids")


def _segment_reps(free_index: torch.Tensor, start_pos: int, page_size: int) -> torch.Tensor:
    """The stride representatives of a segment (one slot per page; ``SEG-2``)."""
    if start_pos % page_size == 0:
        return free_index[::page_size]
    return free_index[torch.tensor(rep_offsets(free_index.numel(), start_pos, page_size),
                                   dtype=torch.int64)]


def _check_free_segment(alloc: Any, free_index: torch.Tensor, *, start_pos: int) -> None:
    if free_index.numel() == 0:
        return
    ps = alloc.page_size
    reps = _segment_reps(free_index, start_pos, ps)
    if not torch.equal(torch.sort(reps.cpu() // ps)[0], torch.unique(free_index.cpu() // ps)):
        _fail("SEG-1", f"free_segment from position {start_pos}: the stride representatives do "
                       "not cover each page of the segment once")
    if alloc.free_group is None:
        _no_page_twice(alloc, host_list(reps // ps), "free_segment")


def _check_free_segments(alloc: Any, segments: Any) -> None:
    for free_index, start_pos in list(segments):
        _check_free_segment(alloc, free_index, start_pos=start_pos)


def _check_free_group_end(alloc: Any) -> None:
    if alloc.free_group is not None:
        _no_page_twice(alloc, alloc.deferred_pages(), "free_group_end")


PAGED_DEBUG_CHECKS: dict[str, Callable[..., None]] = {
    "alloc": _check_alloc, "alloc_extend": _check_alloc_extend,
    "alloc_decode": _check_alloc_decode, "free": _check_free,
    "free_page_ids": _check_free_page_ids, "free_segment": _check_free_segment,
    "free_segments": _check_free_segments, "free_group_end": _check_free_group_end,
}


def _checked_method(name: str, check: Callable[..., None]) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        check(self, *args, **kwargs)
        return getattr(type(self), name)(self, *args, **kwargs)
    method.__name__ = name
    return method


class DebugSwitch:
    """Mixin: ``debug_mode`` (assignable); while it is on, the instance carries a checking
    version of each method in :attr:`DEBUG_CHECKS` (the check, then the class's method)."""

    DEBUG_CHECKS: ClassVar[dict[str, Callable[..., None]]] = {}

    @property
    def debug_mode(self) -> bool:
        """Whether SGLang's debug checks run on this allocator."""
        return bool(self.__dict__.get("_debug_mode", False))

    @debug_mode.setter
    def debug_mode(self, on: bool) -> None:
        self.__dict__["_debug_mode"] = bool(on)
        for name, check in self.DEBUG_CHECKS.items():
            if on:
                self.__dict__[name] = types.MethodType(_checked_method(name, check), self)
            else:
                self.__dict__.pop(name, None)


# -- SGLANG_INVARIANT_CHECK: the hybrid allocator's expect() checks ---------------------------
def _invariants_set() -> bool:
    """Whether either of SGLang's invariant-check variables is set (two dict lookups)."""
    environ = os.environ
    return INVARIANT_ENV in environ or LEGACY_ASSERT_ENV in environ


def invariant_level() -> int:
    """SGLang's ``resolve_level()``: OFF (0) unless ``SGLANG_INVARIANT_CHECK`` is set (then its
    value) or ``SGLANG_ENABLE_ASYNC_ASSERT`` is true (STRICT). Two dict lookups when unset."""
    if not _invariants_set():
        return OFF
    from sglang.srt.utils.invariants import resolve_level

    return int(resolve_level())


class HybridDebugChecks:
    """Mixin for the hybrid allocator (before kvpool's class in the MRO): SGLang's SWA checks at
    the calls where SGLang 0.5.23 makes them, then kvpool's method."""

    page_size: int
    swa_attn_allocator: Any
    full_to_swa_index_mapping: torch.Tensor

    def _expect_peers(self, slots: torch.Tensor, *, mapped: bool, call: str) -> None:
        """SGLang's ``expect`` on the mapped peers of ``slots`` at the current level."""
        level = invariant_level()
        if level == OFF or slots.numel() == 0:
            return
        peers = self.full_to_swa_index_mapping[slots.reshape(-1).to(torch.int64)]
        bad = peers <= 0 if mapped else peers != 0
        if not bool(bad.any()):
            return
        slot = int(slots.reshape(-1)[bad.nonzero()[0, 0]])
        if mapped:  # FATAL_UNCONTAINABLE: from WARN up
            _fail("SWA-11", f"{call}: slot {slot} has no SWA peer (released already); caller "
                            "wants free_full (SGLang's invariant swa.peer_mapped)")
        detail = (f"{call}: slot {slot} still has an SWA peer; caller wants free (SGLang's "
                  "invariant swa.peer_released)")
        if level >= STRICT:  # GUARD: fatal at STRICT, logged at WARN
            _fail("SWA-12", detail)
        logger.warning("invariant-check [swa.peer_released]: %s", detail)

    def _check_segment_swa(self, free_index: torch.Tensor, start_pos: int) -> None:
        """SGLang's SWA-side segment checks: every representative mapped (invariant check), and
        in the SWA side's debug mode its SWA pages exactly the mapped pages (``SWA-3``)."""
        ps = self.page_size
        debug = ps > 1 and self.swa_attn_allocator.debug_mode
        if not (debug or _invariants_set()) or free_index.numel() == 0:
            return  # both switches off: two dict lookups and an attribute read
        reps = _segment_reps(free_index, start_pos, ps)
        self._expect_peers(reps, mapped=True, call="free_swa_segment")
        if not debug:
            return
        mapping = self.full_to_swa_index_mapping
        swa_pages = (mapping[reps.to(torch.int64)] // ps).cpu()
        expanded = (reps.to(torch.int64)[:, None] // ps * ps + torch.arange(ps)).reshape(-1)
        ref = mapping[expanded].cpu()
        if not torch.equal(torch.sort(swa_pages)[0], torch.unique(ref[ref > 0] // ps)):
            _fail("SWA-3", "swa pages do not match the mapped pages: the representatives' SWA "
                           "pages are not exactly, and once each, the pages their full pages map "
                           "to")

    def free_swa(self, free_index: torch.Tensor) -> None:
        if self.page_size == 1 and _invariants_set():
            self._expect_peers(free_index, mapped=True, call="free_swa")
        super().free_swa(free_index)  # type: ignore[misc]

    def free(self, free_index: torch.Tensor) -> None:
        if self.page_size == 1 and _invariants_set():
            self._expect_peers(free_index, mapped=True, call="free")
        super().free(free_index)  # type: ignore[misc]

    def free_swa_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        self._check_segment_swa(free_index, start_pos)
        super().free_swa_segment(free_index, start_pos=start_pos)  # type: ignore[misc]

    def free_segments(self, segments: Any) -> None:
        if _invariants_set() or (self.page_size > 1 and self.swa_attn_allocator.debug_mode):
            segments = list(segments)
            for free_index, start_pos in segments:
                self._check_segment_swa(free_index, start_pos)
        super().free_segments(segments)  # type: ignore[misc]

    def free_full(self, free_index: torch.Tensor) -> None:
        if _invariants_set():
            self._expect_peers(free_index, mapped=False, call="free_full")
        super().free_full(free_index)  # type: ignore[misc]

    def free_full_segments(self, segments: Any) -> None:
        if _invariants_set():
            segments = list(segments)
            for free_index, _ in segments:
                self._expect_peers(free_index, mapped=False, call="free_full_segment")
        super().free_full_segments(segments)  # type: ignore[misc]
