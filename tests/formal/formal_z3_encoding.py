"""Z3 encodings of the spec's index arithmetic (``kvpool.spec.layout`` / ``kvpool.spec.segments``).

Each builder mirrors one Python function of the spec line by line, over unbounded Z3 integers
and a symbolic page size. For a positive divisor Z3's ``/`` and ``%`` are floor division and a
non-negative remainder, exactly Python's ``//`` and ``%`` (``test_formal_z3_encoding.py`` checks
every builder against the Python function on random concrete inputs, so a spec change that the
encoding does not follow fails). A lemma proved here covers these encodings.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import z3

# Z3's deterministic resource budget for one solver call (its ``rlimit``; the largest lemma of
# the default run spends about 9 million units, the four-segment unrolling of SEG-5 about 49
# million under three budgets). Unlike a wall-clock timeout it gives the same verdict on a
# loaded machine and after any other test.
SOLVER_RLIMIT = 50_000_000


def ceil_div(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    """``layout.ceil_div``: ``-(-a // b)``."""
    return -((-a) / b)


def num_new_pages(prefix_len: z3.ArithRef, seq_len: z3.ArithRef, ps: z3.ArithRef) -> z3.ArithRef:
    """``layout.num_new_pages``: ``ceil(seq/ps) - ceil(prefix/ps)``."""
    return ceil_div(seq_len, ps) - ceil_div(prefix_len, ps)


def extend_parts(
    prefix_len: z3.ArithRef, seq_len: z3.ArithRef, ps: z3.ArithRef
) -> tuple[z3.ArithRef, z3.ArithRef, z3.ArithRef]:
    """``layout.extend_parts``: the three part sizes of an extend, in tokens."""
    prefix_ceil = ceil_div(prefix_len, ps) * ps
    seq_floor = seq_len / ps * ps
    part1 = z3.If(seq_len < prefix_ceil, seq_len, prefix_ceil) - prefix_len
    part2 = z3.If(seq_floor - prefix_ceil > 0, seq_floor - prefix_ceil, 0)
    part3 = seq_len - prefix_len - part1 - part2
    return part1, part2, part3


def merge_bound(extend_num_tokens: z3.ArithRef, batch_size: z3.ArithRef,
                ps: z3.ArithRef) -> z3.ArithRef:
    """``layout.merge_bound``: ``extend_num_tokens // ps + bs + 1``."""
    return extend_num_tokens / ps + batch_size + 1


def decode_needs_page(seq_len: z3.ArithRef, ps: z3.ArithRef) -> z3.BoolRef:
    """``layout.decode_needs_page``: ``(seq - 1) % ps == 0``."""
    return (seq_len - 1) % ps == 0


def last_loc_aligned(prefix_len: z3.ArithRef, last_loc: z3.ArithRef,
                     ps: z3.ArithRef) -> z3.BoolRef:
    """``layout.last_loc_aligned``: ``last_loc == -1`` iff empty prefix, and offsets agree."""
    return z3.And((last_loc == -1) == (prefix_len == 0), (last_loc + 1) % ps == prefix_len % ps)


def extend_slot(prefix_len: z3.ArithRef, last_loc: z3.ArithRef, pos: z3.ArithRef,
                new_page: z3.ArithRef, ps: z3.ArithRef) -> z3.ArithRef:
    """``layout.extend_row`` at position ``pos``; ``new_page`` is the page the row gives ``pos``'s
    logical page when ``pos`` lies past the prefix's last page."""
    first_new_page = ceil_div(prefix_len, ps)
    return z3.If(pos < first_new_page * ps, last_loc + 1 + (pos - prefix_len),
                 new_page * ps + pos % ps)


def extend_new_page_index(prefix_len: z3.ArithRef, pos: z3.ArithRef,
                          ps: z3.ArithRef) -> z3.ArithRef:
    """``layout.extend_row``: index into ``new_pages`` of position ``pos`` (parts 2 and 3)."""
    return pos / ps - ceil_div(prefix_len, ps)


def rep_first(start_pos: z3.ArithRef, ps: z3.ArithRef) -> z3.ArithRef:
    """``segments.rep_offsets``: the stride start ``first or page_size``."""
    offset = start_pos % ps
    return z3.If(offset == 0, ps, ps - offset)


def rep_offset(j: z3.ArithRef, start_pos: z3.ArithRef, ps: z3.ArithRef) -> z3.ArithRef:
    """``segments.rep_offsets(...)[j]``: 0, then ``first + (j - 1) * ps``."""
    return z3.If(j == 0, 0, rep_first(start_pos, ps) + (j - 1) * ps)


def rep_count(num_tokens: z3.ArithRef, start_pos: z3.ArithRef, ps: z3.ArithRef) -> z3.ArithRef:
    """``len(segments.rep_offsets(...))``: ``1 + len(range(first, n, ps))``, 0 when empty."""
    tail = ceil_div(num_tokens - rep_first(start_pos, ps), ps)
    return z3.If(num_tokens == 0, 0, 1 + z3.If(tail > 0, tail, 0))


def trim_boundary(start_pos: z3.ArithRef, num_tokens: z3.ArithRef, has_prev: z3.BoolRef,
                  prev_end: z3.ArithRef, ps: z3.ArithRef) -> z3.ArithRef:
    """``segments.trim_boundary``; ``has_prev`` False stands for ``prev_end is None``."""
    shared = z3.And(has_prev, start_pos / ps == (prev_end - 1) / ps)
    boundary = (start_pos / ps + 1) * ps
    cut = boundary - start_pos
    return z3.If(shared, z3.If(num_tokens < cut, num_tokens, cut), 0)


def touches(page: z3.ArithRef, start_pos: z3.ArithRef, stop_pos: z3.ArithRef,
            ps: z3.ArithRef) -> z3.BoolRef:
    """Logical ``page`` is touched by positions ``[start_pos, stop_pos)``
    (``segments.touched_pages``: ``range(start // ps, ceil(stop / ps))``; for a non-empty range
    ``page < ceil(stop / ps)`` iff ``page <= (stop - 1) // ps``)."""
    return z3.And(start_pos < stop_pos, start_pos / ps <= page, page <= (stop_pos - 1) / ps)


def divmod_facts(x: z3.ArithRef, ps: z3.ArithRef, name: str) -> tuple[z3.ArithRef, z3.ArithRef,
                                                                     list[z3.BoolRef]]:
    """Explicit quotient and remainder of ``x`` by ``ps``: fresh ``q``, ``r`` with
    ``x == q * ps + r``, ``0 <= r < ps``, ``x / ps == q``, ``x % ps == r``.

    The last two follow from the first two (uniqueness of floor division, proved by
    ``test_divmod_unique``); stating them lets the solver avoid non-linear ``%`` reasoning.
    """
    q, r = z3.Int(f"{name}_q"), z3.Int(f"{name}_r")
    return q, r, [x == q * ps + r, r >= 0, r < ps, x / ps == q, x % ps == r]


def divmod_unique(x: z3.ArithRef, ps: z3.ArithRef, q: z3.ArithRef,
                  r: z3.ArithRef) -> z3.BoolRef:
    """An instance of the uniqueness of floor division (``test_divmod_unique``): if
    ``x == q * ps + r`` and ``0 <= r < ps`` then ``x / ps == q`` and ``x % ps == r``."""
    return z3.Implies(z3.And(x == q * ps + r, r >= 0, r < ps), z3.And(x / ps == q, x % ps == r))


def prove_chain(assumptions: Sequence[z3.BoolRef], steps: Sequence[z3.BoolRef],
                rlimit: int = SOLVER_RLIMIT) -> float:
    """Prove each step from the assumptions and the steps before it (a calculation).

    Returns the total solver time in seconds.
    """
    known = list(assumptions)
    total = 0.0
    for step in steps:
        total += prove(known, step, rlimit)
        known.append(step)
    return total


@dataclass
class Outcome:
    """What one solver call returned, and how long it took."""

    result: z3.CheckSatResult
    seconds: float
    model: dict[str, int]
    rlimit_used: int = 0


def check(assumptions: Sequence[z3.BoolRef], goal: z3.BoolRef, rlimit: int) -> Outcome:
    """One solver call in a context of its own, bounded by Z3's resource counter: the verdict
    does not depend on the machine's load or on what the process solved before."""
    ctx = z3.Context()
    solver = z3.Solver(ctx=ctx)
    solver.set(rlimit=rlimit, random_seed=0)
    solver.add(*(a.translate(ctx) for a in assumptions))
    solver.add(z3.Not(goal.translate(ctx)))
    t0 = time.perf_counter()
    result = solver.check()
    seconds = time.perf_counter() - t0
    used = _rlimit_used(solver)
    model: dict[str, int] = {}
    if result == z3.sat:
        m = solver.model()
        model = {d.name(): m[d].as_long() for d in m.decls() if z3.is_int_value(m[d])}
    return Outcome(result, seconds, model, used)


def _rlimit_used(solver: z3.Solver) -> int:
    """The resource units ``solver``'s last check spent (Z3's ``rlimit count`` statistic)."""
    stats = solver.statistics()
    return int(stats.get_key_value("rlimit count")) if "rlimit count" in stats.keys() else 0  # noqa: SIM118


def prove(assumptions: Sequence[z3.BoolRef], goal: z3.BoolRef,
          rlimit: int = SOLVER_RLIMIT) -> float:
    """Prove ``assumptions => goal`` for all integers; ``unknown`` (the resource budget
    ``rlimit`` spent) is a failure.

    Returns the solver time in seconds.
    """
    out = check(assumptions, goal, rlimit)
    assert out.result == z3.unsat, (
        f"not proved: {out.result}" + (f", counterexample {out.model}" if out.model else "")
    )
    return out.seconds


def refute(assumptions: Sequence[z3.BoolRef], goal: z3.BoolRef,
           rlimit: int = SOLVER_RLIMIT) -> dict[str, int]:
    """A counterexample to ``assumptions => goal`` (for a planted wrong formula); ``unsat`` or
    ``unknown`` is a failure. Returns the model as a dict."""
    out = check(assumptions, goal, rlimit)
    assert out.result == z3.sat, f"expected a counterexample, solver said {out.result}"
    return out.model


def evaluate(expr: z3.ExprRef, values: dict[str, int | bool]) -> int | bool:
    """``expr`` with its constants replaced by ``values``, simplified to a Python value."""
    pairs = [
        (z3.Bool(name), z3.BoolVal(v)) if isinstance(v, bool) else (z3.Int(name), z3.IntVal(v))
        for name, v in values.items()
    ]
    out = z3.simplify(z3.substitute(expr, *pairs))
    if z3.is_int_value(out):
        return int(out.as_long())
    if z3.is_true(out):
        return True
    if z3.is_false(out):
        return False
    raise AssertionError(f"{expr} did not reduce to a constant: {out}")
