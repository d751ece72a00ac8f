"""Z3 lemmas about the HiSparse sizing arithmetic (HSP-1, HSP-2, HSP-7, HSP-10), for unbounded
integers and a symbolic page size and ratio, beside ``kvpool.spec.hisparse_sizing`` (whose
PEP 316 contracts CrossHair checks on bounded inputs).

Every lemma is also run against a planted wrong formula, which must give a counterexample, so a
lemma that holds vacuously or an encoding that ignores its input fails here. The last test ties
the encodings to the Python functions on a grid of values.
"""

from __future__ import annotations

import itertools

import z3
from formal_z3_encoding import divmod_facts, prove, refute
from kvpool.spec import hisparse_sizing as sizing

size, ratio, ps, mapped, need = z3.Ints("size ratio ps mapped need")
DOMAIN = [size >= 0, ratio >= 1, ps >= 1]


def logical_pages(s: z3.ArithRef, r: z3.ArithRef, p: z3.ArithRef) -> z3.ArithRef:
    return (s * r) / p


def mapping_len(s: z3.ArithRef, r: z3.ArithRef, p: z3.ArithRef) -> z3.ArithRef:
    return s * r + p + 1


def split(m: z3.ArithRef, n: z3.ArithRef, p: z3.ArithRef) -> tuple[z3.ArithRef, z3.ArithRef]:
    """``device_buffer_split``'s ``(pad, extra)`` when fewer than ``n`` slots are mapped."""
    pad = (p - m % p) % p
    return pad, n - m - pad  # whole pages: extra == (qn - qm - 1 + qp) * ps below


def test_logical_side_holds_ratio_times_the_device_pages_HSP_1() -> None:
    """HSP-1: ``size * r // ps >= r * (size // ps) >= size // ps``: the logical side has at
    least ``r`` pages per device page (a ratio of 0 breaks the second)."""
    q, _, facts = divmod_facts(size, ps, "size")
    prove([*DOMAIN, *facts], z3.And(logical_pages(size, ratio, ps) >= ratio * q, ratio * q >= q))
    refute([size >= 0, ratio >= 0, ps >= 1, *facts], ratio * q >= q + 0 * size + (q > 0))


def test_every_logical_slot_lies_below_the_minus_one_entry_HSP_1() -> None:
    """HSP-1: the last slot of the last logical page, ``(pages + 1) * ps - 1``, is below the
    trailing ``-1`` at ``mapping_len - 1``; a mapping without the padding page's ``ps`` rows
    would put it there or past it."""
    pages = logical_pages(size, ratio, ps)
    _, _, facts = divmod_facts(size * ratio, ps, "full")
    last_slot = (pages + 1) * ps - 1
    prove([*DOMAIN, *facts], last_slot < mapping_len(size, ratio, ps) - 1)
    refute([*DOMAIN, *facts], last_slot < size * ratio + 1 - 1)


def test_capacity_is_the_smaller_side_HSP_2() -> None:
    """HSP-2: ``min(logical, device)`` never exceeds either side (a max would)."""
    a, b = z3.Ints("logical device")
    low = z3.If(a < b, a, b)
    prove([a >= 0, b >= 0], z3.And(low <= a, low <= b, z3.Or(low == a, low == b)))
    refute([a >= 0, b >= 0], z3.If(a > b, a, b) <= a)


def test_device_buffer_grows_by_whole_pages_HSP_7() -> None:
    """HSP-7: with fewer bound slots than a page-multiple ``need``, the pad is below a page and
    what is taken from the device side is whole pages, ``>= 0``, summing to ``need``; a pad of
    ``ps - m % ps`` (no outer ``% ps``) pads a full page."""
    pad, extra = split(mapped, need, ps)
    qm, rm, m_facts = divmod_facts(mapped, ps, "mapped")
    qn = z3.Int("need_q")
    qp, _, p_facts = divmod_facts(ps - rm, ps, "pad")
    # the quotients explicit (pad = ps - rm below a full page, else 0): linear for the solver
    facts = [*m_facts, *p_facts, need == qn * ps, z3.Or(z3.And(rm == 0, qp == 1),
                                                         z3.And(rm > 0, qp == 0))]
    prove([ps >= 1, mapped >= 0, *m_facts, *p_facts], facts[-1])  # the case split holds
    assume = [ps >= 1, mapped >= 0, need > mapped, *facts]
    prove(assume, z3.And(pad >= 0, pad < ps, mapped + pad + extra == need))
    prove(assume, extra == (qn - qm - 1 + qp) * ps)
    prove(assume, z3.And(extra >= 0, qn - qm - 1 + qp >= 0))
    refute(assume, ps - mapped % ps < ps)


def test_compressed_last_loc_keeps_minus_one_HSP_10() -> None:
    """HSP-10: at compress ratio 4, ``(loc - 3) // 4`` keeps ``-1`` and never points past the
    block of ``loc``; ``loc // 4`` maps ``-1`` to ``-1`` too but a prefix of 1..3 tokens to
    block 0, which is not complete."""
    loc = z3.Int("loc")
    c = (loc - 3) / 4
    prove([loc == -1], c == -1)
    prove([loc >= -1], z3.And(c * 4 <= loc, (c + 1) * 4 > loc - 3))
    refute([loc >= 0, loc <= 2], loc / 4 == -1)


def test_encodings_match_the_python() -> None:
    """The encodings above are ``hisparse_sizing``'s functions on a grid."""
    for s, r, p in itertools.product(range(0, 9), range(1, 4), (1, 2, 4)):
        assert sizing.num_pages(sizing.logical_size(s, r), p) == s * r // p
        assert sizing.mapping_len(s, r, p) == s * r + p + 1
    for m, n, p in itertools.product(range(0, 9), range(0, 13), (1, 2, 4)):
        if n % p == 0 and m < n:
            assert sizing.device_buffer_split(m, n, p)[1:] == ((p - m % p) % p,
                                                               n - m - (p - m % p) % p)
    for loc in range(-1, 12):
        assert sizing.compressed_last_loc(loc, 4) == (loc - 3) // 4
