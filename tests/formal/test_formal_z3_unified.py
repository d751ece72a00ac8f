"""Formal checks of the unified pools' byte arithmetic (``kvpool.spec.unified_layout``).

Z3 lemmas over unbounded integers (UNI-1, UNI-2, UNI-3, UNI-7, UNI-8, UNI-14), each also refuting a
planted wrong formula; the Z3 encodings are checked against the Python functions on random
inputs. CrossHair finds a counterexample to the real contract in each planted wrong variant of
``formal_planted_unified`` (run in a subprocess with the CI's options, marked ``crosshair``).
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import formal_planted_unified as bugs
import pytest
import z3
from formal_z3_encoding import evaluate, prove, refute
from kvpool.spec import unified_layout as ul

HERE = Path(__file__).parent
CONTRACT_LINE = re.compile(r"^\s*(pre|post)(\[[^\]]*\])?:")


def z_max(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    return z3.If(a >= b, a, b)


def z_min(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    return z3.If(a <= b, a, b)


def min_page_index(floor: z3.ArithRef, entry: z3.ArithRef, ps: z3.ArithRef) -> z3.ArithRef:
    """``unified_layout.min_page_index``."""
    min_slot = -((-floor) / entry)
    return -((-min_slot) / ps)


def fits_pages(nf: z3.ArithRef, ns: z3.ArithRef, hf: z3.ArithRef, hs: z3.ArithRef,
               rf: z3.ArithRef, rs: z3.ArithRef, gap: z3.ArithRef, pf: z3.ArithRef,
               pz: z3.ArithRef) -> z3.BoolRef:
    """``unified_layout.fits_pages``."""
    return z3.And(nf <= hf + rf, ns <= hs + rs,
                  z_max(0, nf - hf) * pf + z_max(0, ns - hs) * pz <= gap)


def eager_joint_pages(gap: z3.ArithRef, pf: z3.ArithRef, pz: z3.ArithRef, rf: z3.ArithRef,
                      rs: z3.ArithRef) -> z3.ArithRef:
    """``unified_layout.eager_joint_pages``."""
    return z_min(z_min(gap / (pf + pz), rf), rs)


def lazy_joint_pages(gap: z3.ArithRef, pf: z3.ArithRef, pz: z3.ArithRef, hf: z3.ArithRef,
                     hs: z3.ArithRef, rf: z3.ArithRef, rs: z3.ArithRef) -> z3.ArithRef:
    """``unified_layout.lazy_joint_pages``."""
    both_drain = z_min(hf, hs)
    ext = z3.If(hf <= hs, pf, pz)
    draining = z3.If(hf <= hs, hs, hf)
    one = z_min(draining - both_drain, gap / ext)
    both = (gap - one * ext) / (pf + pz)
    return z_min(z_min(both_drain + one + both, hf + rf), hs + rs)


gap, pf, pz, hf, hs, rf, rs, n = z3.Ints("gap pf pz hf hs rf rs n")
CAPACITY_DOMAIN = [gap >= 0, pf >= 1, pz >= 1, hf >= 0, hs >= 0, rf >= 0, rs >= 0]


def test_encodings_follow_the_spec() -> None:
    """Each Z3 builder equals its Python function on random concrete inputs."""
    rng = random.Random(34)
    for _ in range(300):
        v = {"gap": rng.randint(0, 400), "pf": rng.randint(1, 9), "pz": rng.randint(1, 9),
             "hf": rng.randint(0, 12), "hs": rng.randint(0, 12), "rf": rng.randint(0, 20),
             "rs": rng.randint(0, 20), "n": rng.randint(0, 30)}
        args = (v["gap"], v["pf"], v["pz"], v["rf"], v["rs"])
        assert evaluate(eager_joint_pages(gap, pf, pz, rf, rs), v) == ul.eager_joint_pages(*args)
        assert evaluate(lazy_joint_pages(gap, pf, pz, hf, hs, rf, rs), v) == (
            ul.lazy_joint_pages(v["gap"], v["pf"], v["pz"], v["hf"], v["hs"], v["rf"], v["rs"]))
        assert evaluate(fits_pages(n, n, hf, hs, rf, rs, gap, pf, pz), v) == ul.fits_pages(
            v["n"], v["n"], v["hf"], v["hs"], v["rf"], v["rs"], v["gap"], v["pf"], v["pz"])
        floor, entry, ps = rng.randint(0, 600), rng.randint(1, 64), rng.randint(1, 16)
        assert evaluate(min_page_index(z3.IntVal(floor), z3.IntVal(entry), z3.IntVal(ps)),
                        {}) == ul.min_page_index(floor, entry, ps)


def test_first_page_clears_the_sink_UNI_2() -> None:
    """UNI-2: the first allocatable page starts at or above the sink, and is the lowest such
    page; the planted floor division lets page 0's bytes overlap the sink."""
    floor, entry, ps = z3.Ints("floor entry ps")
    dom = [floor >= 0, entry >= 1, ps >= 1]
    m = min_page_index(floor, entry, ps)
    prove(dom, m * ps * entry >= floor)
    prove(dom, z3.Or(m == 0, (m - 1) * ps * entry < floor))
    refute(dom, (floor / entry / ps) * ps * entry >= floor)          # planted: floor for ceil


def test_pages_of_one_pool_are_disjoint_byte_ranges_UNI_1() -> None:
    """UNI-1: distinct pages of one sub-pool cover disjoint bytes, all inside the buffer."""
    p, q, pb, e, ps, total = z3.Ints("p q pb e ps total")
    dom = [e >= 1, ps >= 1, pb == ps * e, total >= 0, p >= 0, q > p, q < total / e / ps]
    prove(dom, z3.And((p + 1) * pb <= q * pb, (q + 1) * pb <= total))
    refute(dom, (q + 1) * pb <= total - pb)                          # planted: one page short


def test_frontiers_never_cross_while_allocation_fits_UNI_3_UNI_8() -> None:
    """UNI-3, UNI-8: extending both frontiers by an amount that fits the gap keeps the
    grow-up pool's high frontier at or below the grow-down pool's low frontier."""
    up_high, down_low, ef, es = z3.Ints("up_high down_low ef es")
    dom = [up_high >= 0, up_high <= down_low, pf >= 1, pz >= 1, ef >= 0, es >= 0,
           ef * pf + es * pz <= z_max(0, down_low - up_high)]
    prove(dom, up_high + es * pz <= down_low - ef * pf)
    refute([*dom[:-1], ef * pf <= down_low - up_high, es * pz <= down_low - up_high],
           up_high + es * pz <= down_low - ef * pf)                  # planted: sides checked apart


def test_eager_capacity_is_the_largest_fit_UNI_7() -> None:
    """UNI-7: eager ``available_size`` pages fit, one more does not; the planted variant that
    charges only the full side's bytes overstates it."""
    k = eager_joint_pages(gap, pf, pz, rf, rs)
    prove(CAPACITY_DOMAIN, fits_pages(k, k, 0, 0, rf, rs, gap, pf, pz))
    prove(CAPACITY_DOMAIN, z3.Not(fits_pages(k + 1, k + 1, 0, 0, rf, rs, gap, pf, pz)))
    wrong = z_min(z_min(gap / pf, rf), rs)
    refute(CAPACITY_DOMAIN, fits_pages(wrong, wrong, 0, 0, rf, rs, gap, pf, pz))


def test_lazy_capacity_is_the_largest_fit_UNI_7_UNI_8() -> None:
    """UNI-7, UNI-8: lazy ``available_size`` pages fit (holes first, then the gap), one more
    does not; counting the drained holes twice overstates it."""
    k = lazy_joint_pages(gap, pf, pz, hf, hs, rf, rs)
    prove(CAPACITY_DOMAIN, fits_pages(k, k, hf, hs, rf, rs, gap, pf, pz))
    prove(CAPACITY_DOMAIN, z3.Not(fits_pages(k + 1, k + 1, hf, hs, rf, rs, gap, pf, pz)))
    wrong = z_min(z_min(k + z_min(hf, hs), hf + rf), hs + rs)
    refute(CAPACITY_DOMAIN, fits_pages(wrong, wrong, hf, hs, rf, rs, gap, pf, pz))


def test_fit_is_monotone_UNI_8() -> None:
    """UNI-8: if ``n`` pages fit, every smaller demand fits (so capacity is one threshold)."""
    m = z3.Int("m")
    dom = [*CAPACITY_DOMAIN, n >= 0, m >= 0, m <= n, fits_pages(n, n, hf, hs, rf, rs, gap, pf, pz)]
    prove(dom, fits_pages(m, m, hf, hs, rf, rs, gap, pf, pz))


def band_pages(pb: z3.ArithRef, lo_page: z3.ArithRef, num: z3.ArithRef, low: z3.ArithRef,
               high: z3.ArithRef) -> z3.ArithRef:
    """``unified_layout.band_pages``."""
    return z_max(0, z_min(high / pb, num) - z_max(-((-low) / pb), lo_page))


def test_band_pages_stay_inside_the_band_UNI_14() -> None:
    """UNI-14: the float's pages counted in a band between two frontiers lie wholly inside it
    (so SWA pages placed above its span after full's new pages never reach full's new
    frontier); the planted raw span counts a page below an off-grid low frontier."""
    pb, lo_page, num, low, high, first = z3.Ints("pb lo_page num low high first")
    dom = [pb >= 1, lo_page >= 0, num >= lo_page, low >= 0, high >= 0,
           first == z_max(-((-low) / pb), lo_page)]
    k = band_pages(pb, lo_page, num, low, high)
    prove(dom, z3.And(k >= 0, first * pb >= low, z3.Or(k == 0, (first + k) * pb <= high),
                      k <= num - lo_page))
    raw = z_max(0, z_min((high - low) / pb, num - lo_page))
    refute(dom, z3.Or(raw == 0, (first + raw) * pb <= high))
    rng = random.Random(14)
    for _ in range(300):
        v = {"pb": rng.randint(1, 64), "lo_page": rng.randint(0, 8), "low": rng.randint(0, 900),
             "high": rng.randint(0, 900)}
        v["num"] = v["lo_page"] + rng.randint(0, 20)
        assert evaluate(band_pages(pb, lo_page, num, low, high), v) == ul.band_pages(
            v["pb"], v["lo_page"], v["num"], v["low"], v["high"])


def contract_lines(fn: object) -> list[str]:
    doc = getattr(fn, "__doc__", None) or ""
    return [ln.strip() for ln in doc.splitlines() if CONTRACT_LINE.match(ln)]


@pytest.mark.parametrize("name", sorted(bugs.REAL))
def test_planted_bug_carries_the_real_contract(name: str) -> None:
    """Each planted variant has its real function's contract, word for word."""
    real = contract_lines(getattr(ul, bugs.REAL[name]))
    assert real and contract_lines(getattr(bugs, name)) == real


def run_crosshair(target: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get(
        "PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "crosshair", "check", "--analysis_kind=PEP316",
         "--per_condition_timeout=5", target],
        capture_output=True, text=True, timeout=300, cwd=HERE, env=env, check=False)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.crosshair
@pytest.mark.parametrize("name", sorted(bugs.REAL))
def test_crosshair_finds_planted_unified_bug_UNI_2_UNI_3_UNI_7(name: str) -> None:
    """CrossHair reports a counterexample for each planted wrong formula."""
    rc, out = run_crosshair(f"formal_planted_unified.{name}")
    assert rc == 1 and "error: false when calling" in out, out
