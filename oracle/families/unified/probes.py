"""Probes of a unified target's own census, ``verify_byte_accounting()`` (``UNI-13``: empty
exactly when the state is healthy).

The oracle never sends a valid call that leaves a healthy target unhealthy, so the "only when
healthy" half needs faults of its own. Each probe builds a separate instance from the factory,
drives it into one unhealthy state, and requires the census to say so:

- ``double_free`` (lazy compaction): a page freed twice -- unless the second free is refused,
  which is the better answer (``UNI-11``);
- ``stale_v2p_full`` / ``stale_v2p_swa``: one live virtual page's binding pointed at another
  live page's physical page on that side (``UNI-4``);
- ``frontier_cross``: the SWA (grow-up) frontier pushed past the full side's low frontier, the
  bands overlapping (``UNI-3``).

The last three are planted by :func:`~.peer_state.plant_fault`: through the target's
``unified_plant`` hook (:mod:`kvpool.spec.unified_state`), or on SGLang's composite by its peer
adapter. A target that can plant neither is not probed for them: the probe is *unplanted*
(counted by the executor as the coverage event ``probe.unplanted``), never a failure.

:func:`census_probe` returns the first probe whose state the census missed, as the minimal
sequence (one call per line) and the census it returned; None when every probe is reported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .peer_state import plant_fault

PLANTED, REFUSED, UNPLANTED = "planted", "refused", "unplanted"  # a probe's outcome
IMPORT = "from kvpool.oracle.families.unified.peer_state import plant_fault"
Probe = Callable[[Any, int], tuple[list[str], str]]  # (target, page size) -> (lines, outcome)


def _double_free(a: Any, ps: int) -> tuple[list[str], str]:
    row = a.alloc(2 * ps)
    lines = [f"row = a.alloc({2 * ps})", f"a.free(row[:{ps}])", f"a.free(row[:{ps}])"]
    if row is None:
        return [], UNPLANTED
    a.free(row[:ps])
    try:
        a.free(row[:ps])
    except Exception:  # refused: nothing for the census to see
        return lines, REFUSED
    return lines, PLANTED


def _planted(fault: str, comment: str) -> Probe:
    def probe(a: Any, ps: int) -> tuple[list[str], str]:
        a.alloc(2 * ps)
        if not plant_fault(a, fault):
            return [], UNPLANTED
        return [f"a.alloc({2 * ps})", f"assert plant_fault(a, {fault!r})  # {comment}"], PLANTED

    return probe


PROBES: dict[str, tuple[str, Probe]] = {
    "double_free": ("census_tables", _double_free),
    "stale_v2p_full": ("census_tables",
                       _planted("stale_binding:full", "two live pages, one physical page")),
    "stale_v2p_swa": ("census_tables",
                      _planted("stale_binding:swa", "two live pages, one physical page")),
    "frontier_cross": ("census_frontiers", _planted("frontier_cross", "the bands overlap")),
}


def census_probe(build: Callable[[bool], Any], caps: Any, page_size: int,
                 lazy_modes: tuple[bool, ...],
                 unplanted: list[str] | None = None) -> tuple[str, list[str], list[str]] | None:
    """Run every probe ``caps`` asks for (``census_tables``, ``census_frontiers``) on a
    fresh instance ``build(lazy)``; the first whose unhealthy state the census missed, as
    ``(name, sequence, census)``, else None. The names of probes that could not be planted are
    appended to ``unplanted`` when given."""
    for name, (field, probe) in PROBES.items():
        if not getattr(caps, field, False):
            continue
        for lazy in lazy_modes:
            if name == "double_free" and not lazy:
                continue  # eager compaction refuses the second free (an AssertionError)
            target = build(lazy)
            lines, outcome = probe(target, page_size)
            if outcome == UNPLANTED:
                if unplanted is not None:
                    unplanted.append(name)
                continue
            census = list(target.verify_byte_accounting()) if outcome == PLANTED else ["refused"]
            if not census:
                return name, [f"a = factory(..., lazy={lazy})", *lines], census
    return None
