"""Coverage events: a named situation a family's run can reach, and when a target can reach it.

A family's event table maps names to :class:`Event` rows; its clause map
(:class:`~kvpool.oracle.engine.clausemap.ClauseMap`) says which clause each event exercises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .capabilities import Capabilities

Needs = Callable[[Capabilities, int, bool], bool]  # (caps, page_size, need_sort) -> reachable


@dataclass(frozen=True)
class Event:
    """One named situation: the clause family it exercises and when a target can reach it."""

    name: str
    clause: str
    needs: Needs
    doc: str


def always(c: Capabilities, ps: int, ns: bool) -> bool:
    return True


def cap(name: str) -> Needs:
    return lambda c, ps, ns: bool(getattr(c, name))
