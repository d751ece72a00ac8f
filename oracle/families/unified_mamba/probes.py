"""Probes of a unified full + Mamba target's own census, ``verify_byte_accounting()``
(``UMB-8``: empty *exactly* when the chain is healthy).

The oracle never sends a valid call that leaves a healthy target unhealthy, so the "only when
healthy" half needs faults of its own. At every ``create`` each probe builds a separate
instance, takes two full pages and a state slot, plants one fault and requires the census to
report it: ``frontier_cross`` (the state end's frontier pushed past full's, ``census_frontiers``)
and ``stale_binding:full`` (one live full page bound to another's physical page,
``census_tables``). A fault is planted through the target's ``unified_plant`` hook
(:mod:`kvpool.spec.unified_state`), else on SGLang's composite (:func:`~.peer.plant_sglang`); a
target that can do neither is not probed (counted as ``probe.unplanted``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .peer import is_sglang_unified_mamba, plant_sglang

__all__ = ["IMPORT", "PROBES", "census_probe", "plant"]

IMPORT = "from kvpool.oracle.families.unified_mamba.probes import plant"
PROBES = (("frontier_cross", "census_frontiers"), ("stale_binding:full", "census_tables"))


def plant(target: Any, fault: str) -> bool:
    """Plant ``fault`` in ``target``: its ``unified_plant`` hook, else SGLang's tables; False
    when it cannot."""
    hook = getattr(target, "unified_plant", None)
    if callable(hook):
        return bool(hook(fault))
    return is_sglang_unified_mamba(target) and plant_sglang(target, fault)


def census_probe(build: Callable[[], Any], caps: Any, page_size: int,
                 unplanted: list[str]) -> tuple[str, list[str], list[str]] | None:
    """Run every probe ``caps`` asks for on a fresh ``build()``; the first whose fault the
    census missed, as ``(fault, repro lines on a, census)``; None when each is reported. The
    faults that could not be planted are appended to ``unplanted``."""
    for fault, field in PROBES:
        if not getattr(caps, field, True):
            continue
        a = build()
        a.alloc(2 * page_size)
        a.mamba_allocator.alloc(1)
        if not plant(a, fault):
            unplanted.append(fault)
            continue
        census = list(a.verify_byte_accounting())
        if not census:
            return fault, [f"a.alloc({2 * page_size})", "a.mamba_allocator.alloc(1)",
                           f"assert plant(a, {fault!r})"], census
    return None
