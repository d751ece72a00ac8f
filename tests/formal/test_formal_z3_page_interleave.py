"""Z3 lemmas about the page-interleave arithmetic (PINTER-1, PINTER-3, PINTER-5, PINTER-7),
for unbounded integers and a symbolic shard size ``N`` and page size.

Each lemma is run against a planted wrong formula too, which must give a counterexample, so a
lemma that holds vacuously fails here. The formulas are those of
:mod:`kvpool.spec.page_interleave` (``page_class``, ``physical_page``, ``start_class``,
``class_counts``, ``min_class_floor``); ``test_formulas_match_the_spec`` ties the encoding to
the Python on a grid.
"""

from __future__ import annotations

import itertools

import z3
from formal_z3_encoding import divmod_facts, divmod_unique, evaluate, prove, refute
from kvpool.spec.page_interleave import class_counts, min_class_floor, page_class, physical_page

n, page, rank, local, per_rank = z3.Ints("n page rank local per_rank")
base, prefix, j, k, start, cls, m = z3.Ints("base prefix j k start cls m")


def owner(x: z3.ArithRef) -> z3.ArithRef:
    """``page_class``: ``x % N``."""
    return x % n


def drawn(c: z3.ArithRef, first: z3.ArithRef, num_pages: z3.ArithRef,
          shards: z3.ArithRef) -> z3.ArithRef:
    """``class_counts(first, num_pages, N)[c]``."""
    return num_pages / shards + z3.If((c - first) % shards < num_pages % shards, 1, 0)


def test_formulas_match_the_spec() -> None:
    """The encoding computes what the Python computes, on a grid of small values."""
    for shards, x in itertools.product(range(2, 6), range(0, 40)):
        values = {"n": shards, "page": x}
        assert evaluate(owner(page), values) == page_class(x, shards)
        assert evaluate(page / n, values) == physical_page(x, shards)
    for shards, first, pages in itertools.product(range(2, 5), range(4), range(0, 13)):
        if first >= shards:
            continue
        want = class_counts(first, pages, shards)
        got = [evaluate(drawn(z3.IntVal(c), start, k, n), {"start": first, "k": pages,
                                                           "n": shards})
               for c in range(shards)]
        assert got == want


def test_class_and_physical_page_are_a_bijection_PINTER_1() -> None:
    """PINTER-1: rank ``r``'s physical page ``q`` is logical page ``q * N + r``, whose class is
    ``r`` and physical page ``q``; a reserved page (``l < N``) is physical page 0, an
    allocatable one (``N <= l < (P + 1) * N``) a physical page in ``1..P``."""
    domain = [n >= 2, rank >= 0, rank < n, local >= 0]
    x = local * n + rank
    prove([*domain, divmod_unique(x, n, local, rank)], z3.And(owner(x) == rank, x / n == local))
    _q, _r, facts = divmod_facts(page, n, "page")
    alloc = [n >= 2, per_rank >= 0, page >= n, page < (per_rank + 1) * n, *facts]
    prove(alloc, z3.And(page / n >= 1, page / n <= per_rank, owner(page) >= 0, owner(page) < n))
    prove([n >= 2, page >= 0, page < n, *facts], page / n == 0)
    # planted: the class as the physical page
    refute([*domain, divmod_unique(x, n, local, rank)], x / n == rank)


def test_extension_keeps_the_chain_phase_PINTER_5() -> None:
    """PINTER-5: an extension's position-page ``j`` after ``p`` prefix pages draws class
    ``((b + p) % N + j) % N``, which is ``(b + p + j) % N``: the class of a chain's page
    depends on its position only, however the chain was split into extensions."""
    domain = [n >= 2, base >= 0, prefix >= 0, j >= 0]
    q1, r1, f1 = divmod_facts(base + prefix, n, "bp")
    q2, r2, f2 = divmod_facts(r1 + j, n, "rj")
    _q3, _r3, f3 = divmod_facts(base + prefix + j, n, "bpj")
    facts = [*f1, *f2, *f3, divmod_unique(base + prefix + j, n, q1 + q2, r2)]
    prove(domain + facts, ((base + prefix) % n + j) % n == (base + prefix + j) % n)
    # planted: an extension that restarts at its base, ignoring the prefix
    refute([*domain, n == 2, prefix == 1, j == 0], (base + j) % n == (base + prefix + j) % n)


def test_each_class_draws_a_near_equal_share_PINTER_7() -> None:
    """PINTER-7: a run of ``K`` pages draws ``K // N`` or ``K // N + 1`` pages of every class
    (the per-rank counts differ by at most one), and for N = 2..5 the shares sum to ``K``."""
    domain = [n >= 2, k >= 0, start >= 0, start < n, cls >= 0, cls < n]
    share = drawn(cls, start, k, n)
    prove(domain, z3.And(share >= k / n, share <= k / n + 1))
    for shards in range(2, 6):
        total = z3.Sum([drawn(z3.IntVal(c), start, k, z3.IntVal(shards))
                        for c in range(shards)])
        prove([k >= 0, start >= 0, start < shards], total == k)
    # planted: every class rounded up
    refute([*domain, n == 2, k == 1], (k + n - 1) / n * n == k)


def test_the_min_class_floor_admits_only_what_every_class_supplies_PINTER_3() -> None:
    """PINTER-3: with ``m`` the fewest free pages of any class, a chain that fits under
    ``available_size() = N * ps * m`` (``K <= N * m`` pages) needs at most ``m`` pages of
    every class, whatever its start; the floor never exceeds the aggregate. The aggregate as a
    gate would admit a chain a class cannot supply."""
    ps, other = z3.Ints("ps other")
    domain = [n >= 2, m >= 0, k >= 0, k <= n * m, start >= 0, start < n, cls >= 0, cls < n]
    _q, _r, facts = divmod_facts(k, n, "k")
    prove(domain + facts, drawn(cls, start, k, n) <= m)
    prove([n >= 2, m >= 0, other >= m, ps >= 1], n * ps * m <= ps * (m + (n - 1) * other))
    # planted: gate on the aggregate (2 classes: m and other) instead of the floor
    refute([n == 2, m >= 0, other >= m, k >= 0, k <= m + other, start == 0, cls == 0],
           drawn(cls, start, k, n) <= m)
    assert min_class_floor([3, 1], 4) == 8  # the Python agrees with the formula's example
