"""The Z3 encodings follow the spec's Python (MODEL-2, EXTEND-4, EXTEND-5, DECODE-4, SEG-2,
SEG-5, SORT-2): each builder of ``formal_z3_encoding``, evaluated on concrete values
(substitute + simplify), equals the spec function on many random inputs. A proof covers the
encoding; this test makes a spec change that the encoding does not follow fail CI.
"""

from __future__ import annotations

import random
from collections import Counter

import z3
from formal_z3_encoding import (
    SOLVER_RLIMIT,
    ceil_div,
    check,
    decode_needs_page,
    divmod_facts,
    evaluate,
    extend_new_page_index,
    extend_parts,
    extend_slot,
    last_loc_aligned,
    merge_bound,
    num_new_pages,
    rep_count,
    rep_offset,
    touches,
    trim_boundary,
)
from kvpool.spec import layout, segments
from test_formal_z3_segments import unrolled

N_CASES = 300
ps, pre, seq, last_loc, pos, page, j = z3.Ints("ps pre seq last_loc pos page j")
s, n, prev_end = z3.Ints("s n prev_end")
has_prev = z3.Bool("has_prev")


def _ps(rng: random.Random) -> int:
    return rng.choice([1, 2, 3, 4, 5, 8, 16, rng.randint(1, 64)])


def test_layout_encodings_match_python_EXTEND_4_EXTEND_5() -> None:
    """EXTEND-4/5, DECODE-4, SORT-2: ceil_div, num_new_pages, extend_parts, merge_bound,
    decode_needs_page and last_loc_aligned agree with ``kvpool.spec.layout``."""
    rng = random.Random(20240601)
    parts = extend_parts(pre, seq, ps)
    for _ in range(N_CASES):
        p = _ps(rng)
        a = rng.randint(0, 5 * p)
        b = a + rng.randint(0, 5 * p)
        v: dict[str, int | bool] = {"ps": p, "pre": a, "seq": b}
        assert evaluate(ceil_div(seq, ps), v) == layout.ceil_div(b, p)
        assert evaluate(num_new_pages(pre, seq, ps), v) == layout.num_new_pages(a, b, p)
        assert tuple(evaluate(x, v) for x in parts) == layout.extend_parts(a, b, p)
        assert evaluate(merge_bound(seq, pre, ps), v) == layout.merge_bound(b, a, p)
        if b >= 1:
            assert evaluate(decode_needs_page(seq, ps), v) == layout.decode_needs_page(b, p)
        loc = rng.choice([-1, rng.randint(-1, 6 * p), a - 1 + p * rng.randint(0, 3)])
        v["last_loc"] = loc
        want = layout.last_loc_aligned(a, loc, p)
        assert evaluate(last_loc_aligned(pre, last_loc, ps), v) == want


def test_extend_row_encoding_matches_python_EXTEND_5() -> None:
    """EXTEND-5: ``extend_slot`` / ``extend_new_page_index`` give ``layout.extend_row``'s slot
    for every position of random valid extends."""
    rng = random.Random(7)
    slot_expr = extend_slot(pre, last_loc, pos, page, ps)
    index_expr = extend_new_page_index(pre, pos, ps)
    for _ in range(N_CASES // 3):
        p = _ps(rng)
        a = rng.randint(0, 4 * p)
        b = a + rng.randint(0, 4 * p)
        loc = -1 if a == 0 else (rng.randint(1, 9) * p + (a - 1) % p)
        pages = rng.sample(range(20, 60), layout.num_new_pages(a, b, p))
        row = layout.extend_row(a, b, loc, pages, p)
        for k, slot in enumerate(row):
            x = a + k
            v: dict[str, int | bool] = {"ps": p, "pre": a, "last_loc": loc, "pos": x}
            idx = evaluate(index_expr, v)
            assert isinstance(idx, int)
            v["page"] = pages[idx] if 0 <= idx < len(pages) else -999
            assert evaluate(slot_expr, v) == slot, (p, a, b, loc, x)


def test_segment_encodings_match_python_SEG_2_SEG_5() -> None:
    """SEG-2 / SEG-5: rep_offset / rep_count, trim_boundary and touches agree with
    ``kvpool.spec.segments``."""
    rng = random.Random(11)
    count_expr = rep_count(n, s, ps)
    for _ in range(N_CASES):
        p = _ps(rng)
        start = rng.randint(0, 6 * p)
        size = rng.randint(0, 6 * p)
        v: dict[str, int | bool] = {"ps": p, "s": start, "n": size}
        reps = segments.rep_offsets(size, start, p)
        assert evaluate(count_expr, v) == len(reps)
        for k, idx in enumerate(reps):
            assert evaluate(rep_offset(j, s, ps), {**v, "j": k}) == idx
        pages = set(segments.touched_pages(size, start, p))
        for lp in range(start // p - 1, (start + size) // p + 2):
            assert evaluate(touches(page, s, s + n, ps), {**v, "page": lp}) == (lp in pages)
        prev = rng.choice([None, rng.randint(1, start) if start else None])
        v.update({"has_prev": prev is not None, "prev_end": prev or 0})
        want = segments.trim_boundary(start, size, prev, p)
        assert evaluate(trim_boundary(s, n, has_prev, prev_end, ps), v) == want


def test_unrolled_encoding_matches_segments_pages_SEG_5() -> None:
    """SEG-5 / SEG-6: the unrolled K-segment release count equals the multiplicity of each page
    in ``segments.segments_pages`` for random rows (empty segments included)."""
    rng = random.Random(3)
    for _ in range(N_CASES // 3):
        k = rng.randint(2, 4)
        p = _ps(rng)
        row_pages = rng.sample(range(1, 200), 40)  # logical page -> physical page
        starts, sizes, cursor = [], [], rng.randint(0, 2 * p)
        for _ in range(k):
            size = rng.choice([0, rng.randint(1, 3 * p)])
            starts.append(cursor)
            sizes.append(size)
            cursor += size + rng.choice([0, 0, rng.randint(0, 2 * p)])
        segs = [([row_pages[x // p] * p + x % p for x in range(st, st + sz)], st)
                for st, sz in zip(starts, sizes)]
        released = Counter(segments.segments_pages(segs, p))
        _, count, touched = unrolled(k)
        v: dict[str, int | bool] = {"ps": p}
        for i in range(k):
            v[f"s{i}"], v[f"n{i}"] = starts[i], sizes[i]
        for lp in range(cursor // p + 2):
            got = evaluate(count, {**v, "page": lp})
            assert got == released[row_pages[lp]], (p, starts, sizes, lp)
            assert evaluate(touched, {**v, "page": lp}) == (got > 0)


def test_solver_verdicts_do_not_depend_on_what_ran_before() -> None:
    """Each proof runs in a Z3 context of its own under a resource budget, not a clock: the same
    lemma spends the same resource units alone and after other solving in this process, and a
    budget below what it needs gives ``unknown`` (reported as a failure), never a verdict."""
    dom = [ps >= 1, pre >= 0, pre <= seq, *divmod_facts(seq, ps, "seq")[2],
           *divmod_facts(-pre, ps, "neg_pre")[2]]
    p1, p2, p3 = extend_parts(pre, seq, ps)
    goal = z3.And(ps > p3, z3.Implies(p3 > 0, (pre + p1 + p2) / ps * ps == pre + p1 + p2))
    first = check(dom, goal, SOLVER_RLIMIT)
    for k in (2, 3):  # other solving in between, in the global context too
        dom_k, count, touched = unrolled(k)
        check(dom_k, count == z3.If(touched, 1, 0), SOLVER_RLIMIT)
        z3.Solver().check(z3.Not(z3.Implies(ps >= 1, seq / ps * ps <= seq)))
    again = check(dom, goal, SOLVER_RLIMIT)
    assert first.result == again.result == z3.unsat
    assert first.rlimit_used == again.rlimit_used > 0
    assert check(dom, goal, first.rlimit_used // 4).result == z3.unknown
