"""Formal checks of the unified full + Mamba admission arithmetic (``UMB-6``).

``kvpool.spec.unified_mamba_views``: the Z3 lemmas below hold over unbounded integers (state and
entry bytes, the dcp factor, slots missing, gap bytes, full tokens freed), each beside a planted
wrong formula Z3 refutes; the Z3 encodings are checked against the Python functions on random
inputs. CrossHair finds a counterexample to the real contract in each planted wrong variant of
``formal_planted_unified_mamba`` (subprocess, marked ``crosshair``).
"""

from __future__ import annotations

import random

import formal_planted_unified_mamba as bugs
import pytest
import z3
from formal_z3_encoding import evaluate, prove, refute
from kvpool.spec import unified_mamba_views as uv
from test_formal_z3_unified import contract_lines, run_crosshair

S, E, D, k, f, g = z3.Ints("S E D k f g")
DOMAIN = [S >= 1, E >= 1, D >= 1, k >= 1, f >= 0, g >= 0]


def ceil_div(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    return -((-a) / b)


def recheck_bound(missing: z3.ArithRef) -> z3.ArithRef:
    """``unified_mamba_views.full_tokens_before_recheck`` (``missing >= 1``)."""
    return ceil_div(((missing - 1) * S + 1) * D, E)


def slot_cost() -> z3.ArithRef:
    """``unified_mamba_views.mamba_slot_full_token_cost``."""
    return ceil_div(S * D, E)


def test_encodings_follow_the_spec() -> None:
    """Each Z3 builder equals its Python function on random concrete inputs."""
    rng = random.Random(21)
    for _ in range(300):
        v = {"S": rng.randint(1, 400), "E": rng.randint(1, 200), "D": rng.randint(1, 4),
             "k": rng.randint(1, 30)}
        assert evaluate(recheck_bound(k), v) == uv.full_tokens_before_recheck(
            v["k"], v["S"], v["E"], v["D"])
        assert evaluate(slot_cost(), v) == uv.mamba_slot_full_token_cost(v["S"], v["E"], v["D"])


def test_recheck_bound_never_skips_a_check_that_could_succeed_UMB_6() -> None:
    """UMB-6: with ``g`` gap bytes the state view counts ``g // S`` slots and ``k`` more are
    missing; while fewer than the bound of full tokens are freed (each ``E / D`` bytes), the
    gap cannot hold the ``g // S + k`` slots. The planted bound without the hidden residue
    (``ceil(k * S * D / E)``) skips checks that would succeed."""
    fits = (g * D + f * E) >= (g / S + k) * S * D  # after freeing f tokens, all slots fit
    prove([*DOMAIN, f < recheck_bound(k)], z3.Not(fits))
    wrong = ceil_div(k * S * D, E)  # planted: ignores the residue the view hides
    refute([*DOMAIN, f < wrong], z3.Not(fits))


def test_recheck_bound_is_the_least_that_may_succeed_UMB_6() -> None:
    """UMB-6: at the bound a check may succeed (when the view hides ``S - 1`` bytes), so no
    larger bound is safe; the planted bound one token higher skips such a check."""
    residue = g - g / S * S
    fits = (g * D + f * E) >= (g / S + k) * S * D
    prove([*DOMAIN, residue == S - 1, f == recheck_bound(k)], fits)
    refute([*DOMAIN, f < recheck_bound(k) + 1], z3.Not(fits))  # planted: one more


def test_one_slot_costs_its_bytes_in_full_tokens_UMB_6() -> None:
    """UMB-6: ``mamba_slot_full_token_cost`` tokens hold one state and one fewer does not; the
    planted floor division under-reserves."""
    c = slot_cost()
    prove(DOMAIN, z3.And(c * E >= S * D, (c - 1) * E < S * D))
    refute(DOMAIN, (S * D / E) * E >= S * D)  # planted: floor


@pytest.mark.parametrize("name", sorted(bugs.REAL))
def test_planted_bug_carries_the_real_contract(name: str) -> None:
    """Each planted variant has its real function's contract, word for word."""
    real = contract_lines(getattr(uv, bugs.REAL[name]))
    assert real and contract_lines(getattr(bugs, name)) == real


@pytest.mark.crosshair
@pytest.mark.parametrize("name", sorted(bugs.REAL))
def test_crosshair_finds_planted_unified_mamba_bug_UMB_6(name: str) -> None:
    """CrossHair reports a counterexample for each planted wrong formula."""
    rc, out = run_crosshair(f"formal_planted_unified_mamba.{name}")
    assert rc == 1 and "error: false when calling" in out, out
