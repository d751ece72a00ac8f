"""The SPEC.md clauses that the default run against ``kvpool.impl`` cannot exercise, and why.

``python -m kvpool.oracle`` drives single-pool allocators with SGLang's API; every clause of
SPEC.md is either mapped to the checks of that run (:mod:`kvpool.oracle.clauses`) or listed
here with the run or test that judges it instead. ``tests/oracle/test_oracle_clauses.py`` fails
when a clause is in neither place, or in both.
"""

from __future__ import annotations

_HYBRID = (
    "a rule of the hybrid sliding-window allocator (SPEC.md section 15): the default run drives "
    "single pools; `python -m kvpool.oracle hybrid` judges it against kvpool's and SGLang "
    "0.5.23's SWA allocators (CI runs it), with tests/oracle/test_oracle_hybrid.py"
)

NOT_EXERCISED: dict[str, str] = {
    "EXTEND-9": (
        "token allocators have no alloc_extend / alloc_decode (NotImplementedError, no "
        "ContractViolation): the oracle never calls them on a token target (extend=False); "
        "tests/spec/test_spec_model.py and tests/impl check the raise"
    ),
    **{f"SWA-{n}": _HYBRID for n in range(1, 20)},
}
