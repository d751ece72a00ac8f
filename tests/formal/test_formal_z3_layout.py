"""Z3 lemmas about the extend / decode layout (EXTEND-4, EXTEND-5, EXTEND-7, DECODE-4, DECODE-5,
MODEL-4, SORT-2), for unbounded integers and a symbolic page size.

Every lemma is also run against a planted wrong formula, which must give a counterexample, so a
lemma that holds vacuously (contradictory assumptions) or an encoding that ignores its input
fails here. ``formal_z3_encoding`` mirrors the Python; ``test_formal_z3_encoding.py`` ties the
two together.
"""

from __future__ import annotations

import z3
from formal_z3_encoding import (
    ceil_div,
    decode_needs_page,
    divmod_facts,
    divmod_unique,
    extend_new_page_index,
    extend_parts,
    extend_slot,
    last_loc_aligned,
    merge_bound,
    num_new_pages,
    prove,
    prove_chain,
    refute,
)

ps, pre, seq = z3.Ints("ps pre seq")
DOMAIN = [ps >= 1, pre >= 0, pre <= seq]
P1, P2, P3 = extend_parts(pre, seq, ps)
# Explicit quotients of ``seq`` and ``-pre`` by ``ps`` (``ceil(pre/ps) == -(-pre // ps)``): with
# them the division lemmas are linear enough for the solver to settle within a small resource
# budget, whatever it solved before; without them some come back ``unknown``.
QUOTIENTS = [*divmod_facts(seq, ps, "seq")[2], *divmod_facts(-pre, ps, "neg_pre")[2]]


def floor_parts(prefix_len: z3.ArithRef, seq_len: z3.ArithRef,
                page_size: z3.ArithRef) -> tuple[z3.ArithRef, z3.ArithRef, z3.ArithRef]:
    """Planted bug: part 1 without the ``min(seq, ...)`` cut (a short extend overruns)."""
    prefix_ceil = ceil_div(prefix_len, page_size) * page_size
    seq_floor = seq_len / page_size * page_size
    part1 = prefix_ceil - prefix_len
    part2 = z3.If(seq_floor - prefix_ceil > 0, seq_floor - prefix_ceil, 0)
    return part1, part2, seq_len - prefix_len - part1 - part2


def test_extend_parts_nonnegative_EXTEND_5() -> None:
    """EXTEND-5: each of the three parts is >= 0 (and a dropped ``min`` breaks it)."""
    prove(DOMAIN, z3.And(P1 >= 0, P2 >= 0, P3 >= 0))
    w1, w2, w3 = floor_parts(pre, seq, ps)
    refute(DOMAIN, z3.And(w1 >= 0, w2 >= 0, w3 >= 0))


def test_extend_parts_sum_EXTEND_5() -> None:
    """EXTEND-5: parts 1 and 2 never exceed the extend; the three sum to ``seq - prefix``."""
    prove(DOMAIN, z3.And(seq - pre >= P1 + P2, seq - pre == P1 + P2 + P3))
    # planted: part 2 counted from the prefix instead of its page boundary
    wrong2 = z3.If(seq / ps * ps - pre > 0, seq / ps * ps - pre, 0)
    refute([*DOMAIN, ps == 4], P1 + wrong2 <= seq - pre)


def test_extend_part2_whole_pages_EXTEND_5() -> None:
    """EXTEND-5: part 2 is ``q * ps`` with the quotient stated: ``q = max(0, seq//ps -
    ceil(prefix/ps))`` (``x % ps == 0`` with a symbolic ``ps`` is non-linear and times out)."""
    q = z3.If(seq / ps - ceil_div(pre, ps) > 0, seq / ps - ceil_div(pre, ps), 0)
    prove([*DOMAIN, *QUOTIENTS], z3.And(q >= 0, q * ps == P2))
    # planted: pages counted from the prefix (at a concrete page size the search is linear:
    # with ps symbolic its outcome within the budget depends on what the process built before)
    refute([*DOMAIN, *QUOTIENTS, ps == 4], (seq - pre) / ps * ps == P2)


def test_extend_part3_short_EXTEND_5() -> None:
    """EXTEND-5: part 3 is shorter than a page, and non-empty only when part 2 ends on a page
    boundary (it heads a new page)."""
    goal = z3.And(ps > P3, z3.Implies(P3 > 0, (pre + P1 + P2) / ps * ps == pre + P1 + P2))
    prove([*DOMAIN, *QUOTIENTS], goal)
    refute([*DOMAIN, *QUOTIENTS], ps - 1 > P3)  # planted off-by-one


def test_extend_new_pages_EXTEND_4() -> None:
    """EXTEND-4: the layout consumes ``ceil(seq/ps) - ceil(prefix/ps)`` pages: one per whole
    page of part 2, one more when part 3 is non-empty."""
    q = z3.If(seq / ps - ceil_div(pre, ps) > 0, seq / ps - ceil_div(pre, ps), 0)
    n = num_new_pages(pre, seq, ps)
    prove(DOMAIN, z3.And(n >= 0, q + z3.If(P3 > 0, 1, 0) == n))
    refute(DOMAIN, q + z3.If(P3 > 0, 1, 0) == seq / ps - pre / ps)  # planted: floor for ceil


def test_extend_new_logical_pages_EXTEND_4() -> None:
    """EXTEND-4: a logical page is touched by ``[prefix, seq)`` and not by ``[0, prefix)`` iff it
    lies in ``[ceil(prefix/ps), ceil(seq/ps))``."""
    page = z3.Int("page")
    fresh = z3.And(pre < seq, page * ps < seq, (page + 1) * ps > pre, z3.Not(page * ps < pre))
    goal = fresh == z3.And(ceil_div(pre, ps) <= page, page < ceil_div(seq, ps))
    prove([*DOMAIN, page >= 0], goal)
    refute([*DOMAIN, page >= 0],
           fresh == z3.And(pre / ps <= page, page < ceil_div(seq, ps)))  # planted floor


def test_decode_is_extend_DECODE_4() -> None:
    """DECODE-4: decode is extend with ``prefix = seq - 1``; it needs a page iff
    ``(seq - 1) % ps == 0`` (0 or 1 pages), and for ``ps == 1`` always."""
    dom = [ps >= 1, seq >= 1]
    n = num_new_pages(seq - 1, seq, ps)
    prove(dom, z3.And(z3.Or(n == 0, n == 1), decode_needs_page(seq, ps) == (n == 1)))
    prove([seq >= 1], decode_needs_page(seq, z3.IntVal(1)))
    # planted: SGLang 0.5.23's CPU count ``seq % ps == 1``, wrong at ps == 1 (the search is
    # pointed there: a model over a free ps took 2-11 s)
    refute([*dom, ps == 1], (seq % ps == 1) == (n == 1))


def test_decode_layout_DECODE_5() -> None:
    """DECODE-5: a decode that opens a page writes offset 0 of it (``page * ps``), otherwise it
    continues ``last_loc + 1``."""
    last_loc, page = z3.Ints("last_loc page")
    p1, p2, p3 = extend_parts(seq - 1, seq, ps)
    dom = [ps >= 1, seq >= 1, last_loc_aligned(seq - 1, last_loc, ps)]
    slot = extend_slot(seq - 1, last_loc, seq - 1, page, ps)
    goal = z3.If(decode_needs_page(seq, ps),
                 z3.And(slot == page * ps, p1 == 0, p2 + p3 == 1),
                 z3.And(slot == last_loc + 1, p1 == 1))
    prove(dom, goal)
    refute(dom, z3.Implies(decode_needs_page(seq, ps), slot == page * ps + 1))


def test_extend_keeps_row_layout_MODEL_4() -> None:
    """MODEL-4 / EXTEND-5: given ``(last_loc + 1) % ps == prefix % ps``, every new position ``p``
    gets a slot with ``slot % ps == p % ps``; part 1 stays on ``last_loc``'s page; positions past
    it land on the page of their logical page (index ``p // ps - ceil(prefix/ps)`` >= 0).

    Part 1 is proved as a calculation over explicit quotients (``prefix = qa * ps + ra``,
    ``last_loc + 1 = qc * ps + rc``) with instances of ``divmod_unique``.
    """
    last_loc, pos, page = z3.Ints("last_loc pos page")
    dom = [*DOMAIN, pre <= pos, pos < seq, page >= 0, last_loc_aligned(pre, last_loc, ps)]
    slot = extend_slot(pre, last_loc, pos, page, ps)
    in_part1 = pos < ceil_div(pre, ps) * ps
    qa, ra, facts_a = divmod_facts(pre, ps, "pre")
    qc, rc, facts_c = divmod_facts(last_loc + 1, ps, "loc1")
    off = ra + pos - pre  # in-page offset of pos (and of its slot) in part 1
    part1 = [*dom, in_part1, *facts_a, *facts_c,
             divmod_unique(-pre, ps, -qa - 1, ps - ra), divmod_unique(slot, ps, qc, off),
             divmod_unique(last_loc, ps, qc, ra - 1), divmod_unique(pos, ps, qa, off)]
    prove_chain(part1, [ra > 0, rc == ra, z3.And(off >= 0, off < ps),
                        z3.And(slot / ps == last_loc / ps, slot % ps == pos % ps)])
    rest = [*dom, z3.Not(in_part1)]
    for i, x in enumerate((pre, -pre, pos, slot)):
        rest += divmod_facts(x, ps, f"d{i}")[2]
    new_index = extend_new_page_index(pre, pos, ps)
    for goal in (slot % ps == pos % ps, slot / ps == page, new_index >= 0):
        prove(rest, goal)
    # planted: part 1 continues at last_loc instead of last_loc + 1 (the model search is pointed
    # at ps == 4: with a free ps it took from 1 s to over 20 s depending on the context)
    wrong = z3.If(in_part1, last_loc + (pos - pre), page * ps + pos % ps)
    refute([*dom, ps == 4], wrong % ps == pos % ps)


def test_merge_bound_safe_SORT_2() -> None:
    """SORT-2 / EXTEND-7: ``merge_bound`` is safe for any batch, by induction on the batch size.

    Step: if the first k requests need ``A <= E // ps + k`` pages for ``E`` tokens, then with one
    more request (``e = seq - prefix`` tokens, ``n`` new pages) ``A + n <= (E + e) // ps + k + 1``.
    Base ``0 <= 0 // ps + 0``. Hence ``Σ n_i <= Σ ext // ps + bs < merge_bound``: when the model
    skips the merge, the free list alone covers the batch.
    """
    a, e_total, k = z3.Ints("A E k")
    n = num_new_pages(pre, seq, ps)
    step_dom = [*DOMAIN, k >= 0, e_total >= 0, a >= 0, a <= e_total / ps + k]
    prove(step_dom, a + n <= (e_total + (seq - pre)) / ps + k + 1)
    prove([ps >= 1], z3.IntVal(0) <= z3.IntVal(0) / ps + 0)
    prove([ps >= 1, k >= 0, e_total >= 0, a >= 0, a <= e_total / ps + k],
          a < merge_bound(e_total, k, ps))
    # per request: n <= ext // ps + 1, and the +1 per request is needed
    prove(DOMAIN, n <= (seq - pre) / ps + 1)
    refute(DOMAIN, n <= (seq - pre) / ps)
    # planted bound without the per-request slack
    refute(step_dom, a + n <= (e_total + (seq - pre)) / ps + 1)


def test_divmod_unique_MODEL_2() -> None:
    """MODEL-2: slot ``s == q * ps + r`` with ``0 <= r < ps`` lies on page ``q`` at offset ``r``
    (uniqueness of floor division; justifies ``divmod_facts``)."""
    x, q, r = z3.Ints("x q r")
    dom = [ps >= 1, x == q * ps + r, r >= 0, r < ps]
    prove(dom, z3.And(x / ps == q, x % ps == r))
    refute([ps == 3, x == q * ps + r, r >= 0, r <= ps], x / ps == q)  # planted: r <= ps
