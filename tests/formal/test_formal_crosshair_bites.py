"""The CrossHair contracts bite: planted bugs carrying the real contracts are caught.

``formal_planted_bugs`` holds wrong variants of spec functions (boundary trim off by one, dedup
forgotten, floor for ceil in the page count, None decided before the merge). Each carries the
real function's ``pre:``/``post:`` lines word for word (checked here), and ``crosshair check``
run on it in a subprocess, with the CI's options, must report a counterexample. Because
CrossHair's reach depends on the environment (SPEC.md, Appendix A), these tests run
in CI's own environment. ``crosshair diffbehavior`` compares reference and optimised arithmetic.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import formal_planted_bugs as bugs
import pytest
from kvpool.spec import AllocatorModel, layout

HERE = Path(__file__).parent
CONTRACT_LINE = re.compile(r"^\s*(pre|post|raises|inv)(\[[^\]]*\])?:")


def contract_lines(fn: Callable[..., object]) -> list[str]:
    """The ``pre:``/``post:``/``raises:`` lines of ``fn``'s docstring, stripped."""
    return [ln.strip() for ln in (fn.__doc__ or "").splitlines() if CONTRACT_LINE.match(ln)]


PLANTED = {
    "two_segments_pages_boundary_off_by_one": bugs.two_segments_pages,
    "two_segments_pages_no_dedup": bugs.two_segments_pages,
    "num_new_pages_floor": layout.num_new_pages,
    "extend_decision_merge_skipped": bugs.extend_decision,
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_planted_bug_carries_the_real_contract_ERR_1(name: str) -> None:
    """The variant's contract is the real function's, line for line (and not empty)."""
    real = contract_lines(PLANTED[name])
    assert any(line.startswith("post") for line in real)
    assert contract_lines(getattr(bugs, name)) == real


def test_extend_decision_models_the_model_EXTEND_6_EXTEND_7() -> None:
    """EXTEND-6 / EXTEND-7 / SORT-2: ``extend_decision`` predicts ``AllocatorModel.alloc_extend``
    (None or not, free and staged counts after) on random need_sort states."""
    rng = random.Random(5)
    outcomes = set()
    for _ in range(200):
        ps = rng.choice([1, 2, 4, 8])
        model = AllocatorModel(ps * rng.randint(1, 24), ps, paged=True, need_sort=True)
        held = model.alloc(ps * rng.randint(0, model.num_pages)) or []
        pages = sorted({s // ps for s in held})
        rng.shuffle(pages)
        for page in pages[: rng.randint(0, len(pages))]:
            model.free([page * ps])  # staged under need_sort
        bs = rng.randint(1, 3)
        prefix = [0] * bs
        seq = [rng.randint(0, 6 * ps) for _ in range(bs)]
        want = bugs.extend_decision(prefix, seq, len(model.free_pages), len(model.staged), ps)
        got = model.alloc_extend(prefix, seq, [-1] * bs)
        assert (got is None) == (want is None)
        if want is not None:
            assert (len(model.free_pages), len(model.staged)) == want
        outcomes.add((want is None, bool(model.staged)))
    # (None, pages still staged) cannot happen: a None always follows a merge (SORT-2)
    assert outcomes == {(True, False), (False, True), (False, False)}


def run_crosshair(*args: str, timeout_s: float) -> tuple[int, str, float]:
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "crosshair", *args], capture_output=True, text=True,
        timeout=timeout_s, cwd=HERE, env=env, check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - t0


# per-condition budget (CPU seconds) each planted bug needs to be found, measured on 2 cores
BUDGET_S = {
    "two_segments_pages_boundary_off_by_one": 10,
    "two_segments_pages_no_dedup": 10,
    "num_new_pages_floor": 5,
    "extend_decision_merge_skipped": 10,
}


@pytest.mark.crosshair
@pytest.mark.parametrize("name", sorted(PLANTED))
def test_crosshair_finds_planted_bug(name: str) -> None:
    """``crosshair check`` reports a counterexample for each planted bug."""
    rc, out, seconds = run_crosshair(
        "check", "--analysis_kind=PEP316", f"--per_condition_timeout={BUDGET_S[name]}",
        f"formal_planted_bugs.{name}", timeout_s=300,
    )
    print(f"{name}: rc {rc} in {seconds:.1f}s\n{out}")
    assert rc == 1 and "error: false when calling" in out, out


@pytest.mark.crosshair
@pytest.mark.parametrize("name", ["two_segments_pages", "extend_decision"])
def test_crosshair_passes_the_real_functions_SEG_5_EXTEND_6(name: str) -> None:
    """Control: the same contracts hold for the real functions (no counterexample, and the
    precondition can be met)."""
    rc, out, seconds = run_crosshair(
        "check", "--analysis_kind=PEP316", "--report_all", "--per_condition_timeout=5",
        f"formal_planted_bugs.{name}", timeout_s=300,
    )
    print(f"{name}: rc {rc} in {seconds:.1f}s\n{out}")
    assert rc == 0, out
    assert "error" not in out and "Unable to meet precondition" not in out, out
    assert "info: " in out, out


@pytest.mark.crosshair
@pytest.mark.parametrize(
    ("fast", "reference", "differs"),
    [
        ("reps_pages", "touched_pages_brute", False),
        ("reps_pages_aligned_stride", "touched_pages_brute", True),
        ("new_pages_formula", "new_pages_brute", False),
        ("new_pages_floor", "new_pages_brute", True),
    ],
)
def test_crosshair_diffbehavior_SEG_2_EXTEND_4(fast: str, reference: str, differs: bool) -> None:
    """SEG-2 / EXTEND-4: the stride representatives and ``num_new_pages`` behave like their
    brute-force definitions; the planted variants (B17a stride, floor) differ."""
    rc, out, seconds = run_crosshair(
        "diffbehavior", "--per_condition_timeout=4", f"formal_planted_bugs.{fast}",
        f"formal_planted_bugs.{reference}", timeout_s=120,
    )
    print(f"{fast} vs {reference}: rc {rc} in {seconds:.1f}s\n{out}")
    assert rc == (1 if differs else 0), out
    if differs:
        assert "differ" in out.lower() or "given" in out.lower(), out
