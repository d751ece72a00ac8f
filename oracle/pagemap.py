"""A compact page map: one character per page, for failure reports.

``.`` free, ``s`` staged, ``d`` deferred by the open free group, ``A``-``Z`` owned by a request
(request id modulo 26), ``r`` a raw ``alloc`` block, ``c`` a tree-cache entry, ``o`` owned by
nobody the scheduler knows of. A target line shows how often the target lists each page as free:
``.`` once, ``2``-``9`` more often, ``#`` not at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from kvpool.spec import AllocatorModel

LEGEND = ". free  s staged  d deferred  A-Z request  r raw alloc  c cache  o owned"
_STATUS_CHAR = {"free": ".", "staged": "s", "deferred": "d", "deferred-seg": "d"}


def spec_line(model: AllocatorModel, owners: Mapping[int, str]) -> str:
    """The spec's view: status of pages ``1..num_pages``, owners filled in."""
    chars = []
    for page in range(1, model.num_pages + 1):
        status = model.status_of(page)
        chars.append(_STATUS_CHAR.get(status) or owners.get(page, "o"))
    return "".join(chars)


def target_line(num_pages: int, target_free: Sequence[int]) -> str:
    """The target's census: how often each page ``1..num_pages`` is listed free."""
    counts = Counter(target_free)
    out = []
    for page in range(1, num_pages + 1):
        n = counts.get(page, 0)
        out.append("#" if n == 0 else "." if n == 1 else str(min(n, 9)))
    foreign = sorted(p for p in counts if not 1 <= p <= num_pages)
    return "".join(out) + (f"  (also listed: {foreign})" if foreign else "")


def ruler(num_pages: int) -> str:
    """Tens digits over the page map (page 1 is the first column)."""
    return "".join(str(p // 10 % 10) if p % 10 == 0 else " " for p in range(1, num_pages + 1))


def render(title: str, spec: str, target: str | None = None) -> str:
    lines = [f"  {title}", f"    spec   |{spec}|"]
    if target is not None:
        lines.append(f"    target |{target}|")
    return "\n".join(lines)
