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
    if len(prefix) == 0:
        return
    bad = (prefix < 0) | (prefix > seq)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ContractViolation(f"{clause}-2", f"request {i}: prefix {int(prefix[i])} outside "
                                               f"0..seq {int(seq[i])}")
    empty = prefix == 0
    ps = page_size
    bad = (last == -1) != empty
    if ps > 1:
        bad |= (last + 1) % ps != prefix % ps
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ContractViolation(
            f"{clause}-3", f"request {i}: last_loc {int(last[i])} does not end a prefix of "
                           f"{int(prefix[i])} tokens at page size {ps} (need last_loc == -1 iff "
                           "prefix == 0 and (last_loc + 1) % ps == prefix % ps)")
    held = np.flatnonzero(~empty)
    pages = last[held] // ps
    inside = (pages >= 0) & (pages < len(v2p))
    live = np.zeros(len(pages), dtype=bool)
    live[inside] = v2p[pages[inside]] >= 0
    if not live.all():
        k = int(np.flatnonzero(~live)[0])
        raise ContractViolation(f"{clause}-3", f"request {int(held[k])}: last_loc "
                                               f"{int(last[held[k]])} is on virtual page "
                                               f"{int(pages[k])}, which is not live")
    if ps > 1:
        continues = (prefix[held] % ps != 0) & (seq[held] > prefix[held])
        partial = pages[continues]
        if len(partial) > 1:
            ordered = np.sort(partial)
            twice = ordered[1:][ordered[1:] == ordered[:-1]]
            if len(twice):
                raise ContractViolation(f"{clause}-8", f"virtual page {int(twice[0])} is "
                                                       "continued by two requests")
