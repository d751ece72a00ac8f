"""Z3 encodings of ``kvpool.spec.window`` (the hybrid allocator's arithmetic), line by line, over
unbounded integers and a symbolic page size. ``test_formal_z3_hybrid.py`` evaluates each one
against the Python function on random inputs, so the proofs cover the spec's code."""

from __future__ import annotations

import z3
from formal_z3_encoding import ceil_div


def full_page_slot(slot: z3.ArithRef, offset: z3.ArithRef, ps: z3.ArithRef) -> z3.ArithRef:
    """``window.full_page_slots``: entry ``offset`` of ``slot``'s expansion."""
    return slot / ps * ps + offset


def released_frontier(end_pos: z3.ArithRef, ps: z3.ArithRef) -> z3.ArithRef:
    """``window.released_frontier``: ``ceil(end / ps) * ps``."""
    return ceil_div(end_pos, ps) * ps


def slide_end(seq_len: z3.ArithRef, window: z3.ArithRef, ps: z3.ArithRef) -> z3.ArithRef:
    """``window.slide_end``: ``max(0, seq - window) // ps * ps``."""
    out = z3.If(seq_len - window > 0, seq_len - window, 0)
    return out / ps * ps
