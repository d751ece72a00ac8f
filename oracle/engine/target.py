"""What the engine runs: a :class:`Target` (a factory, its capabilities, its family) and a
:class:`Config` (one cell of its configuration matrix)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .capabilities import Capabilities
from .registry import DEFAULT_FAMILY, FAMILIES

# the default family's budget (the registry's): Hypothesis examples per configuration, rules
# per example
DEFAULT_EXAMPLES = FAMILIES[DEFAULT_FAMILY].examples
DEFAULT_STEPS = FAMILIES[DEFAULT_FAMILY].steps


class TargetError(Exception):
    """A target string that cannot be resolved (bad syntax, import error, not a factory)."""


@dataclass
class Target:
    """A factory, its capabilities and the ``module:attr`` path that names it."""

    factory: Callable[..., Any]
    caps: Capabilities
    path: str
    notes: list[str] = field(default_factory=list)
    family: str = DEFAULT_FAMILY  # the allocator family (kvpool.oracle.engine.registry)


@dataclass(frozen=True)
class Config:
    """One cell of the matrix: page size, need_sort, device and comparison mode."""

    page_size: int
    need_sort: bool
    device: str = "cpu"
    order: str = "exact"

    def label(self) -> str:
        return f"ps={self.page_size} need_sort={self.need_sort!s:5s} {self.device} {self.order}"


def probe_peer(factory: Callable[..., Any], path: str) -> None:
    """Run the factory's ``kvpool_probe`` (a peer target's import of its library), if it has
    one. Raises :class:`TargetError` from the probe's ImportError (``PeerNotInstalled`` when
    the library is absent, so a test skips by the availability rule outside CI)."""
    check = getattr(factory, "kvpool_probe", None)
    if check is None:
        return
    try:
        check()
    except ImportError as err:
        raise TargetError(f"{path} is unavailable: {err}") from err
