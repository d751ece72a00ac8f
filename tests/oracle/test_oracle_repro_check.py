"""A repro is checked before it is printed (``kvpool.oracle.engine.reprocheck``): it must fail on
the target and pass on kvpool's correct allocator of the same shape, else the report says it is
not confirmed and why; a repro that cannot be checked says so. The minimizer shrinks pools,
batches and extend lengths at every page size (``kvpool.oracle.engine.minimize``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from broken_allocators import BROKEN, Broken
from broken_hybrid import BROKEN_HYBRID
from kvpool.oracle.engine.capabilities import capabilities_of
from kvpool.oracle.engine.minimize import _variants
from kvpool.oracle.engine.report import Failure
from kvpool.oracle.engine.repro import to_pytest
from kvpool.oracle.engine.reprocheck import check_repro, correct_factory
from kvpool.oracle.engine.runner import confirmed_of, run_config
from kvpool.oracle.engine.target import Config, Target
from kvpool.oracle.engine.trace import Trace
from kvpool.oracle.families.hybrid.runner import run_hybrid

BY_NAME = {b.cls.__name__: b for b in BROKEN}
PAGED = "kvpool.oracle.families.single.targets:kvpool_paged"


def _failure(broken: Broken, order: str = "exact", page_size: int | None = None) -> Failure:
    target = Target(broken.factory, capabilities_of(broken.factory), broken.path)
    config = Config(page_size or broken.page_size, broken.need_sort, "cpu", order)
    result = run_config(target, config, max_examples=200)
    assert result.failure is not None, result.error
    return result.failure


def _check(trace: Trace) -> Any:
    return check_repro(trace, lambda path: to_pytest(trace, path))


@pytest.mark.parametrize("order", ["exact", "contract"])
def test_report_says_the_repro_was_checked(order: str) -> None:
    failure = _failure(BY_NAME["SlotTwice"], order)
    check = failure.repro_check()
    assert check.status == "confirmed", check.line
    assert "passes on kvpool.impl's PagedTokenToKVPoolAllocator (page_size=4, need_sort=False, "\
        "checked)" in check.line
    assert check.line in failure.report().splitlines()


def test_a_repro_that_passes_on_the_target_is_not_confirmed() -> None:
    """Judged against a correct allocator, the recorded failure does not happen: said so."""
    trace = replace(_failure(BY_NAME["SlotTwice"]).trace, target=PAGED)
    check = _check(trace)
    assert check.status == "unconfirmed" and "passes on" in check.line, check.line


def test_a_repro_that_fails_on_a_correct_allocator_is_not_confirmed() -> None:
    """An exact-order repro asserting a result the spec never gives fails on kvpool too."""
    trace = _failure(BY_NAME["LeakOnFree"]).trace
    steps = list(trace.steps)
    alloc = next(i for i, s in enumerate(steps[: trace.failing_step])
                 if s.call.startswith("alloc") and s.expect)
    steps[alloc] = replace(steps[alloc], expect=[s + 4 for s in steps[alloc].expect])
    check = _check(replace(trace, steps=steps))
    assert check.status == "unconfirmed" and "fails on kvpool.impl's" in check.line, check.line


def test_repair_keeps_the_shrunk_trace_when_only_its_repro_is_confirmed() -> None:
    good = _failure(BY_NAME["SlotTwice"])
    bad = replace(good, trace=replace(good.trace, target=PAGED), checked=None)
    assert confirmed_of(bad, good) is good
    assert confirmed_of(good, bad) is good  # a confirmed minimized one stays
    worse = replace(bad, checked=None)
    assert confirmed_of(bad, worse) is bad  # neither confirmed: the minimized one


def test_what_cannot_be_checked_says_so_in_one_line() -> None:
    trace = _failure(BY_NAME["SlotTwice"]).trace
    gone = _check(replace(trace, target="no_such_module_here:factory"))
    assert gone.status == "unchecked" and "does not import" in gone.line, gone.line
    # a shape its family has no kvpool counterpart for (unified: full-swa, tri): target only
    unified = check_repro(replace(trace, family="unified"), lambda path: to_pytest(trace, path))
    assert unified.status == "unchecked" and "only (it fails)" in unified.line, unified.line
    assert "\n" not in gone.line + unified.line


def test_correct_allocator_has_the_shape_the_target_was_judged_as() -> None:
    trace = Trace("m:f", 1, True, "cpu", "exact", error_types=[], paged=False)
    token = correct_factory(trace)
    assert token is not None and token[0].endswith("kvpool_token_unchecked"), token
    paged = correct_factory(replace(trace, paged=True, error_types=["x.Y"]))
    assert paged is not None and paged[0] == PAGED and "page_size=1" in paged[1], paged


def test_minimizer_shrinks_pool_and_extends_at_page_size_16() -> None:
    """An extend bug at page size 16: before, a 1,342-token pool and extends of 1,025 and 104
    tokens were kept; now a pool of at most two pages and a few tokens per request."""
    failure = _failure(BY_NAME["ExtendPart1OffByOne"], "exact", page_size=16)
    steps = failure.trace.steps
    assert steps[0].args["size"] <= 32, failure.report()
    for step in steps:
        if step.call == "alloc_extend":
            new = [s - p for s, p in zip(step.args["seq_lens"], step.args["prefix_lens"])]
            assert max(new) <= 16, failure.report()
    assert failure.repro_check().status == "confirmed"


def test_minimizer_shrinks_an_allocation_with_the_frees_of_its_slots() -> None:
    """A merge bug at page size 16: before, a 112-token pool and a 96-token allocation freed
    whole were kept; the allocation shrinks to one page, its later free with it, then the
    pool."""
    failure = _failure(BY_NAME["MergeUnsorted"], "exact", page_size=16)
    steps = failure.trace.steps
    assert steps[0].args["size"] <= 32, failure.report()
    assert all(s.args["need_size"] <= 16 for s in steps if s.call == "alloc"), failure.report()
    assert failure.repro_check().status == "confirmed"


def test_variants_cut_the_recorded_result_with_the_request() -> None:
    args = {"prefix_lens": [0, 4], "seq_lens": [3, 6], "last_loc": [-1, 19],
            "extend_num_tokens": 5}
    expect = [4, 5, 6, 20, 21]
    dropped = list(_variants(args, expect, "drop:0", 4))
    assert dropped == [({"prefix_lens": [4], "seq_lens": [6], "last_loc": [19],
                         "extend_num_tokens": 2}, [20, 21])]
    fewer = list(_variants(args, expect, "extend:0", 4))
    assert fewer[0] == ({**args, "seq_lens": [1, 6], "extend_num_tokens": 3}, [4, 20, 21])
    assert list(_variants(args, expect, "drop:2", 4)) == []
    cuts = {a["need_size"]: e for a, e in
            _variants({"need_size": 8}, [4, 5, 6, 7, 8, 9, 10, 11], "need_size", 4)}
    assert cuts[4] == [4, 5, 6, 7] and cuts[1] == [4], cuts  # the result shrinks with it


def test_hybrid_repro_is_checked_on_kvpools_swa_allocator() -> None:
    """The hybrid family's repro runs on the target and on SWATokenToKVPoolAllocator."""
    broken = BROKEN_HYBRID[0]
    failure = run_hybrid(broken.factory(), max_examples=60).failure
    assert failure is not None
    trace = replace(failure.trace, target=f"hybrid_factories:{broken.cls.__name__}")
    check = _check(trace)
    assert check.status == "confirmed" and "SWATokenToKVPoolAllocator" in check.line, check.line


WEAK = ("translatetoint64", "censuscached", "freereadsinputlater", "pageidsreadlater")


@pytest.mark.parametrize("order", ["exact", "contract"])
@pytest.mark.parametrize("name", WEAK)
def test_aliasing_and_dtype_repros_fail_on_their_bug(name: str, order: str) -> None:
    """Repros that used to pass on their broken allocator: a census written through by the
    caller (ALIAS-3, at the constructor too), an input read after the caller reused it
    (ALIAS-2, exact order) and a result of the wrong dtype (LIFE-3, contract order) now assert
    what the oracle checked."""
    from broken_events import EVENT_BROKEN, OWNERSHIP_BROKEN
    from broken_reach import REACH_BROKEN

    every = (*(b for _, b in EVENT_BROKEN), *OWNERSHIP_BROKEN, *(b for _, b in REACH_BROKEN))
    broken = next(b for b in every if b.name == name)
    target = Target(broken.factory, capabilities_of(broken.factory), broken.path)
    result = run_config(target, Config(broken.page_size, broken.need_sort, "cpu", order),
                        max_examples=300)
    assert result.failure is not None, result.error
    check = result.failure.repro_check()
    assert check.status == "confirmed", result.failure.report()
