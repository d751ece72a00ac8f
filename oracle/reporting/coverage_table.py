"""The coverage table of a run: per target, the events each configuration reached, and the gate."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ..engine.events import Event


@dataclass
class TargetCoverage:
    """The events of every configuration of one target, and what the gate asks of them.

    The gate (``--require-coverage``) asks for every event that some configuration of the
    target can reach, summed over its configurations: each event must be reached at least once
    somewhere in the target's matrix.
    """

    target: str
    columns: list[tuple[str, Counter[str], list[str]]]  # (label, counts, required) per config
    events: Mapping[str, Event]  # the family's event table

    def total(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for _, counts, _ in self.columns:
            out.update(counts)
        return out

    def required(self) -> list[str]:
        needed = {name for _, _, names in self.columns for name in names}
        return [name for name in self.events if name in needed]

    def missing(self) -> list[str]:
        """Events some configuration can reach that no configuration reached."""
        total = self.total()
        return [name for name in self.required() if not total.get(name)]


def table(targets: list[TargetCoverage]) -> str:
    """The coverage table: one row per event, one column per configuration and one total per
    target. A cell is the count, ``-`` where the configuration cannot reach the event, ``0``
    where it can but did not, and ``0!`` in a target's total where some configuration can reach
    the event and none did (``--require-coverage`` fails on it)."""
    cols: list[tuple[str, Counter[str], set[str], bool]] = []
    for tc in targets:
        cols += [(label, counts, set(names), False) for label, counts, names in tc.columns]
        cols.append(("all", tc.total(), set(tc.required()), True))
    width = max(7, *(len(c[0]) for c in cols))
    head = f"  {'event':27s} {'clause':9s} " + " ".join(f"{c[0]:>{width}s}" for c in cols)
    lines = [head]
    for event in (targets[0].events if targets else {}).values():
        cells = []
        for _, counts, needed, is_total in cols:
            n = counts.get(event.name, 0)
            cell = str(n) if n else ("-" if event.name not in needed else "0!" if is_total else "0")
            cells.append(f"{cell:>{width}s}")
        lines.append(f"  {event.name:27s} {event.clause:9s} " + " ".join(cells))
    return "\n".join(lines)
