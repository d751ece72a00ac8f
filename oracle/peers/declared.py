"""A peer target's capability declaration from the divergence registry: the family's full
declaration with each registered divergence's rule switched off (``KnownDivergence.excludes``)
and the divergences named, so a run judges the rest and its report lists what it excused."""

from __future__ import annotations

from typing import TypeVar, cast

from ..engine.capabilities import Capabilities
from .divergences import divergences_for

C = TypeVar("C", bound=Capabilities)


def declared_by_registry(base: C, target: str, *, own: bool = True) -> C:
    """``base`` with every rule excluded that a registry entry for ``target`` names, and the
    entries' IDs as its ``divergences``. ``own``: only the entries made for ``target`` itself
    (those made for all of SGLang's static allocators, target ``sglang``, describe other
    classes); ``own=False``: every entry :func:`divergences_for` returns for it. An unknown
    ``target`` gets ``base`` with no divergence."""
    entries = [d for d in divergences_for(target) if not own or d.target == target]
    changes = {d.excludes[0]: d.excludes[1] for d in entries}
    return cast(C, base.replace(divergences=tuple(d.id for d in entries), **changes))
