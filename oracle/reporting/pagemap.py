"""A compact page map: one character per page, for failure reports.

The spec line shows each page's status under the spec: ``.`` free, ``s`` staged (``need_sort``,
awaiting a merge), ``d`` deferred by the open free group, or, for an owned page, the letter of
the trace step that handed it out last (``A`` = step 1, ``B`` = step 2, ..., wrapping after
``Z``; :func:`owners_from_steps`), ``o`` when no step of the trace did. A run and a replay of
its trace label pages alike. The target line shows how often the target lists each page as
free: ``.`` once, ``2``-``9`` that many times, ``#`` not at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from kvpool.spec import AllocatorModel

LEGEND = (
    "spec: . free  s staged  d deferred by the open free group  A-Z owned, handed out by that "
    "step (A = step 1, B = step 2, ..., wrapping after Z)  o owned, by no step shown"
)
TARGET_LEGEND = "target: . listed free once  2-9 listed that many times  # not listed free"
REUSED_NOTE = "[input reused]: the caller overwrote the call's input tensor(s) right after it"
_STATUS_CHAR = {"free": ".", "staged": "s", "deferred": "d", "deferred-seg": "d"}


def owners_from_steps(steps: Sequence[Any], page_size: int) -> dict[int, str]:
    """Page -> the letter of the allocating step that handed it out last (``A`` = step 1).

    ``steps`` are :class:`~kvpool.oracle.engine.trace.TraceStep` objects; an allocation's ``expect``
    holds the slots it handed out (the spec's in exact order, the target's adopted choice in
    contract order); a rejected call hands out nothing."""
    out: dict[int, str] = {}
    for i, step in enumerate(steps):
        if step.raises is None and step.call.startswith("alloc") and isinstance(step.expect, list):
            letter = chr(ord("A") + (i - 1) % 26)
            out.update((slot // page_size, letter) for slot in step.expect)
    return out


def spec_line(model: AllocatorModel, owners: Mapping[int, str]) -> str:
    """The spec's view: status of pages ``1..num_pages``, owners filled in."""
    return status_line([model.status_of(p) for p in range(model.num_pages + 1)], owners)


def status_line(status: Sequence[str], owners: Mapping[int, str]) -> str:
    """``spec_line`` from page statuses indexed by page (index 0, the padding page, skipped)."""
    return "".join(_STATUS_CHAR.get(s) or owners.get(p, "o") for p, s in enumerate(status) if p)


def target_line(num_pages: int, target_free: Sequence[int]) -> str:
    """The target's census: how often each page ``1..num_pages`` is listed free."""
    counts = Counter(target_free)
    out = []
    for page in range(1, num_pages + 1):
        n = counts.get(page, 0)
        out.append("#" if n == 0 else "." if n == 1 else str(min(n, 9)))
    foreign = sorted(p for p in counts if not 1 <= p <= num_pages)
    # the note stays outside the map's bars (``render`` splits at the double space)
    return "".join(out) + (f"  (also listed, not a page 1..{num_pages}: {foreign})" * bool(foreign))


def render(title: str, spec: str, target: str | None = None) -> str:
    lines = [f"  {title}", f"    spec   |{spec}|"]
    if target is not None:
        chars, _, note = target.partition("  ")
        lines.append(f"    target |{chars}|" + (f"  {note}" if note else ""))
    return "\n".join(lines)
