"""What a unified memory pool shows of itself: the introspection protocol (``UNI-4``, ``UNI-5``).

A unified target (one byte buffer, sub-pools growing inward from its ends, a float between)
exposes ``unified_state() -> UnifiedState``: each sub-pool's span, holes and live bindings, in
the spec's terms, read without changing anything. The oracle's unified family judges a target
through this protocol and the public allocator API alone; a composite that does not provide it
(SGLang 0.5.23's) is read by an adapter in its peer module.

Terms (``SPEC.md`` §16):

- a sub-pool's *span* is the run of physical pages between its end and its frontier (a float
  pool's: between its two frontiers), ``[span_low, span_high)``;
- a *hole* is a freed physical page inside the span kept for reuse (lazy compaction), including
  pages held back from reuse for a while;
- a *binding* is a live virtual page and the physical page holding its bytes.

``UNI-5`` states span = live + holes; ``UNI-4`` that bindings are a bijection on live pages.

What else a target may offer the oracle (optional hooks, beside the allocator API):

- ``unified_plant(fault: str) -> bool``: put itself into one unhealthy state named in
  :data:`PLANTABLE` (returns False when it cannot), so that the oracle can require its own
  census, ``verify_byte_accounting()``, to report it (``UNI-13``); without the hook those
  probes are skipped and the skip is counted (the coverage event ``probe.unplanted``);
- ``set_state_slots(count: int) -> None`` (a target with a ``"state"`` sub-pool): take or
  release state slots on that end until ``count`` are live, as a request pool does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["PLANTABLE", "SubPoolState", "UnifiedState"]

# The unhealthy states ``unified_plant`` may be asked for: one live virtual page's binding
# pointed at another live page's physical page on the full / SWA side (``UNI-4``), and the SWA
# (grow-up) frontier pushed past the full side's low frontier, the bands overlapping (``UNI-3``).
# Each is asked for with at least two live pages a side.
PLANTABLE = ("stale_binding:full", "stale_binding:swa", "frontier_cross")


@dataclass(frozen=True)
class SubPoolState:
    """One sub-pool of a unified buffer, as it stands.

    Attributes:
        name: ``"full"``, ``"swa"`` or ``"state"`` (the mamba end of a tri-pool).
        grow: ``"up"`` (from the sink), ``"down"`` (from the buffer's top) or ``"float"``.
        page_bytes: bytes one physical page of this sub-pool occupies.
        num_pages: physical pages of this sub-pool's view of the buffer (``UNI-1``).
        min_page: its first allocatable physical page (``UNI-2``).
        span_low / span_high: its span, ``[span_low, span_high)`` in physical pages.
        holes: the holes, ascending (empty under eager compaction; a float pool keeps its holes
            in both modes).
        bindings: live virtual page -> physical page.
        lazy: lazy compaction (holes kept) rather than eager.
        drains: under lazy compaction, whether its holes may be compacted now (no move gate
            closed).
        held_back: the holes held back from reuse for now (a subset of ``holes``: pages whose
            readers have not finished); the others are drainable.
    """

    name: str
    grow: str
    page_bytes: int
    num_pages: int
    min_page: int
    span_low: int
    span_high: int
    holes: tuple[int, ...] = ()
    bindings: Mapping[int, int] = field(default_factory=dict)
    lazy: bool = False
    drains: bool = True
    held_back: tuple[int, ...] = ()

    @property
    def span_pages(self) -> range:
        """The physical pages of the span."""
        return range(self.span_low, self.span_high)

    @property
    def live_pages(self) -> int:
        """Live (bound) virtual pages."""
        return len(self.bindings)

    @property
    def drainable_holes(self) -> int:
        """Holes a compaction (or a hole reuse) may take now: ``holes`` less ``held_back``."""
        return len(self.holes) - len(set(self.held_back) & set(self.holes))


@dataclass(frozen=True)
class UnifiedState:
    """A unified composite's introspection snapshot.

    Attributes:
        page_size: tokens per page.
        total_bytes: the shared buffer's size.
        sides: the sub-pools by name (``"full"``, ``"swa"``, and ``"state"`` on a tri-pool,
            whose SWA sub-pool floats between the state end below and full above).
        free_virtual: the free virtual page ids, in the order they will be handed out.
        full_static_tokens / swa_static_tokens: the static per-side caps (``UNI-9``).
    """

    page_size: int
    total_bytes: int
    sides: Mapping[str, SubPoolState]
    free_virtual: tuple[int, ...]
    full_static_tokens: int
    swa_static_tokens: int
