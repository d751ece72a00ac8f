"""The SPEC.md clauses that the default run against ``kvpool.impl`` cannot exercise, and why.

Every clause of SPEC.md is either mapped to the checks of some family's run (the clause maps of
:mod:`kvpool.oracle.families`: single pools, ``python -m kvpool.oracle``; the hybrid
sliding-window allocator, ``--family hybrid``) or listed here with the run or test that judges
it instead. ``tests/oracle/test_oracle_clauses.py`` fails
when a clause is in neither place, or in both.
"""

from __future__ import annotations

NOT_EXERCISED: dict[str, str] = {
    "EXTEND-9": (
        "token allocators have no alloc_extend / alloc_decode (NotImplementedError, no "
        "ContractViolation): the oracle never calls them on a token target (extend=False); "
        "tests/spec/test_spec_model.py and tests/impl check the raise"
    ),
    "SWA-20": (
        "alloc_extend_swa_tail has its row in the hybrid call table "
        "(oracle/families/hybrid/calls.py), but the hybrid scheduler model does not admit "
        "requests by PD-decode pre-allocation yet, so the run never calls it; tests/spec, "
        "tests/impl and tests/integrations (against SGLang 0.5.23) judge it until the model "
        "does and an event in oracle/families/hybrid/coverage.py maps it (then this entry goes)"
    ),
}

# The unified memory pools (SPEC.md §16): specified and judged outside the oracle for now.
_UNIFIED = (
    "the unified memory pools have no oracle family yet: the model is judged by "
    "tests/spec/test_spec_unified.py and tests/formal, and against SGLang 0.5.23's composites "
    "by tests/spec/test_spec_unified_sglang.py; this entry goes when a unified family maps it"
)
NOT_EXERCISED.update({f"UNI-{n}": _UNIFIED for n in range(1, 14)})

# The data plane (SPEC.md §17): judged only when it is on.
_DATA = (
    "the KV bytes are checked only with the data plane on (python -m kvpool.oracle --data-plane, "
    "pytest --kvpool-data-plane, or a family that runs it by default); "
    "tests/oracle/test_oracle_dataplane.py judges it on both families and on broken allocators; "
    "this entry goes when a family that runs the plane by default maps it"
)
NOT_EXERCISED.update({f"DATA-{n}": _DATA for n in range(1, 4)})
