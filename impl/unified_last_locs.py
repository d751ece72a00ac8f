"""Checked mode's test of the ``last_loc`` a unified pool's ``alloc_extend`` / ``alloc_decode``
continues: the paged rules (``EXTEND-2``/``-3``/``-8``, ``DECODE-2``/``-3``/``-8``) over the
pool's virtual pages, where a page is live when it is bound on the id-owning (full) side.

A wrong ``last_loc`` would otherwise hand out ids that collide with another request's (an
offset that does not continue the prefix) or that lie on a page nobody holds. Vectorised over
requests (numpy); it runs before anything changes, so a refused call leaves the pool as it was.
"""

from __future__ import annotations

import numpy as np
from kvpool.spec.errors import ContractViolation

__all__ = ["check_last_locs"]

_MIN, _MAX = np.minimum.reduce, np.maximum.reduce  # without ndarray.min's Python wrapper


def check_last_locs(prefix: np.ndarray, seq: np.ndarray, last: np.ndarray, page_size: int,
                    v2p: np.ndarray, clause: str = "EXTEND") -> None:
    """Check request ``i`` growing from ``prefix[i]`` to ``seq[i]`` tokens after ``last[i]``.

    ``clause`` is ``"EXTEND"`` or ``"DECODE"`` (a decode passes ``prefix = seq - 1``).

    Raises:
        ContractViolation: ``<clause>-1`` when the lengths differ; ``<clause>-2`` for a prefix
            below 0 or above its ``seq``; ``<clause>-3`` when ``last[i]`` is not ``-1`` exactly
            for an empty prefix, does not sit at the in-page offset before position
            ``prefix[i]``, or lies on a virtual page that is not live; ``<clause>-8`` when two
            requests continue the same partial page.
    """
    if not len(prefix) == len(seq) == len(last):
        raise ContractViolation(f"{clause}-1", f"length mismatch: {len(prefix)} prefix_lens, "
                                               f"{len(seq)} seq_lens, {len(last)} last_loc")
    n, ps = len(prefix), page_size
    if n == 0:
        return
    empty = prefix == 0
    bad = (prefix < 0) | (prefix > seq) | ((last == -1) != empty)
    if ps > 1:  # (last + 1) % ps == prefix % ps; a mask where ps is a power of two
        step = last + 1 - prefix
        bad |= (step & (ps - 1) if ps & (ps - 1) == 0 else step % ps) != 0
    if np.count_nonzero(bad):
        i = _first(bad)
        if prefix[i] < 0 or prefix[i] > seq[i]:
            raise ContractViolation(f"{clause}-2", f"request {i}: prefix {int(prefix[i])} "
                                                   f"outside 0..seq {int(seq[i])}")
        raise ContractViolation(
            f"{clause}-3", f"request {i}: last_loc {int(last[i])} does not end a prefix of "
                           f"{int(prefix[i])} tokens at page size {ps} (need last_loc == -1 iff "
                           "prefix == 0 and (last_loc + 1) % ps == prefix % ps)")
    held = n - int(np.count_nonzero(empty))
    if held == 0:
        return
    rows = None if held == n else ~empty
    pages = (last if rows is None else last[rows]) // ps
    # one reduction for the range: a negative page reads as a huge unsigned one
    if int(_MAX(pages.view(np.uint64))) >= len(v2p) or _MIN(v2p[pages]) < 0:
        k = _first((pages < 0) | (pages >= len(v2p)) | (v2p[np.clip(pages, 0, len(v2p) - 1)] < 0))
        i = k if rows is None else int(np.flatnonzero(rows)[k])
        raise ContractViolation(f"{clause}-3", f"request {i}: last_loc {int(last[i])} is on "
                                               f"virtual page {int(pages[k])}, which is not live")
    if ps > 1 and held > 1:  # the requests that continue a partial page: distinct pages
        kept_prefix = prefix if rows is None else prefix[rows]
        kept_seq = seq if rows is None else seq[rows]
        partial = pages[(kept_prefix % ps != 0) & (kept_seq > kept_prefix)]
        if len(partial) > 1:
            ordered = np.sort(partial)
            twice = ordered[1:][ordered[1:] == ordered[:-1]]
            if len(twice):
                raise ContractViolation(f"{clause}-8", f"virtual page {int(twice[0])} is "
                                                       "continued by two requests")


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])
