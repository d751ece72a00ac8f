"""The page-interleave pool across real ranks (``PINTER-1``, ``PINTER-7``, ``PINTER-12``):
``N`` forked processes joined by ``torch.distributed`` (gloo), each with its own allocator fed
one seeded call stream, agree on their state after every call, each rank's own pages are the
spec's class ``r``, and every chain keeps the balance bound, for N = 2 and 4, kvpool's
allocator and SGLang's; each deliberate mirroring break is named at the first call where the
ranks diverge, with the part of the state that differs, as an in-process replay of the same
stream finds it. SGLang's runs skip where it is not installed."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from kvpool.oracle.families.page_interleave.breaks import MirrorBreak
from kvpool.oracle.families.page_interleave.ranks import (
    PARTS,
    balance_errors,
    make_allocator,
    ok,
    own_page_errors,
    run_ranks,
    state_parts,
)
from kvpool.oracle.families.page_interleave.stream import Shape, apply, generate
from kvpool.oracle.families.page_interleave.targets import load_sglang_page_interleave

CALLS = 60


@pytest.mark.parametrize("target", ["kvpool", "sglang"])
@pytest.mark.parametrize("ranks", [2, 4])
def test_every_rank_agrees_after_every_call_PINTER_12(target: str, ranks: int) -> None:
    """All calls agree on every rank, ownership and balance hold, rank 0 matches the spec."""
    if target == "sglang":
        load_sglang_page_interleave()  # not installed: skipped outside CI
    report = run_ranks(Shape(ranks, page_size=4, size=48, need_sort=ranks == 4), CALLS, seed=3,
                       target=target)
    assert ok(report), report
    assert report["agreed"] == CALLS and report["ranks"] == ranks


def first_divergence(shape: Shape, stream: list[dict[str, Any]],
                     brk: str) -> tuple[int, str] | None:
    """The first call where an unbroken allocator and a broken one, in this process, hold
    different states, and the first part that differs."""
    good = make_allocator("kvpool", shape, 0, None)
    bad = MirrorBreak(make_allocator("kvpool", shape, 0, None), brk)
    for index, call in enumerate(stream):
        a, b = state_parts(good, apply(good, call)), state_parts(bad, apply(bad, call))
        differ = next((p for p in PARTS if a[p] != b[p]), None)
        if differ is not None:
            return index, differ
    return None


@pytest.mark.parametrize(("brk", "ranks"), [("free_order", 2), ("tie_break", 4),
                                            ("free_order", 4)])
def test_a_broken_rank_is_named_at_its_first_diverging_call_PINTER_12(brk: str,
                                                                      ranks: int) -> None:
    """The last rank's mirroring break: the run stops at the first call where its state
    differs, names that call and the part, and every call before it agreed."""
    shape = Shape(ranks, page_size=4, size=48)
    expected = first_divergence(shape, generate(shape, CALLS, 5), brk)
    assert expected is not None
    report = run_ranks(shape, CALLS, seed=5, target="kvpool", brk=brk)
    d = report["divergence"]
    assert d is not None and not ok(report), report
    assert (d["call"], d["part"]) == expected and report["agreed"] == d["call"]
    assert d["by_rank"][0] == d["by_rank"][-2] != d["by_rank"][-1]  # the last rank differs


def test_a_nondeterministic_sort_is_caught_at_a_release_PINTER_12() -> None:
    """Every rank orders its freed pages by a process-seeded generator: the ranks diverge at a
    call that releases pages (a free, or a group's end), in a class list."""
    load_sglang_page_interleave()
    report = run_ranks(Shape(2, page_size=1, size=32), CALLS, seed=1, target="sglang",
                       brk="unstable_sort")
    d = report["divergence"]
    assert d is not None, report
    assert d["name"] in ("free", "free_group_end") and d["part"] == "class free lists"
    assert report["agreed"] == d["call"]


def test_ownership_and_balance_checks_see_a_wrong_page_PINTER_1_PINTER_7() -> None:
    """A page of another class on a rank's list, or a chain whose pages pile on one rank, is
    reported."""
    shape = Shape(2, page_size=1, size=4)
    spec = shape.spec()
    parts = {"class free lists": [[2, 3, 6, 8], [5, 7, 9]], "class release lists": [[], []]}
    assert any("class 1" in e for e in own_page_errors(parts, spec, 0, shape))
    assert own_page_errors({"class free lists": spec.free_lists,
                            "class release lists": spec.release_lists}, spec, 1, shape) == []
    call = {"call": "alloc_extend", "requests": [[0, 3]], "bases": [0]}
    assert balance_errors(call, [[2, 4, 6], [0]], shape)
    assert not balance_errors(call, [[2, 3, 4], [0]], shape)


def test_the_command_line_reports_a_divergence() -> None:
    """``python -m kvpool.oracle.families.page_interleave.ranks --ranks 2 --break tie_break``
    exits 1 naming the call; without a break it exits 0."""
    module = "kvpool.oracle.families.page_interleave.ranks"
    run = subprocess.run([sys.executable, "-m", module, "--ranks", "2", "--calls", "40",
                          "--break", "tie_break"], capture_output=True, text=True, timeout=300,
                         check=False)
    assert run.returncode == 1 and "ranks diverge at call" in run.stdout, run.stdout + run.stderr
    clean = subprocess.run([sys.executable, "-m", module, "--ranks", "2", "--calls", "40"],
                           capture_output=True, text=True, timeout=300, check=False)
    assert clean.returncode == 0 and "40 of 40 calls agreed" in clean.stdout, clean.stdout
