"""Move gates and byte-denominated capacity of a unified full + Mamba composite.

A mixin of :class:`~kvpool.impl.unified_mamba.UnifiedMambaAllocator`: the views are SGLang
0.5.23's ``MultiEndedAllocator.available_size`` / ``schedulable_available_size`` of each end
over the gap between the two frontiers (``UMB-3``, ``UMB-4``), the admission arithmetic of
``UnifiedMambaTokenToKVPoolAllocator`` (``UMB-6``) and the relief one end's shortfall runs on
the other (an urgent flush, lazy and no move gate closed: ``_relieve_for_alloc``). Two gate
slots (PD transfer, host transfer), as SGLang installs them on both ends; either closed stops
every page copy.
"""

from __future__ import annotations

from collections.abc import Callable

from kvpool.spec.errors import ContractViolation

from .unified_end import EndSubPool

__all__ = ["UnifiedMambaGate"]


class UnifiedMambaGate:
    """Gates, capacity views and relief of a full + Mamba composite."""

    full: EndSubPool
    state: EndSubPool
    page_size: int
    lazy: bool
    state_bytes: int
    entry_bytes: int
    _gates: dict[str, Callable[[], bool]]

    # -- move gates --

    def moves_blocked(self) -> bool:
        """Whether an installed move gate forbids page copies now."""
        return any(not gate() for gate in self._gates.values())

    def _install_gate(self, slot: str, gate: Callable[[], bool]) -> None:
        if not self.lazy:
            raise ContractViolation("UMB-8", "a move gate needs lazy compaction (eager frees "
                                             "move pages at once)")
        self._gates[slot] = gate

    def set_disagg_move_gate(self, gate: Callable[[], bool]) -> None:
        """Install the PD-transfer gate: while ``gate()`` is False no page moves (either end).

        Raises:
            ContractViolation: ``UMB-8`` under eager compaction; nothing changed.
        """
        self._install_gate("disagg", gate)

    def set_host_transfer_move_gate(self, gate: Callable[[], bool]) -> None:
        """Install the host-transfer gate (as :meth:`set_disagg_move_gate`, its own slot)."""
        self._install_gate("host_transfer", gate)

    # -- capacity views (UMB-3, UMB-4) --

    def _gap_bytes(self) -> int:
        return max(0, self.full.band()[0] - self.state.band()[1])

    def _drainable_bytes(self, pool: EndSubPool) -> int:
        if not pool.lazy or self.moves_blocked():
            return 0
        return pool.num_holes() * pool.page_bytes

    def _end_available(self, pool: EndSubPool, extra_bytes: int = 0) -> int:
        """Pages (slots) ``pool`` takes: whole pages of the gap (plus ``extra_bytes``) within
        its index room, plus its own holes under lazy compaction."""
        pages = min((self._gap_bytes() + extra_bytes) // pool.page_bytes, pool.room())
        return pages + (pool.num_holes() if pool.lazy else 0)

    def _full_now(self) -> int:
        return self._end_available(self.full) * self.page_size

    def available_size(self) -> int:
        """Full tokens schedulable now (``UMB-3``): the gap credited with the state end's
        drainable holes, within full's index room, plus full's own holes (lazy)."""
        return self._end_available(self.full, self._drainable_bytes(self.state)) * (
            self.page_size)

    full_available_size = available_size

    def state_available_size(self) -> int:
        """State slots the state end takes now without compaction (``UMB-4``)."""
        return self._end_available(self.state)

    def state_schedulable_size(self) -> int:
        """State slots after an urgent flush of full: the gap credited with full's drainable
        holes."""
        return self._end_available(self.state, self._drainable_bytes(self.full))

    def mamba_slot_full_token_cost(self) -> int:
        """Full tokens whose bytes one state slot takes, rounded up (``UMB-6``)."""
        return -(-self.state_bytes // self.entry_bytes)

    def full_tokens_before_mamba_recheck(self, target_size: int) -> int:
        """A lower bound of the full tokens to release before ``target_size`` state slots can
        fit (``UMB-6``): 0 when they fit the state end's schedulable view."""
        missing = max(0, target_size - self.state_schedulable_size())
        if missing == 0:
            return 0
        return -(-((missing - 1) * self.state_bytes + 1) // self.entry_bytes)

    # -- relief --

    def _relieve(self, other: EndSubPool) -> None:
        """An urgent flush of the other end (lazy, no move gate closed)."""
        if other.lazy and not self.moves_blocked():
            other.flush(urgent=True)
