"""Probes of a unified target's own census, ``verify_byte_accounting()`` (``UNI-13``: empty
exactly when the state is healthy).

The oracle never sends a valid call that leaves a healthy target unhealthy, so the "only when
healthy" half needs faults of its own. Each probe builds a separate instance from the factory,
drives it into one unhealthy state, and requires the census to say so:

- ``double_free`` (lazy compaction): a page freed twice -- unless the second free is refused,
  which is the better answer (``UNI-11``);
- ``stale_v2p_full`` / ``stale_v2p_swa``: one live virtual page's table entry pointed at another
  live page's physical page (planted in SGLang's ``virtual_to_physical`` table of that side;
  a target without that table is not probed);
- ``frontier_cross``: the SWA (grow-up) frontier pushed two pages past the full side's low
  frontier, the bands overlapping (``UNI-3``; planted in SGLang's ``watermark_physical``).

:func:`census_probe` returns the first probe whose state the census missed, as the minimal
sequence (one call per line) and the census it returned; None when every probe is reported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def _double_free(a: Any, ps: int) -> tuple[list[str], bool]:
    row = a.alloc(2 * ps)
    lines = [f"row = a.alloc({2 * ps})", f"a.free(row[:{ps}])", f"a.free(row[:{ps}])"]
    a.free(row[:ps])
    try:
        a.free(row[:ps])
    except Exception:  # refused: nothing for the census to see
        return lines, False
    return lines, True


def _stale(side: str) -> Callable[[Any, int], tuple[list[str], bool]]:
    def plant(a: Any, ps: int) -> tuple[list[str], bool]:
        row = a.alloc(2 * ps)
        table = getattr(getattr(a, f"{side}_attn_allocator", None), "virtual_to_physical", None)
        if not isinstance(table, torch.Tensor):
            return [], False
        first, second = int(row[0]) // ps, int(row[ps]) // ps
        table[first] = table[second]
        return [f"row = a.alloc({2 * ps})",
                f"v2p = a.{side}_attn_allocator.virtual_to_physical",
                f"v2p[{first}] = v2p[{second}]  # two live pages, one physical page"], True

    return plant


def _cross(a: Any, ps: int) -> tuple[list[str], bool]:
    a.alloc(2 * ps)
    full: Any = getattr(a, "full_attn_allocator", None)
    swa: Any = getattr(a, "swa_attn_allocator", None)
    if not hasattr(full, "watermark_physical") or not hasattr(swa, "watermark_physical"):
        return [], False
    swa.watermark_physical = full.watermark_physical + 3
    return [f"a.alloc({2 * ps})",
            "a.swa_attn_allocator.watermark_physical = "
            "a.full_attn_allocator.watermark_physical + 3  # the bands overlap"], True


PROBES: dict[str, tuple[str, Callable[[Any, int], tuple[list[str], bool]]]] = {
    "double_free": ("census_tables", _double_free),
    "stale_v2p_full": ("census_tables", _stale("full")),
    "stale_v2p_swa": ("census_tables", _stale("swa")),
    "frontier_cross": ("census_frontiers", _cross),
}


def census_probe(build: Callable[[bool], Any], caps: Any, page_size: int,
                 lazy_modes: tuple[bool, ...]) -> tuple[str, list[str], list[str]] | None:
    """Run every probe ``caps`` asks for (``census_tables``, ``census_frontiers``) on a
    fresh instance ``build(lazy)``; the first whose unhealthy state the census missed, as
    ``(name, sequence, census)``, else None."""
    for name, (field, probe) in PROBES.items():
        if not getattr(caps, field, False):
            continue
        for lazy in lazy_modes:
            if name == "double_free" and not lazy:
                continue  # eager compaction refuses the second free (an AssertionError)
            target = build(lazy)
            lines, planted = probe(target, page_size)
            census = list(target.verify_byte_accounting()) if planted else ["refused"]
            if not census:
                return name, [f"a = factory(..., lazy={lazy})", *lines], census
    return None
