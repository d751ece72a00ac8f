"""The cause of a decode result that differs from the spec's: which requests open a page.

A decode (``alloc_decode``) whose every slot is a well-formed decode answer (the slot after its
request's ``last_loc`` inside its page, or the first slot of a page the spec lists free or
staged; that first slot may also follow ``last_loc``, and then reads either way) but that
opens pages at other requests than ``(seq - 1) % ps == 0`` breaks ``DECODE-4``; the result rule
(``DECODE-5``) or the None rule (``DECODE-6``) that sees it first is the symptom.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from kvpool.spec.layout import decode_needs_page


def page_open_mismatch(args: Mapping[str, Any], got: Sequence[int] | None, page_size: int,
                       free_pages: Collection[int]) -> tuple[str, str] | None:
    """``("DECODE-4", detail)`` when the decode result ``got`` opens pages at other requests than
    the rule does, every slot being well-formed (see the module docstring); None otherwise,
    at ``page_size == 1`` (every step opens a page) or when ``got`` is None or miscounted."""
    seq_lens, last_loc = list(args["seq_lens"]), list(args["last_loc"])
    if page_size == 1 or got is None or len(got) != len(seq_lens):
        return None
    # the readings each slot allows: a free page's first slot opens a page, the slot after
    # last_loc inside its page continues it; a free page's first slot right after last_loc is
    # either (a new page that happens to follow the row's last one)
    readings: list[set[bool]] = []
    for loc, slot in zip(last_loc, got):
        if slot % page_size == 0 and slot // page_size in free_pages:
            readings.append({True, False} if slot == loc + 1 else {True})
        elif slot == loc + 1 and slot % page_size:
            readings.append({False})
        else:
            return None  # not a decode answer at all: the result rule names it
    wrong = [i for i, (seq, r) in enumerate(zip(seq_lens, readings))
             if decode_needs_page(seq, page_size) not in r]
    if not wrong:
        return None
    i = wrong[0]
    what = "opened a new page" if True in readings[i] else "continued its page"
    return "DECODE-4", (
        f"request {i} (seq_len {seq_lens[i]}, last_loc {last_loc[i]}) {what} (slot {got[i]}); "
        f"a request opens a page iff (seq_len - 1) % page_size == 0 "
        f"({len(wrong)} of {len(seq_lens)} requests differ)"
    )
