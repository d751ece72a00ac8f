"""Z3 lemmas of the hybrid sliding-window allocator (SWA-3, SWA-7, SWA-9, SWA-10), for
unbounded integers and a symbolic page size; each also refutes a planted wrong formula. The
window encodings are checked against ``kvpool.spec.window`` on random inputs."""

from __future__ import annotations

import random

import z3
from formal_z3_encoding import (
    evaluate,
    extend_slot,
    last_loc_aligned,
    merge_bound,
    num_new_pages,
    prove,
    refute,
)
from formal_z3_window import full_page_slot, released_frontier, slide_end
from kvpool.spec import window

ps, pre, seq, pos = z3.Ints("ps pre seq pos")
DOMAIN = [ps >= 1, pre >= 0, pre <= seq]


def test_expansion_covers_exactly_the_touched_page_SWA_10() -> None:
    """SWA-10: the expansion of a slot stays on its page, and every slot of that page is one
    offset of it (so clearing the expansion clears the whole full page; B9)."""
    s, o, t = z3.Ints("s o t")
    dom = [ps >= 1, s >= 0, o >= 0, o < ps]
    prove(dom, full_page_slot(s, o, ps) / ps == s / ps)
    prove([ps >= 1, s >= 0, t >= 0, t / ps == s / ps],
          z3.And(t - s / ps * ps >= 0, t - s / ps * ps < ps,
                 full_page_slot(s, t - s / ps * ps, ps) == t))
    refute(dom, (s + o) / ps == s / ps)          # planted: expansion from the slot, not the page


def test_page_aligned_slides_keep_the_window_SWA_10() -> None:
    """SWA-10: after a slide to ``slide_end`` the released frontier is that position itself, and
    it never passes the window's first position; an unaligned end releases up to ps - 1 more."""
    w, e = z3.Ints("w e")
    dom = [ps >= 1, seq >= 0, w >= 1]
    end = slide_end(seq, w, ps)
    prove(dom, z3.And(released_frontier(end, ps) == end, end <= z3.If(seq - w > 0, seq - w, 0)))
    prove([ps >= 1, e >= 0], z3.And(released_frontier(e, ps) >= e,
                                    released_frontier(e, ps) < e + ps))
    # planted: rounding the window start up releases in-window positions
    refute(dom, released_frontier(seq - w, ps) <= z3.If(seq - w > 0, seq - w, 0))


def test_both_sides_keep_the_same_offsets_SWA_3() -> None:
    """SWA-3: one extend on both sides, from ``last_loc`` and from its aligned SWA peer, gives
    every position the same in-page offset on both sides, whatever pages each side picks.

    Each side's ``slot % ps == pos % ps`` is ``test_extend_keeps_row_layout_MODEL_4`` (for any
    aligned ``last_loc`` and any page); here the two instances are assumed and combined, and
    the SWA side's alignment is shown to be needed: a released peer read as 0 (B8b) breaks it.
    """
    loc_f, loc_s, page_f, page_s = z3.Ints("loc_f loc_s page_f page_s")
    dom = [*DOMAIN, pre <= pos, pos < seq, last_loc_aligned(pre, loc_f, ps)]
    full = extend_slot(pre, loc_f, pos, page_f, ps)
    swa = extend_slot(pre, loc_s, pos, page_s, ps)
    model_4 = [full % ps == pos % ps, swa % ps == pos % ps]  # MODEL-4 on each side
    prove([*dom, last_loc_aligned(pre, loc_s, ps), *model_4], swa % ps == full % ps)
    refute([*dom, ps == 4, loc_s == 0, full % ps == pos % ps], swa % ps == full % ps)


def test_preflight_implies_each_side_succeeds_SWA_7_SWA_9() -> None:
    """SWA-7 / SWA-9: when ``n`` pages fit in free + staged on a side, that side's own merge rule
    (merge iff ``bound > free``) leaves at least ``n`` free pages, for extend (``bound =
    merge_bound``, safe by ``merge_bound_safe``) and decode (``bound = bs >= n``). So the
    composite never has one side allocate and the other refuse."""
    n, free, staged, ext, bs = z3.Ints("n free staged ext bs")
    dom = [ps >= 1, n >= 0, free >= 0, staged >= 0, ext >= 0, bs >= 0, n <= free + staged]
    for bound in (merge_bound(ext, bs, ps), bs):
        after = z3.If(bound > free, free + staged, free)
        prove([*dom, n <= bound], n <= after)
    # the extend bound is an upper bound of the pages of one request
    prove(DOMAIN, num_new_pages(pre, seq, ps) < merge_bound(seq - pre, 1, ps))
    # planted: merging on "bound > free + staged" can leave the side short
    after_wrong = z3.If(merge_bound(ext, bs, ps) > free + staged, free + staged, free)
    refute([*dom, n <= merge_bound(ext, bs, ps)], n <= after_wrong)


def test_window_encodings_follow_the_spec_SWA_10() -> None:
    """The encodings equal ``kvpool.spec.window`` on random concrete inputs."""
    rng = random.Random(7)
    sym = {"s": z3.Int("s"), "o": z3.Int("o"), "e": z3.Int("e"), "w": z3.Int("w")}
    for _ in range(300):
        p = rng.randint(1, 9)
        s, e, q = (rng.randint(0, 200) for _ in range(3))
        w = rng.randint(1, 60)
        o = rng.randrange(p)
        values = {"ps": p, "s": s, "o": o, "e": e, "seq": q, "w": w}
        assert evaluate(full_page_slot(sym["s"], sym["o"], ps), values) == \
            window.full_page_slots([s], p)[o]
        assert evaluate(released_frontier(sym["e"], ps), values) == window.released_frontier(e, p)
        assert evaluate(slide_end(seq, sym["w"], ps), values) == window.slide_end(q, w, p)
