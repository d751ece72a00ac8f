"""The call table: every allocator call the oracle makes, described once.

A call's arguments are plain values in the spec's terms (``Args``: ints and lists of ints, as
stored in a :class:`~kvpool.oracle.engine.trace.TraceStep`). ``CALLS[name]`` holds, per call:

- ``spec``: the invocation on the reference model (``AllocatorModel``);
- ``target``: the invocation on a torch allocator with SGLang's signatures (tensors on the
  device, ``*_cpu`` host copies, ``ResizeConfig``), returning its result and the input tensors;
- ``source`` / ``checks`` / ``reuse``: the same call as Python source for pytest repros, the
  asserts on its result, and the line by which a caller overwrites its input tensors;
- ``slot_args``: the arguments that carry slots (replay renames them, probes follow them);
- the clauses it can fail: ``raise_clause`` (the target raised on a valid call), ``result_clause``
  (a result other than the spec's: the reference order's slots, the capacity hook's answer),
  ``order_clause`` (another free-list order after it).

The capacity hooks take a tree cache: the executor passes one as ``args["tree_cache"]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvpool.spec import AllocatorModel, ContractViolation, ResizeConfig

from ...engine import callforms as forms
from ...engine.call import MAX_HELD, Call, map_slots
from ...engine.callforms import Args, as_list, capacity_context, tensor

__all__ = [
    "ALLOC_CALLS", "CACHE_CALLS", "CALLS", "FREE_CALLS", "MAX_HELD", "Args", "Call", "as_list",
    "bind_args", "capacity_context", "clone_model", "map_slots", "model_state", "spec_accepts",
    "tensor",
]
def free_call(name: str, raise_clause: str) -> Call:
    """``free`` / ``free_full``: one tensor of slots."""
    return Call(
        name,
        "free",
        ("free_index",),
        spec=lambda m, a: getattr(m, name)(a["free_index"]),
        target=forms.free_target(name),
        source=lambda a, var: [
            f"x = {forms.tensor_source(a['free_index'], forms.form_of(a))}",
            f"a.{name}(x)",
        ],
        raise_clause=raise_clause,
        order_clause="FREE-5",
        reuse="x.fill_(0)  # the caller reuses its tensor",
        slot_args=("free_index",),
    )


def plain_call(name: str, kind: str, raise_clause: str, order_clause: str) -> Call:
    """A call without arguments."""
    return Call(
        name,
        kind,
        (),
        spec=lambda m, a: getattr(m, name)(),
        target=lambda alloc, a, device: forms.no_inputs(getattr(alloc, name)()),
        source=lambda a, var: [f"a.{name}()"],
        raise_clause=raise_clause,
        order_clause=order_clause,
    )


_TABLE = [
    Call(
        "create",
        "state",
        ("size", "page_size", "need_sort"),
        spec=forms.performed_by_executor,
        target=forms.performed_by_executor,
        source=forms.create_source,
        raise_clause="MODEL-1",
        order_clause="LIFE-1",
    ),
    Call(
        "alloc",
        "alloc",
        ("need_size",),
        spec=lambda m, a: m.alloc(a["need_size"]),
        target=lambda alloc, a, device: forms.no_inputs(alloc.alloc(a["need_size"])),
        source=lambda a, var: [f"{var} = a.alloc({a['need_size']})"],
        raise_clause="ALLOC-3",
        order_clause="SORT-2",
        result_clause="ALLOC-5",
        checks=forms.slots_checks,
    ),
    Call(
        "alloc_extend",
        "alloc",
        ("prefix_lens", "seq_lens", "last_loc", "extend_num_tokens"),
        spec=lambda m, a: m.alloc_extend(
            a["prefix_lens"], a["seq_lens"], a["last_loc"], a["extend_num_tokens"]
        ),
        target=forms.extend_target,
        source=forms.extend_source,
        raise_clause="EXTEND-6",
        order_clause="SORT-2",
        result_clause="EXTEND-7",
        checks=forms.slots_checks,
        slot_args=("last_loc",),
        from_model=forms.extend_defaults,
    ),
    Call(
        "alloc_decode",
        "alloc",
        ("seq_lens", "last_loc"),
        spec=lambda m, a: m.alloc_decode(a["seq_lens"], a["last_loc"]),
        target=forms.decode_target,
        source=forms.decode_source,
        raise_clause="DECODE-6",
        order_clause="SORT-2",
        result_clause="DECODE-7",
        checks=forms.slots_checks,
        slot_args=("last_loc",),
    ),
    free_call("free", "FREE-4"),
    free_call("free_full", "FREE-7"),
    Call(
        "free_page_ids",
        "free",
        ("page_ids",),
        spec=lambda m, a: m.free_page_ids(a["page_ids"]),
        target=forms.page_ids_target,
        source=lambda a, var: [
            f"x = {forms.tensor_source(a['page_ids'], forms.form_of(a))}",
            "a.free_page_ids(x)",
        ],
        raise_clause="FREE-8",
        order_clause="FREE-5",
        reuse="x.fill_(0)  # the caller reuses its tensor",
        slot_args=("page_ids",),
    ),
    Call(
        "free_segment",
        "free",
        ("free_index", "start_pos"),
        spec=lambda m, a: m.free_segment(a["free_index"], start_pos=a["start_pos"]),
        target=forms.segment_target,
        source=lambda a, var: [
            f"x = {forms.tensor_source(a['free_index'], forms.form_of(a))}",
            f"a.free_segment(x, start_pos={a['start_pos']})",
        ],
        raise_clause="SEG-2",
        order_clause="SEG-3",  # a segment's pages in row order
        reuse="x.fill_(0)  # the caller reuses its forms.tensor",
        slot_args=("free_index",),
    ),
    Call(
        "free_segments",
        "free",
        ("segments",),
        spec=lambda m, a: m.free_segments([(s, p) for s, p in a["segments"]]),
        target=forms.segments_target,
        source=forms.segments_source,
        raise_clause="SEG-5",
        order_clause="SEG-3",  # each segment in row order
        reuse="for x, _ in segs: x.fill_(0)  # the caller reuses its tensors",
        slot_args=("segments",),
    ),
    plain_call("free_group_begin", "state", "GROUP-1", "LIFE-4"),
    plain_call("free_group_end", "state", "GROUP-4", "GROUP-4"),  # free() inputs, then segments
    plain_call("merge_and_sort_free", "state", "SORT-3", "SORT-3"),
    plain_call("clear", "state", "LIFE-1", "LIFE-1"),
    Call(
        "resize",
        "state",
        ("max_total_num_tokens",),
        spec=lambda m, a: m.resize(ResizeConfig(a["max_total_num_tokens"])),
        target=lambda alloc, a, device: forms.no_inputs(
            alloc.resize(ResizeConfig(a["max_total_num_tokens"]))
        ),
        source=lambda a, var: [
            f"a.resize(ResizeConfig(max_total_num_tokens={a['max_total_num_tokens']}))"
        ],
        raise_clause="LIFE-2",
        order_clause="LIFE-1",
        from_model=forms.resize_from_model,
    ),
    Call(
        "translate_kv_indices_for_transfer",
        "state",
        ("kv_indices",),
        spec=lambda m, a: m.translate_kv_indices_for_transfer(a["kv_indices"]),
        target=lambda alloc, a, device: forms.no_inputs(
            alloc.translate_kv_indices_for_transfer(
                forms.tensor(a["kv_indices"], device, forms.form_of(a))
            )
        ),
        source=lambda a, var: [
            f"{var} = a.translate_kv_indices_for_transfer("
            f"{forms.tensor_source(a['kv_indices'], forms.form_of(a))})"
        ],
        raise_clause="LIFE-3",
        order_clause="LIFE-4",
        result_clause="LIFE-3",
        checks=forms.slots_checks,
        slot_args=("kv_indices",),
    ),
    Call(
        "evict_to_free_tokens",
        "cache",
        ("tree_cache", "num_tokens"),
        spec=lambda m, a: m.evict_to_free_tokens(a["tree_cache"], a["num_tokens"]),
        target=lambda alloc, a, device: forms.no_inputs(
            alloc.evict_to_free_tokens(a["tree_cache"], a["num_tokens"])
        ),
        source=lambda a, var: forms.cache_source("evict_to_free_tokens", a, var),
        raise_clause="CAP-1",
        order_clause="LIFE-4",
        checks=forms.evict_checks,
        slot_args=("entries",),
    ),
    Call(
        "check_decode_capacity",
        "cache",
        ("num_tokens", "tree_cache"),
        spec=lambda m, a: m.check_decode_capacity(
            num_tokens=a["num_tokens"], tree_cache=a["tree_cache"]
        ),
        target=lambda alloc, a, device: forms.no_inputs(
            alloc.check_decode_capacity(
                num_tokens=a["num_tokens"], tree_cache=a["tree_cache"], **forms.capacity_context(a)
            )
        ),
        source=lambda a, var: forms.cache_source("check_decode_capacity", a, var),
        raise_clause="CAP-2",
        order_clause="LIFE-4",
        result_clause="CAP-2",
        checks=lambda a, expect, var: [f"assert {var} == {expect!r}"],
        slot_args=("entries",),
    ),
]
CALLS: dict[str, Call] = {c.name: c for c in _TABLE}
ALLOC_CALLS = tuple(c.name for c in _TABLE if c.kind == "alloc")
CACHE_CALLS = tuple(c.name for c in _TABLE if c.kind == "cache")
FREE_CALLS = tuple(c.name for c in _TABLE if c.kind == "free")


def bind_args(name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> Args:
    """The table's arguments for ``name(*args, **kwargs)`` written in the spec model's signature.

    Positional arguments take the names of ``params``; ``from_model`` then fills the model's
    defaults (``alloc_extend``'s ``extend_num_tokens``) and unwraps ``resize``'s ``ResizeConfig``.
    Raises KeyError for a call not in the table.
    """
    call = CALLS[name]
    bound = dict(zip(call.params, args)) | dict(kwargs or {})
    return call.from_model(bound) if call.from_model else bound


def _copy_value(value: Any) -> Any:
    if isinstance(value, list):
        # the model's lists are homogeneous: lists of pages / statuses, or a group's lists
        if not value or type(value[0]) is not list:
            return value[:]
        return [list(v) if isinstance(v, list) else v for v in value]
    if isinstance(value, dict):
        return dict(value)
    return value


def clone_model(model: AllocatorModel) -> AllocatorModel:
    """A fast independent copy of the reference model (its lists copied, two levels deep)."""
    c = AllocatorModel.__new__(AllocatorModel)
    c.__dict__.update({k: _copy_value(v) for k, v in model.__dict__.items()})
    return c


def model_state(model: AllocatorModel) -> tuple[Any, ...]:
    """Everything the spec model's ``check_invariants`` reads, copied (lists two levels deep):
    equal states give equal verdicts."""
    group = None if model.free_group is None else [list(c) for c in model.free_group]
    return (
        model.num_pages,
        model.page_size,
        list(model.free_pages),
        list(model.staged),
        group,
        [list(c) for c in model.group_segments],
        list(model._status),
    )


def spec_accepts(model: AllocatorModel, name: str, args: Mapping[str, Any]) -> bool:
    """Whether the spec accepts the call ``name(**args)`` from ``model``'s state (run on a
    copy; ``model`` is unchanged): False when a caller rule rejects its arguments."""
    try:
        CALLS[name].spec(clone_model(model), args)
    except ContractViolation:
        return False
    return True
