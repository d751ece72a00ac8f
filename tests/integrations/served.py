"""The public-surface check of kvpool's SGLang composites."""

from __future__ import annotations

import pathlib
import re
from typing import Any


def assert_serves_sglangs_surface(theirs: Any, mine: Any, not_served: frozenset[str]) -> None:
    """Every public attribute of ``theirs``'s class is on ``mine`` except ``not_served``, and
    no SGLang module outside its allocator package reads any of those."""
    import sglang.srt

    public = {n for n in dir(type(theirs)) if not n.startswith("_")}
    assert {n for n in public if not hasattr(mine, n)} == not_served
    root = pathlib.Path(next(iter(sglang.srt.__path__)))
    for path in root.rglob("*.py"):
        if "allocator" not in path.parts:
            text = path.read_text(errors="replace")
            for name in not_served:
                assert not re.search(rf"\.{name}\b", text), (name, path)
