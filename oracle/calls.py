"""Calls at the spec level, performed on a torch target or on the reference model.

A :class:`~kvpool.oracle.trace.TraceStep` names a call and its plain arguments; ``target_call``
turns it into SGLang's torch signature, ``model_call`` into the spec model's. Also the call
groups and the clause each call breaks when a target raises on valid input.
"""

from __future__ import annotations

from typing import Any

import torch
from kvpool.spec import AllocatorModel, ResizeConfig

from .trace import TraceStep

ALLOC_CALLS = ("alloc", "alloc_extend", "alloc_decode")
CACHE_CALLS = ("evict_to_free_tokens", "check_decode_capacity")
FREE_CALLS = ("free", "free_full", "free_segment", "free_segments")
# The clause a call breaks when the target raises on valid input.
CALL_CLAUSE = {
    "create": "MODEL-1",
    "alloc": "ALLOC-3",
    "alloc_extend": "EXTEND-6",
    "alloc_decode": "DECODE-6",
    "free": "FREE-4",
    "free_full": "FREE-7",
    "free_segment": "SEG-2",
    "free_segments": "SEG-5",
    "free_group_begin": "GROUP-1",
    "free_group_end": "GROUP-4",
    "merge_and_sort_free": "SORT-3",
    "clear": "LIFE-1",
    "resize": "LIFE-2",
    "evict_to_free_tokens": "CAP-1",
    "check_decode_capacity": "CAP-2",
}
MAX_HELD = 64  # returned tensors re-checked after every step (the most recent ones)


def _copy_value(value: Any) -> Any:
    if isinstance(value, list):
        return [list(v) if isinstance(v, list) else v for v in value]
    if isinstance(value, dict):
        return dict(value)
    return value


def clone_model(model: AllocatorModel) -> AllocatorModel:
    """A fast independent copy of the reference model (its lists copied, two levels deep)."""
    c = AllocatorModel.__new__(AllocatorModel)
    c.__dict__.update({k: _copy_value(v) for k, v in model.__dict__.items()})
    return c


def as_list(value: Any) -> Any:
    """A tensor (or sequence) as a list of ints; None stays None."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return value.tolist()
    return [int(v) for v in value]


def order_clause(call: str) -> str:
    if call in FREE_CALLS or call == "free_group_end":
        return "FREE-5"
    if call == "merge_and_sort_free":
        return "SORT-3"
    if call in ALLOC_CALLS:
        return "SORT-2"
    if call in ("clear", "resize", "create"):
        return "LIFE-1"
    return "LIFE-4"


def tensor(values: list[int], device: str) -> torch.Tensor:
    """``values`` as an int64 tensor on ``device``."""
    return torch.tensor(values, dtype=torch.int64, device=device)


def target_call(target: Any, step: TraceStep, device: str) -> tuple[Any, list[torch.Tensor]]:
    """Perform ``step`` on the target; returns its result and the input tensors."""

    def _t(values: list[int]) -> torch.Tensor:
        return tensor(values, device)

    a, c, tgt = step.args, step.call, target
    if c == "alloc":
        return tgt.alloc(a["need_size"]), []
    if c == "alloc_extend":
        pre, seq = a["prefix_lens"], a["seq_lens"]
        return tgt.alloc_extend(
            _t(pre),
            torch.tensor(pre, dtype=torch.int64),
            _t(seq),
            torch.tensor(seq, dtype=torch.int64),
            _t(a["last_loc"]),
            a["extend_num_tokens"],
        ), []
    if c == "alloc_decode":
        seq = a["seq_lens"]
        return tgt.alloc_decode(
            _t(seq), torch.tensor(seq, dtype=torch.int64), _t(a["last_loc"])
        ), []
    if c in ("free", "free_full"):
        x = _t(a["free_index"])
        return getattr(tgt, c)(x), [x]
    if c == "free_segment":
        x = _t(a["free_index"])
        return tgt.free_segment(x, start_pos=a["start_pos"]), [x]
    if c == "free_segments":
        segs = [(_t(s), p) for s, p in a["segments"]]
        return tgt.free_segments(segs), [x for x, _ in segs]
    if c == "resize":
        return tgt.resize(ResizeConfig(a["max_total_num_tokens"])), []
    return getattr(tgt, c)(), []


def model_call(model: AllocatorModel, step: TraceStep) -> Any:
    """Perform ``step`` on the reference model (raises ContractViolation on bad input)."""
    a, c = step.args, step.call
    if c == "alloc":
        return model.alloc(a["need_size"])
    if c == "alloc_extend":
        return model.alloc_extend(
            a["prefix_lens"], a["seq_lens"], a["last_loc"], a["extend_num_tokens"]
        )
    if c == "alloc_decode":
        return model.alloc_decode(a["seq_lens"], a["last_loc"])
    if c in ("free", "free_full"):
        return getattr(model, c)(a["free_index"])
    if c == "free_segment":
        return model.free_segment(a["free_index"], start_pos=a["start_pos"])
    if c == "free_segments":
        return model.free_segments([(s, p) for s, p in a["segments"]])
    if c == "resize":
        return model.resize(ResizeConfig(a["max_total_num_tokens"]))
    return getattr(model, c)()
