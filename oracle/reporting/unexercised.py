"""The SPEC.md clauses that the default run against ``kvpool.impl`` cannot exercise, and why.

Every clause of SPEC.md is either mapped to the checks of some family's run (the clause maps of
:mod:`kvpool.oracle.families`: single pools, ``python -m kvpool.oracle``; the hybrid
sliding-window allocator, ``--family hybrid``; the unified memory pools, ``--family unified``,
which maps UNI-1..13) or listed here with the run or test that judges
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
}

# The data plane (SPEC.md §17): judged only when it is on.
_DATA = (
    "the KV bytes are checked only with the data plane on (python -m kvpool.oracle --data-plane, "
    "pytest --kvpool-data-plane, or a family that runs it by default); "
    "tests/oracle/test_oracle_dataplane.py judges it on both families and on broken allocators; "
    "this entry goes when a family that runs the plane by default maps it"
)
# DATA-1..2 are mapped by the unified family, which runs the plane by default; its targets'
# KV caches copy to the CPU themselves, so the plane's round trip (DATA-3) stays listed.
NOT_EXERCISED["DATA-3"] = _DATA

# The families whose runs each entry concerns: EXTEND-9 the single pools' call table, DATA-3 every
# family whose executor checks KV bytes (overrides ``Engine._data_sides``).
CONCERNS: dict[str, tuple[str, ...]] = {
    "EXTEND-9": ("single",),
    "DATA-3": ("single", "hybrid", "unified"),
}
