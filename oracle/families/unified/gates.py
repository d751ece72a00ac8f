"""The move gates of SGLang 0.5.23's unified composite (``UNI-6``, ``UNI-8``, ``UNI-9``).

``set_disagg_move_gate(gate)`` (PD disaggregation) installs ``gate`` on both sub-pools; while
``gate()`` is False no page may move: an allocation that fits only after compaction is refused,
the eviction plan counts released pages as holes where they are, and the schedulable views
credit no neighbour's holes (the spec model's ``moves_blocked``). SGLang allows gates under lazy
compaction only. The oracle installs a gate that answers a fixed ``allow`` (the call's
argument) and replaces it to open or close it.
"""

from __future__ import annotations

from typing import Any

from kvpool.spec import ContractViolation
from kvpool.spec.unified import UnifiedSWAModel

from ...engine import callforms as forms
from ...engine.call import Call

__all__ = ["GATE_CALL", "set_gate"]


def set_gate(model: UnifiedSWAModel, allow: bool) -> None:
    """Open (``allow``) or close the model's move gate.

    Raises:
        ContractViolation: ``UNI-6`` under eager compaction (its frees move pages at once).
    """
    if not model.lazy:
        raise ContractViolation("UNI-6", "a move gate needs lazy compaction")
    model.moves_blocked = not allow


def _fixed(allow: bool) -> Any:
    return lambda: allow


GATE_CALL = Call(
    "set_disagg_move_gate", "state", ("allow",),
    spec=lambda m, a: set_gate(m, a["allow"]),
    target=lambda x, a, dev: forms.no_inputs(x.set_disagg_move_gate(_fixed(a["allow"]))),
    source=lambda a, var: [f"a.set_disagg_move_gate(lambda: {a['allow']})"],
    raise_clause="UNI-6", order_clause="UNI-6")
