"""The page-interleave call table: each call on
:class:`~kvpool.spec.page_interleave_model.PageInterleaveModel` (plain lists), on a target with
SGLang 0.5.23's ``PageInterleavePoolAllocator`` signatures (int64 tensors; ``alloc_extend``
returns the slots and resolves the caller's ``rotation_bases`` list in place) and as repro
source (the target is ``a``, a result ``var``, :func:`extend_args` the repro's helper).

An ``alloc_extend`` step's arguments are ``requests`` (``[prefix_len, seq_len]`` each) and
``bases`` (a rotation base or None each); the target's result is ``[slots or None, resolved
bases]``, the spec's ``{"slots": .., "bases": ..}`` (``bases`` None for ``alloc_cyclic``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ...engine.call import Call
from ...engine.callforms import Args, no_inputs, performed_by_executor

__all__ = ["PAGE_INTERLEAVE_CALLS", "REPRO_IMPORTS", "extend_args"]

REPRO_IMPORTS = ("from kvpool.oracle.families.page_interleave.calls import extend_args",)


def extend_args(requests: Sequence[Sequence[int]], device: str = "cpu") -> dict[str, Any]:
    """``alloc_extend``'s tensor keywords for ``requests`` (``[prefix_len, seq_len]`` each):
    prefix and sequence lengths on the device and on the host, ``last_loc`` (the slot before
    each prefix's end, -1 for none) and ``extend_num_tokens``."""
    prefix = torch.tensor([p for p, _ in requests], dtype=torch.int64)
    seq = torch.tensor([s for _, s in requests], dtype=torch.int64)
    return {"prefix_lens": prefix.to(device), "prefix_lens_cpu": prefix,
            "seq_lens": seq.to(device), "seq_lens_cpu": seq, "last_loc": (prefix - 1).to(device),
            "extend_num_tokens": int((seq - prefix).sum())}


def _extend(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
    bases = list(a["bases"])
    out = x.alloc_extend(**extend_args(a["requests"], dev), rotation_bases=bases)
    return [out, bases], []


def _cyclic(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
    return [x.alloc_cyclic(a["start_class"], a["need_size"]), None], []


def _free(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
    slots = torch.tensor(list(a["slots"]), dtype=torch.int64, device=dev)
    x.free(slots)
    return None, [slots]


def _expect(slots: list[int] | None, bases: list[int] | None) -> dict[str, Any]:
    """An allocation's answer as a trace stores it: ``{"slots": .., "bases": ..}``."""
    return {"slots": slots, "bases": bases}


def _alloc_checks(a: Args, expect: Any, var: str) -> list[str]:
    slots, bases = expect["slots"], expect["bases"]
    lines = [f"assert (None if {var} is None else {var}.tolist()) == {slots!r}"]
    return lines + ([f"assert b_{var} == {bases!r}"] if bases is not None else [])


PAGE_INTERLEAVE_CALLS: dict[str, Call] = {
    "create": Call(
        "create", "state", ("size", "shard_size"), spec=performed_by_executor,
        target=performed_by_executor,
        source=lambda a, var: [f"a = factory(size={a['size']}, page_size={a['page_size']}, "
                               f"shard_size={a['shard_size']}, need_sort={a['need_sort']}, "
                               "device=DEVICE)"],
        raise_clause="PINTER-1", order_clause="PINTER-1"),
    "alloc_extend": Call(
        "alloc_extend", "alloc", ("requests", "bases"),
        spec=lambda m, a: _expect(*m.alloc_extend([tuple(r) for r in a["requests"]], a["bases"])),
        target=_extend,
        source=lambda a, var: [f"b_{var} = {list(a['bases'])!r}",
                               f"{var} = a.alloc_extend(**extend_args({a['requests']!r}, DEVICE), "
                               f"rotation_bases=b_{var})"],
        raise_clause="PINTER-5", order_clause="PINTER-5", result_clause="PINTER-5",
        checks=_alloc_checks),
    "alloc_cyclic": Call(
        "alloc_cyclic", "alloc", ("start_class", "need_size"),
        spec=lambda m, a: _expect(m.alloc_cyclic(a["start_class"], a["need_size"]), None),
        target=_cyclic,
        source=lambda a, var: [f"{var} = a.alloc_cyclic({a['start_class']}, {a['need_size']})"],
        raise_clause="PINTER-5", order_clause="PINTER-5", result_clause="PINTER-5",
        checks=_alloc_checks),
    "free": Call(
        "free", "free", ("slots",), spec=lambda m, a: m.free(list(a["slots"])), target=_free,
        source=lambda a, var: [f"a.free(torch.tensor({list(a['slots'])!r}, dtype=torch.int64, "
                               "device=DEVICE))"],
        raise_clause="PINTER-8", order_clause="PINTER-8", slot_args=("slots",)),
    "free_group_begin": Call(
        "free_group_begin", "state", (), spec=lambda m, a: m.free_group_begin(),
        target=lambda x, a, dev: no_inputs(x.free_group_begin()),
        source=lambda a, var: ["a.free_group_begin()"],
        raise_clause="PINTER-10", order_clause="PINTER-10"),
    "free_group_end": Call(
        "free_group_end", "state", (), spec=lambda m, a: m.free_group_end(),
        target=lambda x, a, dev: no_inputs(x.free_group_end()),
        source=lambda a, var: ["a.free_group_end()"],
        raise_clause="PINTER-10", order_clause="PINTER-10"),
    "merge_and_sort_free": Call(
        "merge_and_sort_free", "state", (), spec=lambda m, a: m.merge_and_sort_free(),
        target=lambda x, a, dev: no_inputs(x.merge_and_sort_free()),
        source=lambda a, var: ["a.merge_and_sort_free()"],
        raise_clause="PINTER-9", order_clause="PINTER-9"),
    "clear": Call(
        "clear", "state", (), spec=lambda m, a: m.clear(), target=lambda x, a, dev: no_inputs(
            x.clear()),
        source=lambda a, var: ["a.clear()"], raise_clause="PINTER-13", order_clause="PINTER-13"),
}
