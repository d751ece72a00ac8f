"""Model of SGLang 0.5.23's ``UnifiedMambaTokenToKVPoolAllocator``: full + Mamba state, one buffer.

The byte buffer is laid out as ``[ state end (grows up from the sink) | full end (grows down) ]``
(``UMB-1``): the full + SWA chain of ``SPEC.md`` §16 with the SWA end replaced by a state end of
one Mamba state a page (``state_bytes``). Each end owns its own virtual ids. The token surface
(``alloc``, ``alloc_extend``, ``alloc_decode``, frees, translation) is the full end's (``UMB-2``,
``UMB-7``); the state end is driven by the request pool (``alloc_state`` / ``free_state``,
``UMB-5``). A call short of room compacts the *other* end's holes (relief). Capacity views are
those of :mod:`kvpool.spec.unified_mamba_views` (``UMB-3``, ``UMB-4``, ``UMB-6``); ``census`` is
``verify_byte_accounting`` (``UMB-8``).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import unified_layout as ul
from . import unified_mamba_views as uv
from . import unified_tokens as ut
from .errors import ContractViolation
from .unified_float import FloatChain, Grid, schedulable_full_tokens, state_available_slots
from .unified_mamba_end import OrderedEndPool
from .unified_mamba_frees import UnifiedMambaFrees
from .unified_tables import EndPool
from .wording import counted


class UnifiedMambaModel(UnifiedMambaFrees):
    """A full + Mamba unified composite over one byte buffer (``UMB-1``).

    Args:
        total_bytes: the whole buffer (SGLang's ``unified_buffer.total_bytes``).
        page_size: tokens per full page (``>= 1``).
        full_entry_bytes: bytes one full token occupies; state_bytes: bytes one state slot does.
        lazy: lazy compaction (holes kept until an allocation needs them compacted).

    Raises:
        ContractViolation: ``UMB-1`` when an end has no allocatable page above the sink.
    """

    def __init__(self, total_bytes: int, page_size: int, full_entry_bytes: int,
                 state_bytes: int, *, lazy: bool) -> None:
        self.total_bytes = total_bytes
        self.page_size = page_size
        self.lazy = lazy
        self.full_entry_bytes = full_entry_bytes
        self.state_bytes = state_bytes
        self.floor_bytes = ul.reserved_floor_bytes(full_entry_bytes, state_bytes, page_size)
        ends = []
        for name, entry, ps, up in (("state", state_bytes, 1, True),
                                    ("full", full_entry_bytes, page_size, False)):
            if total_bytes // entry <= -(-self.floor_bytes // entry):
                raise ContractViolation("UMB-1", f"{name}: {counted(total_bytes // entry, 'slot')}"
                                                 f" in {total_bytes} bytes, none above the sink")
            ends.append(OrderedEndPool(name, up, ul.min_page_index(self.floor_bytes, entry, ps),
                                ul.num_pages(total_bytes, entry, ps), ps * entry, lazy))
        self.state, self.full = ends
        self.size_full = total_bytes // full_entry_bytes - 1
        self.size_mamba = total_bytes // state_bytes - 1
        self.free_virtual: list[int] = []
        self.free_state_ids: list[int] = []
        self.moves_blocked = False  # a move gate is closed (lazy only): no compaction may run
        self.group: list[int] | None = None  # deferred plain frees of an open free group
        self.group_pages: list[int] | None = None  # deferred segment pages of an open group
        self.clear()

    # -- lifecycle --

    def clear(self) -> None:
        """Back to empty (``UMB-1``): both ends empty, every id free in hand-out order, no open
        free group."""
        self.full.clear()
        self.state.clear()
        self.free_virtual = list(range(self.full.min_page, self.full.pages))
        self.free_state_ids = list(range(self.state.min_page, self.state.pages))
        self.group = self.group_pages = None

    # -- capacity views --

    def chain(self) -> FloatChain:
        """The two ends as a tri-pool chain whose float is empty, hence transparent
        (``UMB-3``, ``UMB-4``): the views are the tri-pool's read on it."""
        s, f = self.state, self.full
        return FloatChain(
            page_size=self.page_size, state=Grid(s.page_bytes, s.pages, s.min_page),
            swa=Grid(page_bytes=1, num_pages=0, min_page=0),
            full=Grid(f.page_bytes, f.pages, f.min_page), state_high_byte=s.band()[1],
            state_holes=len(s.holes), state_drains=self.lazy and not self.moves_blocked,
            swa_low_page=0, swa_high_page=0, swa_holes=0, full_low_byte=f.band()[0],
            full_span_pages=f.span_pages(), full_holes=len(f.holes), full_drains=False,
            full_static_tokens=0, swa_static_tokens=0, full_live_tokens=0, swa_live_tokens=0)

    def gap_bytes(self) -> int:
        """Free bytes between the state end's frontier and full's (``UMB-3``)."""
        return ul.gap_bytes(self.state.band()[1], self.full.band()[0])

    def _drainable_bytes(self, end: EndPool) -> int:
        """Bytes an urgent flush of ``end`` would release (lazy, no move gate closed)."""
        return 0 if self.moves_blocked else len(end.holes) * end.page_bytes

    def full_now_tokens(self) -> int:
        """Tokens the full end takes without relief: its gap pages within its room, plus its
        holes (SGLang's ``full_attn_allocator.available_size()``)."""
        f = self.full
        return ul.side_available_pages(self.gap_bytes(), f.page_bytes, f.room(),
                                       len(f.holes)) * self.page_size

    def available_size(self) -> int:
        """The token view (``UMB-3``): whole full pages in the gap to the state end's frontier,
        credited with the state end's drainable holes, within full's index room, plus full's
        own holes, times ``page_size`` (the tri-pool's ``schedulable_full_tokens``)."""
        return schedulable_full_tokens(self.chain())

    def full_available_size(self) -> int:
        """Equal to :meth:`available_size` (``UMB-3``)."""
        return self.available_size()

    def size(self) -> int:
        """``available_size()`` plus the live full tokens (``UMB-1``)."""
        return self.available_size() + len(self.full.v2p) * self.page_size

    def state_available_size(self) -> int:
        """The state view (``UMB-4``): whole slots between the state end's frontier and full's,
        within its index room, plus its own holes; full's holes are not credited (the
        tri-pool's ``state_available_slots``, ``UNI-16``). What a state alloc takes without
        relief."""
        return state_available_slots(self.chain())

    def state_schedulable_size(self) -> int:
        """The state view credited with full's drainable holes (``UMB-5``)."""
        s = self.state
        return uv.state_schedulable_slots(self.gap_bytes(), s.page_bytes, s.room(),
                                          len(s.holes), self._drainable_bytes(self.full))

    def mamba_slot_full_token_cost(self) -> int:
        """``UMB-6``: full tokens one state slot's bytes are worth, rounded up."""
        return uv.mamba_slot_full_token_cost(self.state_bytes, self.full_entry_bytes)

    def full_tokens_before_mamba_recheck(self, target_slots: int) -> int:
        """``UMB-6``: full tokens to free before ``target_slots`` state slots may fit."""
        missing = uv.missing_state_slots(target_slots, self.state_schedulable_size())
        return uv.full_tokens_before_recheck(missing, self.state_bytes, self.full_entry_bytes)

    # -- relief and takes --

    def _relieve(self, neighbour: EndPool) -> None:
        """The urgent flush of the neighbour a short end asks for (``UMB-3``, ``UMB-5``): its
        holes close (lazy, no move gate closed); eager compaction has none."""
        if self.lazy and not self.moves_blocked:
            neighbour.flush()

    def _take_full(self, num_pages: int) -> list[int] | None:
        """``num_pages`` virtual full pages bound past full's frontier (``UMB-2``); a shortfall
        first relieves the state end (which stays relieved when the take still fails)."""
        if num_pages == 0:
            return []
        if num_pages * self.page_size > self.full_now_tokens():
            self._relieve(self.state)
            if num_pages * self.page_size > self.full_now_tokens():
                return None
        virtual, self.free_virtual = self.free_virtual[:num_pages], self.free_virtual[num_pages:]
        self.full.bind(virtual, self.full.take(num_pages))
        return virtual

    def alloc(self, need_size: int) -> list[int] | None:
        """``need_size`` virtual token ids, whole pages of the full end (``UMB-2``); None when
        they do not fit even after relief.

        Raises:
            ContractViolation: ``UMB-8`` when ``need_size`` is not whole pages; nothing changed.
        """
        if need_size % self.page_size:
            raise ContractViolation("UMB-8", f"need_size {need_size} is not whole pages")
        pages = self._take_full(max(0, need_size) // self.page_size)
        if pages is None:
            return None
        return [v * self.page_size + k for v in pages for k in range(self.page_size)]

    def alloc_extend(self, prefix_lens: Sequence[int], seq_lens: Sequence[int],
                     last_loc: Sequence[int]) -> list[int] | None:
        """Grow each request from ``prefix_lens[i]`` to ``seq_lens[i]`` tokens (``UMB-2``)."""
        count = sum(ut.extend_page_counts(prefix_lens, seq_lens, self.page_size))
        if count > len(self.free_virtual):
            return None
        pages = self._take_full(count)
        if pages is None:
            return None
        return ut.extend_token_ids(prefix_lens, seq_lens, last_loc, pages, self.page_size)

    def alloc_decode(self, seq_lens: Sequence[int], last_loc: Sequence[int]) -> list[int] | None:
        """One token per request at position ``seq_lens[i] - 1`` (``UMB-2``)."""
        count = sum(ut.decode_page_starts(seq_lens, self.page_size))
        if count > len(self.free_virtual):
            return None
        pages = self._take_full(count)
        if pages is None:
            return None
        return ut.decode_token_ids(seq_lens, last_loc, pages, self.page_size)

    def alloc_state(self, count: int) -> list[int] | None:
        """``count`` state slot ids from the state end's free list, in order (``UMB-5``); a
        shortfall first relieves the full end; None when they still do not fit."""
        if count <= 0:
            return []
        if count > self.state_available_size():
            self._relieve(self.full)
            if count > self.state_available_size():
                return None
        slots, self.free_state_ids = self.free_state_ids[:count], self.free_state_ids[count:]
        self.state.bind(slots, self.state.take(count))
        return slots

    def prepare_mamba_allocation(self, count: int) -> None:
        """Run an open free group's deferred frees (the group stays open); when ``count`` is
        within the state's schedulable view but above its available view, relieve (``UMB-5``)."""
        self.flush_deferred_full_frees()
        if self.state_available_size() < count <= self.state_schedulable_size():
            self._relieve(self.full)

    def flush_opportunistic(self) -> int:
        """Idle-time compaction of both ends (``UMB-7``; :meth:`EndPool.flush_idle`): nothing
        under eager compaction or while a move gate is closed. Returns the pages moved."""
        if not self.lazy or self.moves_blocked:
            return 0
        return self.full.flush_idle() + self.state.flush_idle()

    def set_move_gate(self, allow: bool) -> None:
        """Open (``allow``) or close the move gate of both ends (lazy only).

        Raises:
            ContractViolation: ``UMB-8`` under eager compaction; nothing changed.
        """
        if not self.lazy:
            raise ContractViolation("UMB-8", "a move gate needs lazy compaction")
        self.moves_blocked = not allow

    # -- translation and census --

    def translate(self, token_ids: Sequence[int]) -> list[int]:
        """Physical row of each live virtual token id of the full end (``UMB-7``).

        Raises:
            ContractViolation: ``UMB-8`` when an id's page is not live; nothing changed.
        """
        ps = self.page_size
        self._live_pages(token_ids)
        return [self.full.v2p[t // ps] * ps + t % ps for t in token_ids]

    def census(self) -> list[str]:
        """``verify_byte_accounting`` (``UMB-8``): each end's UNI-4/5/6 violations, the chain's
        order, the free-id partitions; empty exactly when the state is healthy."""
        out = self.state.census() + self.full.census()
        state_high, full_low = self.state.band()[1], self.full.band()[0]
        if state_high > full_low:
            out.append(f"[chain] UMB-8 state high frontier {state_high} crosses full low "
                       f"{full_low}")
        if self.state.band()[0] < self.floor_bytes or self.full.band()[0] < self.floor_bytes:
            out.append("[chain] UMB-1 a band reaches into the reserved sink")
        for end, free in ((self.full, self.free_virtual), (self.state, self.free_state_ids)):
            ids = set(range(end.min_page, end.pages))
            if set(free) & set(end.v2p) or set(free) | set(end.v2p) != ids or len(
                    set(free)) != len(free):
                out.append(f"[{end.name}] UMB-8 free ids and live ids do not partition the ids")
        return out

    def check_invariants(self) -> None:
        """Raise ``AssertionError`` listing the census when the state is unhealthy."""
        problems = self.census()
        assert not problems, problems
