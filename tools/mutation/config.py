"""What the mutation run covers: each source file and the tests that must kill its mutants.

Only the test modules relevant to a file run against its mutants (the spec's tests for the spec,
the impl's for the impl, the oracle's in-process tests for the oracle's comparisons: broken
allocators caught, correct ones passing, the call table, coverage events, first-run errors and
reports; not the command-line subprocesses), with ``-m "not slow and not crosshair and not
peers"``.
"""

from __future__ import annotations

SPEC_TESTS = ("tests/spec", "tests/formal")
IMPL_TESTS = ("tests/impl",)
ORACLE_TESTS = tuple(f"tests/oracle/test_oracle_{name}.py" for name in (
    "broken", "broken_events", "calls", "coverage", "executor_paths", "first_run", "reports",
    "shortage_raises", "targets"))

TARGETS: dict[str, tuple[str, ...]] = {
    "spec/layout.py": SPEC_TESTS,
    "spec/segments.py": SPEC_TESTS,
    "spec/rules.py": SPEC_TESTS,
    "impl/backend.py": IMPL_TESTS,
    "impl/freelist.py": IMPL_TESTS,
    "impl/layout.py": IMPL_TESTS,
    "spec/census.py": SPEC_TESTS,
    "spec/model.py": SPEC_TESTS,
    "spec/contract.py": SPEC_TESTS,
    "spec/window.py": SPEC_TESTS,
    "spec/hybrid_rules.py": SPEC_TESTS,
    "spec/hybrid.py": SPEC_TESTS,
    "impl/base.py": IMPL_TESTS,
    "impl/paged.py": IMPL_TESTS,
    "impl/token.py": IMPL_TESTS,
    "impl/checked.py": IMPL_TESTS,
    "impl/hooks.py": IMPL_TESTS,
    "impl/host_layout.py": IMPL_TESTS,
    "impl/native_ops.py": IMPL_TESTS,
    "impl/swa.py": IMPL_TESTS,
    "impl/swa_census.py": IMPL_TESTS,
    "impl/swa_pairs.py": IMPL_TESTS,
    "impl/swa_tail.py": IMPL_TESTS,
    "impl/ownership.py": IMPL_TESTS,
    "impl/numpy_ops.py": IMPL_TESTS,
    "impl/backend_choice.py": IMPL_TESTS,
    "impl/staging.py": IMPL_TESTS,
    "impl/segment_frees.py": IMPL_TESTS,
    "impl/release_guard.py": IMPL_TESTS,
    "impl/swa_segments.py": IMPL_TESTS,
    "spec/model_segments.py": SPEC_TESTS,
    "spec/hybrid_segments.py": SPEC_TESTS,
    "oracle/families/single/executor.py": ORACLE_TESTS,
}

MARKERS = "not slow and not crosshair and not peers"
FIXED_SEED = 0
RERUN_SEEDS = (1, 2, 3)
