"""Reports that never mislead: repros for every failing call kind, raises shown as raises,
page maps whose every symbol is explained, clauses that name the call's own rule, and the
tree cache in every SGLang protocol.
"""

from __future__ import annotations

from typing import Any

import pytest
from kvpool.oracle.engine.replay import replay
from kvpool.oracle.engine.report import Failure
from kvpool.oracle.engine.runner import Config, run_config
from kvpool.oracle.engine.trace import Trace
from kvpool.oracle.families.single.targets import load_target
from kvpool.oracle.reporting.pagemap import LEGEND, TARGET_LEGEND
from protocol_allocators import RAISING_CALLS

EXACT = Config(4, False, "cpu", "exact")
CONTRACT = Config(4, False, "cpu", "contract")


def _fails(path: str, config: Config, examples: int = 150) -> Failure:
    result = run_config(load_target(path), config, max_examples=examples, shrink_seconds=2)
    assert result.error is None, result.error
    assert result.failure is not None, f"{path} passed {config.label()}"
    return result.failure


def _passes(path: str, config: Config, examples: int = 60) -> None:
    result = run_config(load_target(path), config, max_examples=examples)
    assert result.ok, result.failure.report() if result.failure else result.error


def _repro_outcome(source: str) -> BaseException | None:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<repro>", "exec"), namespace)
    try:
        namespace["test_kvpool_repro"]()
    except Exception as err:  # an assert, or the target's own raise
        return err
    return None


@pytest.mark.parametrize("order", ["exact", "contract"])
@pytest.mark.parametrize("call", RAISING_CALLS)
def test_oracle_repro_is_valid_for_every_failing_call_kind(call: str, order: str) -> None:
    """A valid call that raises: the report shows the raise, the repro fails with the target's
    own exception and passes once the factory is the correct one."""
    # a free_segment call is drawn late in some runs (example 137 of 150 in one): room to find it
    failure = _fails(f"protocol_allocators:raising_{call}", Config(4, False, "cpu", order), 600)
    lines = failure.step_lines()
    diverging = next(line for line in lines if "<-- diverges" in line)
    # CAP-2 evicts via CAP-1; the spec adapter's free_segment is a one-segment free_segments
    callers = {
        "evict_to_free_tokens": {call, "check_decode_capacity"},
        "free_segments": {call, "free_segment"},
    }.get(call, {call})
    assert any(f" {c}(" in diverging for c in callers), diverging
    assert "-> raised RuntimeError: planted failure" in diverging, diverging
    source = failure.pytest_source()
    compile(source, "<repro>", "exec")
    err = _repro_outcome(source)
    assert isinstance(err, RuntimeError) and "planted failure" in str(err), source
    fixed = source.replace(
        f"from protocol_allocators import raising_{call} as factory",
        "from spec_torch import spec_paged as factory",
    )
    assert fixed != source
    assert _repro_outcome(fixed) is None, fixed


def test_oracle_steps_show_raises_not_returns() -> None:
    """A bad call shows the clause it raised; no raising step shows a return value."""
    failure = _fails("broken_allocators:pagezeroaccepted", EXACT)
    for step, line in zip(failure.trace.steps, failure.step_lines()):
        if step.raises is not None:
            assert f"-> raises {step.raises}" in line and "-> [" not in line


def test_oracle_page_map_symbols_are_all_explained() -> None:
    """Every character of every page map line is in the legend; owners are labelled the same
    way in the run and in a replay of its trace."""
    for path in (
        "broken_allocators:leakonfree",
        "broken_allocators:boundarytwice",
        "broken_allocators:deferrednotcopied",
        "broken_allocators:clearkeepsstaged",
    ):
        config = Config(4, path.endswith("staged"), "cpu", "exact")
        failure = _fails(path, config)
        report = failure.report()
        assert LEGEND in report and TARGET_LEGEND in report
        for line in (failure.before + "\n" + failure.after).splitlines():
            if "|" in line:
                chars = line.split("|")[1]
                legend = TARGET_LEGEND if "target" in line else LEGEND
                for ch in set(chars):
                    symbol = "A-Z" if ch.isupper() else "2-9" if ch.isdigit() else ch
                    assert f"{symbol} " in legend, (ch, line, legend)
        again = replay(Trace.from_json(failure.trace.to_json()), load_target(path))
        assert again is not None and (again.before, again.after) == (failure.before, failure.after)
        if any(s.clobber for s in failure.trace.steps):
            assert "[input reused]: the caller overwrote" in report


@pytest.mark.parametrize(
    ("path", "clause"),
    [
        ("minimal_allocator:make_nodedup", "FREE-4"),
        ("broken_allocators:pagedfreenodedup", "FREE-4"),
        ("broken_allocators:boundarytwice", "SEG-5"),
        ("broken_allocators:boundarynever", "SEG-5"),
    ],
)
def test_oracle_names_the_calls_own_clause_first(path: str, clause: str) -> None:
    """A census mismatch right after a free that its own rule explains names that rule."""
    # without groups and cache evictions (which free on the allocator's side) the bug can show
    # only right after the free itself
    target = load_target(path)
    target.caps = target.caps.replace(groups=False, capacity_hooks=False)
    config = EXACT if path.startswith("broken") else CONTRACT
    result = run_config(target, config, max_examples=150, shrink_seconds=2)
    assert result.failure is not None, f"{path} passed {config.label()}"
    assert result.failure.clause == clause, result.failure.report()


@pytest.mark.parametrize(
    "path",
    [
        "protocol_allocators:evictforalloc",
        "protocol_allocators:evictparams",
        "spec_torch:spec_paged",
    ],
)
def test_oracle_tree_cache_speaks_every_protocol(path: str) -> None:
    """evict_for_alloc(EvictParams), evict(EvictParams) and evict(int) all conform exactly."""
    _passes(path, EXACT)


def test_oracle_evicting_more_than_the_shortfall_is_contract_conformant() -> None:
    _passes("protocol_allocators:evicteverything", CONTRACT)
    exact = _fails("protocol_allocators:evicteverything", EXACT)
    assert exact.clause == "CAP-1" and exact.hint and "--order contract" in exact.hint
    short = _fails("protocol_allocators:evicttoolittle", CONTRACT)
    assert short.clause in ("CAP-1", "CAP-2"), short.report()
    assert short.hint is None  # no declaration makes evicting too little legal


def test_oracle_capacity_hook_gets_sglangs_keywords() -> None:
    """check_decode_capacity must take requests= / spec_algorithm= unless declared off."""
    failure = _fails("protocol_allocators:nocontext", EXACT)
    assert failure.clause == "CAP-2" and "requests" in failure.detail
    assert failure.hint and "capacity_context=false" in failure.hint
    assert _repro_outcome(failure.pytest_source()) is not None
    _passes("protocol_allocators:nocontext_declared", EXACT)


def test_oracle_repro_probes_only_results_that_are_tensors() -> None:
    """A probed step whose call hands back no slots (a capacity hook's count or answer) writes
    into the census only: the repro never names an unbound result variable (ALIAS-3)."""
    from kvpool.oracle.engine.repro import to_pytest
    from kvpool.oracle.engine.trace import TraceStep

    steps = [
        TraceStep("create", {"size": 32, "page_size": 4, "need_sort": False}),
        TraceStep("alloc", {"need_size": 4}, expect=[4, 5, 6, 7], probe=True),
        TraceStep(
            "evict_to_free_tokens",
            {"entries": [[4, 5, 6, 7]], "num_tokens": 29},
            expect=1,
            probe=True,
        ),
        TraceStep(
            "check_decode_capacity",
            {"entries": [], "num_tokens": 1},
            expect=True,
            probe=True,
        ),
    ]
    trace = Trace("spec_torch:spec_paged", 4, False, "cpu", "exact", steps=steps)
    source = to_pytest(trace, "spec_torch:spec_paged")
    assert "r1.fill_(-1)" in source, source
    assert "r2.fill_(-1)" not in source and "r3.fill_(-1)" not in source, source
    assert source.count("a.get_all_free_pages().fill_(-1)") == 3, source
    assert _repro_outcome(source) is None, source
