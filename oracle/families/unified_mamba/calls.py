"""The unified full + Mamba call table: every call the oracle makes on the composite.

``UNIFIED_MAMBA_CALLS[name]`` is a :class:`~kvpool.oracle.engine.call.Call`: the invocation on
:class:`kvpool.spec.unified_mamba.UnifiedMambaModel` (plain lists), on a target with SGLang
0.5.23's ``UnifiedMambaTokenToKVPoolAllocator`` signatures (int64 tensors) and as repro source.
The token surface is the full end's (``UMB-2``); the state end is driven as SGLang's request
pool drives it: ``prepare_mamba_allocation(n)`` then ``mamba_allocator.alloc(n)``
(``alloc_state``), and ``mamba_allocator.free(slots)`` (``free_state``; ``UMB-5``).
``flush_opportunistic`` first adopts the target's lazy placement (:func:`adopt_placement`,
its snapshot passed by the executor as ``args["state"]``), so that the pages the flush moves
are the spec's. The UMB-6 arithmetic is read after every call, not sent as a call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from ...engine import callforms as forms
from ...engine.call import Call
from ...engine.callforms import Args
from ..single.calls import free_call, plain_call
from ..unified.calls import token_calls
from ..unified.idle import adopt_placement

__all__ = ["REPRO_IMPORTS", "UNIFIED_MAMBA_CALLS", "UNIFIED_MAMBA_DTYPES"]

REPRO_IMPORTS = (
    "from kvpool.oracle.families.unified_mamba.peer import mamba_state_of",
    "from kvpool.oracle.families.unified.holes import hole_problems, span_and_holes",
    "from kvpool.oracle.families.unified_mamba.executor import bijection_problems")


def _flush_spec(model: Any, args: Mapping[str, Any]) -> int:
    state = args.get("state")
    if state is not None:
        adopt_placement(model, state, ("full", "state"))
    return int(model.flush_opportunistic())


def _state_alloc_target(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
    return forms.no_inputs(x.mamba_allocator.alloc(a["count"]))


def _state_free_target(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
    slots = forms.tensor(a["slots"], dev)
    x.mamba_allocator.free(slots)
    return None, [slots]


def _segment_target(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
    idx = forms.tensor(a["free_index"], dev)
    x.free_segment(idx, start_pos=a["start_pos"])
    return None, [idx]


def _translate_target(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
    return forms.no_inputs(x.translate_kv_indices_for_transfer(forms.tensor(a["kv_indices"],
                                                                            dev)))


def _fixed(allow: bool) -> Any:
    return lambda: allow


def _create_source(a: Args, var: str) -> list[str]:
    return [f"a = factory(total_bytes={a['total_bytes']}, page_size={a['page_size']}, "
            f"lazy={a['lazy']}, device=DEVICE)"]


def _int_call(name: str, clause: str) -> Call:
    """A call of one count argument, no result (``prepare_mamba_allocation``)."""
    return Call(name, "state", ("count",), spec=lambda m, a: getattr(m, name)(a["count"]),
                target=lambda x, a, dev: forms.no_inputs(getattr(x, name)(a["count"])),
                source=lambda a, var: [f"a.{name}({a['count']})"],
                raise_clause=clause, order_clause=clause)


_TABLE = [
    Call("create", "state", ("total_bytes", "page_size", "lazy"),
         spec=forms.performed_by_executor, target=forms.performed_by_executor,
         source=_create_source, raise_clause="UMB-1", order_clause="UMB-1"),
    *token_calls("UMB-2", lambda a, var: [f"{var} = a.alloc({a['need_size']})"]),
    dataclasses.replace(free_call("free", "UMB-8"), order_clause="UMB-2"),
    Call("free_segment", "free", ("free_index", "start_pos"),
         spec=lambda m, a: m.free_segment(a["free_index"], a["start_pos"]),
         target=_segment_target,
         source=lambda a, var: [f"x = {forms.tensor_source(a['free_index'])}",
                                f"a.free_segment(x, start_pos={a['start_pos']})"],
         raise_clause="UMB-8", order_clause="UMB-2", slot_args=("free_index",)),
    Call("translate_kv_indices_for_transfer", "state", ("kv_indices",),
         spec=lambda m, a: m.translate(a["kv_indices"]), target=_translate_target,
         source=lambda a, var: [f"{var} = a.translate_kv_indices_for_transfer("
                                f"{forms.tensor_source(a['kv_indices'])})"],
         raise_clause="UMB-8", order_clause="UMB-7", result_clause="UMB-7",
         checks=forms.slots_checks, slot_args=("kv_indices",)),
    Call("alloc_state", "state", ("count",), spec=lambda m, a: m.alloc_state(a["count"]),
         target=_state_alloc_target,
         source=lambda a, var: [f"{var} = a.mamba_allocator.alloc({a['count']})"],
         raise_clause="UMB-5", order_clause="UMB-5", result_clause="UMB-5",
         checks=forms.slots_checks),
    Call("free_state", "free", ("slots",), spec=lambda m, a: m.free_state(list(a["slots"])),
         target=_state_free_target,
         source=lambda a, var: [f"a.mamba_allocator.free({forms.tensor_source(a['slots'])})"],
         raise_clause="UMB-8", order_clause="UMB-5"),
    _int_call("prepare_mamba_allocation", "UMB-5"),
    dataclasses.replace(plain_call("flush_opportunistic", "state", "UMB-7", "UMB-7"),
                        spec=_flush_spec, result_clause="UMB-7",
                        source=lambda a, var: [f"{var} = a.flush_opportunistic()"],
                        checks=lambda a, e, var: [f"assert {var} == {e!r}  # [UMB-7]"]),
    Call("set_disagg_move_gate", "state", ("allow",),
         spec=lambda m, a: m.set_move_gate(a["allow"]),
         target=lambda x, a, dev: forms.no_inputs(x.set_disagg_move_gate(_fixed(a["allow"]))),
         source=lambda a, var: [f"a.set_disagg_move_gate(lambda: {a['allow']})"],
         raise_clause="UMB-3", order_clause="UMB-3"),
    plain_call("flush_deferred_full_frees", "state", "UMB-5", "UMB-5"),
    plain_call("clear", "state", "UMB-1", "UMB-1"),
    plain_call("free_group_begin", "state", "UMB-2", "UMB-2"),
    plain_call("free_group_end", "state", "UMB-2", "UMB-2"),
]

UNIFIED_MAMBA_CALLS: dict[str, Call] = {c.name: c for c in _TABLE}
# the dtype of each result SGLang 0.5.23's composite hands out: int64 ids and rows
UNIFIED_MAMBA_DTYPES: dict[str, tuple[str, str]] = {
    "alloc": ("UMB-2", "int64"), "alloc_extend": ("UMB-2", "int64"),
    "alloc_decode": ("UMB-2", "int64"), "alloc_state": ("UMB-5", "int64"),
    "translate_kv_indices_for_transfer": ("UMB-7", "int64"),
}
