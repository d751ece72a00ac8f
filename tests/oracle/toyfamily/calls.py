"""The toy family's call table: each call on the spec model (plain lists), on the target (the
same lists: this target takes no tensors, so a call's input tensors are ``[]``) and as repro
source (the target is ``a``, a result ``var``)."""

from __future__ import annotations

from typing import Any

from kvpool.oracle.engine.call import Call
from kvpool.oracle.engine.callforms import no_inputs, performed_by_executor


def _result_checks(args: dict[str, Any], expect: Any, var: str) -> list[str]:
    """The repro's assert on an allocation's result: the spec's slots, or None."""
    return [f"assert {var} is None" if expect is None else f"assert {var} == {expect!r}"]


TOY_CALLS: dict[str, Call] = {
    "create": Call(
        "create", "state", ("size",), spec=performed_by_executor, target=performed_by_executor,
        source=lambda a, var: [f"a = factory(size={a['size']})"],
        raise_clause="SLOT-1", order_clause="SLOT-1"),
    "alloc": Call(
        "alloc", "alloc", ("need_size",),
        spec=lambda m, a: m.alloc(a["need_size"]),
        target=lambda x, a, dev: no_inputs(x.alloc(a["need_size"])),
        source=lambda a, var: [f"{var} = a.alloc({a['need_size']})"],
        raise_clause="SLOT-2", order_clause="SLOT-3", result_clause="SLOT-3",
        checks=_result_checks),
    "free": Call(
        "free", "free", ("slots",),
        spec=lambda m, a: m.free(list(a["slots"])),
        target=lambda x, a, dev: no_inputs(x.free(list(a["slots"]))),
        source=lambda a, var: [f"a.free({a['slots']!r})"],
        raise_clause="SLOT-4", order_clause="SLOT-3", slot_args=("slots",)),
    "clear": Call(
        "clear", "state", (),
        spec=lambda m, a: m.clear(), target=lambda x, a, dev: no_inputs(x.clear()),
        source=lambda a, var: ["a.clear()"], raise_clause="SLOT-1", order_clause="SLOT-1"),
}
