"""The mamba-slot call table: each call on :class:`~kvpool.spec.mamba_slots.MambaSlotModel`
(plain lists), on a target with SGLang 0.5.23's ``MambaSlotAllocator`` signatures (int64
tensors on the device; returns the result and the input tensors the caller may overwrite) and as
repro source (the target is ``a``, a result ``var``, ``t(values)`` the repro's tensor helper)."""

from __future__ import annotations

from typing import Any

import torch

from ...engine.call import Call
from ...engine.callforms import Args, no_inputs, performed_by_executor, slots_checks

__all__ = ["MAMBA_SLOT_CALLS"]


def _tensor(values: list[int], device: str) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64, device=device)


def _free(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
    slots = _tensor(list(a["slots"]), dev)
    x.free(slots)
    return None, [slots]


MAMBA_SLOT_CALLS: dict[str, Call] = {
    "create": Call(
        "create", "state", ("size",), spec=performed_by_executor, target=performed_by_executor,
        source=lambda a, var: [f"a = factory(size={a['size']}, device=DEVICE)"],
        raise_clause="MSLOT-1", order_clause="MSLOT-1"),
    "alloc": Call(
        "alloc", "alloc", ("need_size",),
        spec=lambda m, a: m.alloc(a["need_size"]),
        target=lambda x, a, dev: no_inputs(x.alloc(a["need_size"])),
        source=lambda a, var: [f"{var} = a.alloc({a['need_size']})"],
        raise_clause="MSLOT-3", order_clause="MSLOT-3", result_clause="MSLOT-3",
        checks=slots_checks),
    "free": Call(
        "free", "free", ("slots",),
        spec=lambda m, a: m.free(list(a["slots"])), target=_free,
        source=lambda a, var: [f"a.free(t({list(a['slots'])!r}))"],
        raise_clause="MSLOT-6", order_clause="MSLOT-5", slot_args=("slots",)),
    "alloc_group_begin": Call(
        "alloc_group_begin", "state", ("num_reqs",),
        spec=lambda m, a: m.alloc_group_begin(a["num_reqs"]),
        target=lambda x, a, dev: no_inputs(x.alloc_group_begin(a["num_reqs"])),
        source=lambda a, var: [f"a.alloc_group_begin({a['num_reqs']})"],
        raise_clause="MSLOT-8", order_clause="MSLOT-8"),
    "alloc_group_end": Call(
        "alloc_group_end", "state", (),
        spec=lambda m, a: m.alloc_group_end(),
        target=lambda x, a, dev: no_inputs(x.alloc_group_end()),
        source=lambda a, var: ["a.alloc_group_end()"],
        raise_clause="MSLOT-10", order_clause="MSLOT-10"),
    "clear": Call(
        "clear", "state", (),
        spec=lambda m, a: m.clear(), target=lambda x, a, dev: no_inputs(x.clear()),
        source=lambda a, var: ["a.clear()"], raise_clause="MSLOT-11", order_clause="MSLOT-11"),
}
