"""Z3 lemmas about segment frees (SEG-2, SEG-5, SEG-6) for unbounded integers and a symbolic
page size: the boundary dedup of ``free_segments`` by induction over the loop, and the stride
representatives of ``free_segment``.

Loop invariant of ``segments_pages`` after the non-empty segments seen so far, with
``M = (prev_end - 1) // ps``: the pages released are exactly the logical pages the segments
touch, each once, all ``<= M``, and page ``M`` is among them. ``test_dedup_step`` proves that one
loop iteration keeps it (the first segment is the case ``has_prev = False``; an empty segment
changes nothing, SEG-6), which covers any number of segments; K = 2..4 are also unrolled.
"""

from __future__ import annotations

import pytest
import z3
from formal_z3_encoding import (
    SOLVER_RLIMIT,
    ceil_div,
    check,
    divmod_facts,
    divmod_unique,
    prove,
    prove_chain,
    refute,
    rep_count,
    rep_first,
    rep_offset,
    touches,
    trim_boundary,
)

ps, s, n, prev_end, page = z3.Ints("ps s n prev_end page")
has_prev = z3.Bool("has_prev")
# a non-empty segment [s, s + n) after the previous non-empty one ended at prev_end (SEG-4)
STEP = [ps >= 1, s >= 0, n >= 1, z3.Implies(has_prev, z3.And(prev_end >= 1, prev_end <= s))]


def step_lemmas(trim: z3.ArithRef) -> list[z3.BoolRef]:
    """The three facts about one iteration that keep the invariant, for a given trim."""
    last_prev = (prev_end - 1) / ps  # M: the highest page released so far
    last_new = (s + n - 1) / ps  # M after this segment
    kept = touches(page, s + trim, s + n, ps)
    return [
        # fresh: nothing released now was released before (all earlier pages are <= M)
        z3.Implies(z3.And(has_prev, kept), page > last_prev),
        # complete and nothing foreign: the segment's pages are the kept ones, plus page M
        touches(page, s, s + n, ps) == z3.Or(kept, z3.And(has_prev, page == last_prev,
                                                          touches(page, s, s + n, ps))),
        # invariant carried: kept pages <= M', and M' is released now or was M
        z3.And(z3.Implies(kept, page <= last_new),
               z3.Or(touches(last_new, s + trim, s + n, ps),
                     z3.And(has_prev, last_new == last_prev)),
               z3.Implies(has_prev, last_prev <= last_new)),
    ]


def test_dedup_step_SEG_5() -> None:
    """SEG-5: one iteration of the boundary dedup keeps the invariant (induction step)."""
    trim = trim_boundary(s, n, has_prev, prev_end, ps)
    for lemma in step_lemmas(trim):
        prove(STEP, lemma)


@pytest.mark.parametrize(
    ("bug", "trim"),
    [
        ("no dedup", z3.IntVal(0)),
        ("boundary test off by one", trim_boundary(s, n, has_prev, prev_end + 1, ps)),
        ("trim one token short", z3.If(trim_boundary(s, n, has_prev, prev_end, ps) > 0,
                                       trim_boundary(s, n, has_prev, prev_end, ps) - 1, 0)),
    ],
)
def test_dedup_step_planted_SEG_5(bug: str, trim: z3.ArithRef) -> None:
    """SEG-5: each planted trim bug breaks one of the step lemmas (Z3 finds the model)."""
    lemmas = step_lemmas(trim)
    outcomes = []
    for lemma in lemmas:
        outcomes.append(check(STEP, lemma, SOLVER_RLIMIT).result)
    assert z3.unknown not in outcomes, f"{bug}: solver gave up: {outcomes}"
    assert z3.sat in outcomes, f"{bug}: no counterexample found"


def unrolled(k: int, trim_of=trim_boundary) -> tuple[list[z3.BoolRef], z3.ArithRef, z3.BoolRef]:
    """K segments in a row: the domain, how often ``page`` is released, whether it is touched."""
    starts = z3.Ints(" ".join(f"s{i}" for i in range(k)))
    sizes = z3.Ints(" ".join(f"n{i}" for i in range(k)))
    dom = [ps >= 1, starts[0] >= 0, *(x >= 0 for x in sizes)]
    dom += [starts[i] + sizes[i] <= starts[i + 1] for i in range(k - 1)]
    for i, (st, sz) in enumerate(zip(starts, sizes)):
        # explicit quotients of each segment's first and last position, and of the boundary
        q_first, _, facts_first = divmod_facts(st, ps, f"first{i}")
        dom += [*facts_first, *divmod_facts(st + sz - 1, ps, f"last{i}")[2],
                divmod_unique((q_first + 1) * ps, ps, q_first + 1, z3.IntVal(0))]
    count: z3.ArithRef = z3.IntVal(0)
    touched: z3.BoolRef = z3.BoolVal(False)
    prev: z3.ArithRef = z3.IntVal(0)
    seen: z3.BoolRef = z3.BoolVal(False)
    for st, sz in zip(starts, sizes):
        trim = trim_of(st, sz, seen, prev, ps)
        count = count + z3.If(z3.And(sz > 0, touches(page, st + trim, st + sz, ps)), 1, 0)
        touched = z3.Or(touched, touches(page, st, st + sz, ps))
        # empty segments are skipped and do not move prev_end (SEG-6)
        prev = z3.If(sz > 0, st + sz, prev)
        seen = z3.Or(seen, sz > 0)
    return dom, count, touched


@pytest.mark.parametrize("k", [2, 3, 4])
def test_dedup_unrolled_SEG_5_SEG_6(k: int) -> None:
    """SEG-5 / SEG-6 cross-check: K ascending disjoint segments (empty ones allowed) release
    each touched page exactly once and no other page; without the trim, some page twice."""
    dom, count, touched = unrolled(k)
    prove(dom, count == z3.If(touched, 1, 0), rlimit=3 * SOLVER_RLIMIT)
    dom, count, touched = unrolled(k, lambda *_: z3.IntVal(0))
    refute(dom, count == z3.If(touched, 1, 0), rlimit=3 * SOLVER_RLIMIT)


def test_stride_representatives_SEG_2() -> None:
    """SEG-2: for a segment of n >= 1 tokens at any start, representative j (0 <= j < count)
    lies inside the segment on logical page ``start // ps + j``, and the last one is on the page
    of the segment's last token: the representatives are exactly the distinct pages touched."""
    j = z3.Int("j")
    q, r, facts = divmod_facts(s, ps, "start")
    count = rep_count(n, s, ps)
    idx = rep_offset(j, s, ps)
    dom = [ps >= 1, s >= 0, n >= 1, *facts]
    # m = len(range(first, n, ps)) by its defining inequalities, tied to rep_count below
    m = z3.Int("m")
    first = rep_first(s, ps)
    m_def = [m >= 0, z3.Or(m == 0, first + (m - 1) * ps < n), first + m * ps >= n]
    prove_chain([*dom, *m_def], [
        first + s == (q + 1) * ps,
        count == 1 + m,
    ])
    within = [*dom, *m_def, first + s == (q + 1) * ps, count == 1 + m, j >= 0, j < count,
              divmod_unique(s + idx, ps, q + j, z3.If(j == 0, r, 0))]
    prove(within, z3.And(idx >= 0, idx < n, (s + idx) / ps == s / ps + j))
    last = [*dom, *m_def, first + s == (q + 1) * ps, count == 1 + m,
            divmod_unique(s + n - 1, ps, q + m, s + n - 1 - (q + m) * ps)]
    prove_chain(last, [(q + m) * ps <= s + n - 1, s + n - 1 < (q + m + 1) * ps,
                       (s + n - 1) / ps == s / ps + count - 1])
    # planted: the aligned-start stride idx[::ps] (SGLang B17a) has ceil(n / ps) representatives
    # on pages start // ps + j, which can stop short of the last token's page
    refute(dom, (s + n - 1) / ps == s / ps + ceil_div(n, ps) - 1)
