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
# the hybrid family's in-process oracle tests (broken allocators caught, kvpool's and the pure
# variant's runs, the engine's hybrid paths); SGLang's runs are marked peers
HYBRID_ORACLE_TESTS = tuple(f"tests/oracle/test_oracle_{name}.py" for name in (
    "hybrid", "hybrid_engine", "hybrid_tail_call", "hybrid_pure", "hybrid_executor",
    "dataplane"))
# the unified family on kvpool's own unified pools (no SGLang): broken subclasses caught under
# their clause, placement and hole bookkeeping faults named, the protocol target driven
UNIFIED_ORACLE_TESTS = tuple(f"tests/oracle/test_oracle_{name}.py" for name in (
    "unified_kvpool_broken", "unified_tri_kvpool_broken", "unified_placement", "unified_holes",
    "unified_protocol", "unified_executor"))
# the unified model's own tests (the rest of tests/spec does not import it)
UNIFIED_SPEC_TESTS = (*(f"tests/spec/test_spec_unified{name}.py" for name in (
    "", "_idle", "_reclaim", "_tail", "_state", "_bands", "_tables", "_state_end",
    "_tri_refusals", "_mamba", "_float_views", "_tokens",
    "_model_bounds", "_mamba_arith",
    "_mamba_releases", "_mamba_bounds")),
    "tests/impl/test_impl_unified_tri.py",
    "tests/formal/test_formal_z3_unified.py")
DATAPLANE_TESTS = ("tests/oracle/test_oracle_dataplane_rules.py",
                   "tests/oracle/test_oracle_dataplane.py", *HYBRID_ORACLE_TESTS[:2],
                   "tests/oracle/test_oracle_unified_kvpool_broken.py")

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
    "oracle/families/hybrid/executor.py": HYBRID_ORACLE_TESTS,
    "oracle/families/unified/executor.py": UNIFIED_ORACLE_TESTS,
    "oracle/engine/dataplane.py": DATAPLANE_TESTS,
    "spec/unified.py": UNIFIED_SPEC_TESTS,
    "spec/unified_float.py": UNIFIED_SPEC_TESTS,
    "spec/unified_layout.py": UNIFIED_SPEC_TESTS,
    "spec/unified_state.py": UNIFIED_SPEC_TESTS,
    "spec/unified_tables.py": UNIFIED_SPEC_TESTS,
    "spec/unified_tokens.py": UNIFIED_SPEC_TESTS,
    "spec/unified_mamba.py": UNIFIED_SPEC_TESTS,
    "spec/unified_mamba_views.py": UNIFIED_SPEC_TESTS,
    "spec/unified_mamba_end.py": UNIFIED_SPEC_TESTS,
    "spec/unified_mamba_frees.py": UNIFIED_SPEC_TESTS,
    "impl/unified_last_locs.py": IMPL_TESTS,
}

MARKERS = "not slow and not crosshair and not peers"
FIXED_SEED = 0
RERUN_SEEDS = (1, 2, 3)
