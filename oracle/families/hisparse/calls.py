"""The HiSparse call table: each call on :class:`~kvpool.spec.hisparse.HiSparseModel` (plain
lists), on a target with SGLang 0.5.23's ``HiSparseTokenToKVPoolAllocator`` signatures (int64
tensors on the device; returns the result and the input tensors the caller may overwrite) and
as repro source (the target is ``a``, a result ``var``, ``t(values)`` the repro's tensor
helper)."""

from __future__ import annotations

from typing import Any

import torch

from ...engine.call import Call
from ...engine.callforms import (
    Args,
    no_inputs,
    performed_by_executor,
    slots_checks,
    tensor_source,
)

__all__ = ["HISPARSE_CALLS"]


def _t(values: list[int], device: str) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64, device=device)


def _extend_args(a: Args, dev: str) -> tuple[Any, ...]:
    pre, seq = _t(list(a["prefix_lens"]), dev), _t(list(a["seq_lens"]), dev)
    return (pre, pre.cpu(), seq, seq.cpu(), _t(list(a["last_loc"]), dev),
            sum(a["seq_lens"]) - sum(a["prefix_lens"]))


def _extend_source(name: str) -> Any:
    def source(a: Args, var: str) -> list[str]:
        pre, seq = tensor_source(a["prefix_lens"]), tensor_source(a["seq_lens"])
        num = sum(a["seq_lens"]) - sum(a["prefix_lens"])
        return [f"{var} = a.{name}({pre}, {pre}.cpu(), {seq}, {seq}.cpu(), "
                f"{tensor_source(a['last_loc'])}, {num})"]

    return source


def _free(name: str) -> Any:
    def run(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
        slots = _t(list(a["slots"]), dev)
        getattr(x, name)(slots)
        return None, [slots]

    return run


def _state(name: str, clause: str) -> Call:
    return Call(name, "state", (), spec=lambda m, a: getattr(m, name)(),
                target=lambda x, a, dev: no_inputs(getattr(x, name)()),
                source=lambda a, var: [f"a.{name}()"], raise_clause=clause, order_clause=clause)


def _decode(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
    seq = _t(list(a["seq_lens"]), dev)
    return no_inputs(x.alloc_decode(seq, seq.cpu(), _t(list(a["last_loc"]), dev)))


def _logical_free(name: str) -> Call:
    """A DSV4 logical-side free (``free_swa`` / ``free_full``, ``HSP-15``)."""

    def spec(m: Any, a: Args) -> Any:
        return getattr(m, name)(list(a["slots"]))

    def source(a: Args, var: str) -> list[str]:
        return [f"a.{name}({tensor_source(a['slots'])})"]

    return Call(name, "free", ("slots",), spec=spec, target=_free(name), source=source,
                raise_clause="HSP-15", order_clause="HSP-15", slot_args=("slots",))


HISPARSE_CALLS: dict[str, Call] = {
    "create": Call(
        "create", "state", ("size", "page_size", "need_sort", "ratio"),
        spec=performed_by_executor, target=performed_by_executor,
        source=lambda a, var: [f"a = factory({', '.join(f'{k}={v}' for k, v in a.items())}, "
                               f"device=DEVICE)"],
        raise_clause="HSP-1", order_clause="HSP-1"),
    "alloc": Call(
        "alloc", "alloc", ("need_size",),
        spec=lambda m, a: m.alloc(a["need_size"]),
        target=lambda x, a, dev: no_inputs(x.alloc(a["need_size"])),
        source=lambda a, var: [f"{var} = a.alloc({a['need_size']})"],
        raise_clause="HSP-4", order_clause="HSP-4", result_clause="HSP-4", checks=slots_checks),
    "alloc_extend": Call(
        "alloc_extend", "alloc", ("prefix_lens", "seq_lens", "last_loc"),
        spec=lambda m, a: m.alloc_extend(a["prefix_lens"], a["seq_lens"], a["last_loc"]),
        target=lambda x, a, dev: no_inputs(x.alloc_extend(*_extend_args(a, dev))),
        source=_extend_source("alloc_extend"), raise_clause="HSP-5", order_clause="HSP-5",
        result_clause="HSP-5", checks=slots_checks, slot_args=("last_loc",)),
    "alloc_logical_only": Call(
        "alloc_logical_only", "alloc", ("prefix_lens", "seq_lens", "last_loc"),
        spec=lambda m, a: m.alloc_logical_only(a["prefix_lens"], a["seq_lens"], a["last_loc"]),
        target=lambda x, a, dev: no_inputs(x.alloc_logical_only(*_extend_args(a, dev))),
        source=_extend_source("alloc_logical_only"), raise_clause="HSP-6",
        order_clause="HSP-6", result_clause="HSP-6", checks=slots_checks,
        slot_args=("last_loc",)),
    "alloc_decode": Call(
        "alloc_decode", "alloc", ("seq_lens", "last_loc"),
        spec=lambda m, a: m.alloc_decode(a["seq_lens"], a["last_loc"]), target=_decode,
        source=lambda a, var: [f"{var} = a.alloc_decode({tensor_source(a['seq_lens'])}, "
                               f"{tensor_source(a['seq_lens'])}.cpu(), "
                               f"{tensor_source(a['last_loc'])})"],
        raise_clause="HSP-6", order_clause="HSP-6", result_clause="HSP-6", checks=slots_checks,
        slot_args=("last_loc",)),
    "alloc_device_buffer": Call(
        "alloc_device_buffer", "alloc", ("slots", "need_size"),
        spec=lambda m, a: m.alloc_device_buffer(list(a["slots"]), a["need_size"]),
        target=lambda x, a, dev: no_inputs(
            x.alloc_device_buffer(_t(list(a["slots"]), dev), a["need_size"])),
        source=lambda a, var: [f"{var} = a.alloc_device_buffer({tensor_source(a['slots'])}, "
                               f"{a['need_size']})"],
        raise_clause="HSP-7", order_clause="HSP-7", result_clause="HSP-7", checks=slots_checks),
    "free": Call(
        "free", "free", ("slots",), spec=lambda m, a: m.free(list(a["slots"])),
        target=_free("free"), source=lambda a, var: [f"a.free({tensor_source(a['slots'])})"],
        raise_clause="HSP-8", order_clause="HSP-8", slot_args=("slots",)),
    "free_swa": _logical_free("free_swa"),
    "free_full": _logical_free("free_full"),
    "free_hisparse_indices": Call(
        "free_hisparse_indices", "free", ("slots",),
        spec=lambda m, a: m.free_hisparse_indices(list(a["slots"])),
        target=_free("free_hisparse_indices"),
        source=lambda a, var: [f"a.free_hisparse_indices({tensor_source(a['slots'])})"],
        raise_clause="HSP-9", order_clause="HSP-9"),
    "get_last_loc_hisparse_device": Call(
        "get_last_loc_hisparse_device", "alloc", ("last_loc",),
        spec=lambda m, a: m.get_last_loc_hisparse_device(list(a["last_loc"])),
        target=lambda x, a, dev: no_inputs(
            x.get_last_loc_hisparse_device(_t(list(a["last_loc"]), dev))),
        source=lambda a, var: [f"{var} = a.get_last_loc_hisparse_device("
                               f"{tensor_source(a['last_loc'])})"],
        raise_clause="HSP-10", order_clause="HSP-10", result_clause="HSP-10",
        checks=slots_checks),
    "get_last_loc_compressed": Call(
        "get_last_loc_compressed", "alloc", ("last_loc",),
        spec=lambda m, a: m.get_last_loc_compressed(list(a["last_loc"])),
        target=lambda x, a, dev: no_inputs(
            x.get_last_loc_compressed(_t(list(a["last_loc"]), dev))),
        source=lambda a, var: [f"{var} = a.get_last_loc_compressed("
                               f"{tensor_source(a['last_loc'])})"],
        raise_clause="HSP-10", order_clause="HSP-10", result_clause="HSP-10",
        checks=slots_checks),
    "free_group_begin": _state("free_group_begin", "HSP-11"),
    "free_group_end": _state("free_group_end", "HSP-11"),
    "clear": _state("clear", "HSP-11"),
}
