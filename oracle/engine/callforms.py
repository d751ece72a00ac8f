"""The pieces the call table (:mod:`kvpool.oracle.families.single.calls`) is built from, one
per call form.

Target invocations (tensors on the device, ``*_cpu`` host copies, SGLang's keywords), the Python
source of the same calls for pytest repros and the asserts on their results, and the conversions
from the spec model's signature to the table's arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from kvpool.spec import ResizeConfig

Args = Mapping[str, Any]

# The forms a slot tensor is passed in (``args["form"]``; absent: int64 contiguous): int32 rows
# and strided views, as SGLang's scheduler passes them (a target declares ``slot_forms``).
FORMS = ("int64", "int32", "strided", "int32+strided")
FORM_ARGS = ("free_index", "segments", "page_ids", "kv_indices", "last_loc")
# per call: the clause a result tensor of another dtype than SGLang 0.5.23's breaks, and that
# dtype ("int64", or "input": the dtype of the call's slot tensors). A family passes its own
# table to :func:`result_dtype_error`; this one is the single pool's (a static pool's
# translation is the identity).
DTYPES: dict[str, tuple[str, str]] = {
    "alloc": ("ALLOC-4", "int64"),
    "alloc_extend": ("EXTEND-4", "int64"),
    "alloc_decode": ("DECODE-5", "int64"),
    "translate_kv_indices_for_transfer": ("LIFE-3", "input"),
}


def tensor(values: Sequence[int], device: str, form: str | None = None) -> torch.Tensor:
    """``values`` as a tensor on ``device``: int64 contiguous, or in ``form`` (``FORMS``: int32
    and/or a view of every other element of a twice-repeated tensor, stride 2)."""
    dtype = torch.int32 if form and "int32" in form else torch.int64
    x = torch.tensor(list(values), dtype=dtype, device=device)
    return x.repeat_interleave(2)[::2] if form and "strided" in form else x


def form_of(a: Args) -> str | None:
    """The form a call's slot tensors are passed in (None: int64 contiguous)."""
    form: str | None = a.get("form")
    return form


def choose_form(args: dict[str, Any], accepted: Sequence[str], num_calls: int) -> None:
    """Give a call that passes slot tensors its form (``args["form"]``), cycling with
    ``num_calls`` through int64 contiguous and every form of ``accepted`` (a target's
    ``slot_forms``), both together when both are accepted. Nothing changes when the target
    accepts no other form or the call passes no slot tensor."""
    if not accepted or not any(name in args for name in FORM_ARGS):
        return
    options = [f for f in FORMS if all(part in ("int64", *accepted) for part in f.split("+"))]
    form = options[num_calls % len(options)]
    if form != "int64":
        args["form"] = form


def result_dtype(
    name: str, a: Args, dtypes: Mapping[str, tuple[str, str]] = DTYPES
) -> tuple[str, torch.dtype] | None:
    """``(clause, dtype)``: the dtype SGLang's result of the call ``name`` with the arguments
    ``a`` has (``dtypes[name]``: int64, or the dtype of the input's form) and the clause another
    dtype breaks; None when the call has no such rule."""
    rule = dtypes.get(name)
    if rule is None:
        return None
    clause, kind = rule
    form = form_of(a)
    given = torch.int32 if form and "int32" in form else torch.int64
    return clause, given if kind == "input" else torch.int64


def result_dtype_error(
    name: str, a: Args, result: Any, dtypes: Mapping[str, tuple[str, str]] = DTYPES
) -> tuple[str, str] | None:
    """``(clause, detail)`` when the tensor ``result`` of the call ``name`` has another dtype
    than SGLang's (:func:`result_dtype`)."""
    rule = result_dtype(name, a, dtypes)
    if rule is None or not isinstance(result, torch.Tensor) or result.dtype == rule[1]:
        return None
    clause, want = rule
    form = form_of(a)
    given = torch.int32 if form and "int32" in form else torch.int64
    input_text = f" for {given} input" if "kv_indices" in a else ""
    return clause, f"{name} returned a {result.dtype} tensor{input_text}; SGLang returns {want}"


def as_list(value: Any) -> Any:
    """A tensor (or sequence) as a list of ints; None stays None."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return value.tolist()
    return [int(v) for v in value]


def tensor_source(values: Any, form: str | None = None) -> str:
    """``values`` as repro source: ``t([...])`` (the repro defines ``t``), in ``form``."""
    source = f"t({values!r})"
    if form and "int32" in form:
        source += ".int()"
    if form and "strided" in form:
        source += ".repeat_interleave(2)[::2]"
    return source


def no_inputs(result: Any) -> tuple[Any, list[torch.Tensor]]:
    return result, []


def slots_checks(args: Args, expect: Any, var: str) -> list[str]:
    if expect is None:
        return [f"assert {var} is None"]
    return [f"assert {var} is not None and {var}.tolist() == {expect!r}"]


def free_target(name: str) -> Callable[[Any, Args, str], tuple[Any, list[torch.Tensor]]]:
    def run(alloc: Any, a: Args, device: str) -> tuple[Any, list[torch.Tensor]]:
        x = tensor(a["free_index"], device, form_of(a))
        return getattr(alloc, name)(x), [x]

    return run


def page_ids_target(alloc: Any, a: Args, device: str) -> tuple[Any, list[torch.Tensor]]:
    x = tensor(a["page_ids"], device, form_of(a))
    return alloc.free_page_ids(x), [x]


def extend_target(alloc: Any, a: Args, device: str) -> tuple[Any, list[torch.Tensor]]:
    pre, seq = a["prefix_lens"], a["seq_lens"]
    return no_inputs(
        alloc.alloc_extend(
            tensor(pre, device),
            tensor(pre, "cpu"),
            tensor(seq, device),
            tensor(seq, "cpu"),
            tensor(a["last_loc"], device, form_of(a)),
            a["extend_num_tokens"],
        )
    )


def extend_source(a: Args, var: str) -> list[str]:
    pre, seq = tensor_source(a["prefix_lens"]), tensor_source(a["seq_lens"])
    return [
        f"{var} = a.alloc_extend({pre}, {pre}.cpu(), {seq}, {seq}.cpu(), "
        f"{tensor_source(a['last_loc'], form_of(a))}, {a['extend_num_tokens']})"
    ]


def decode_source(a: Args, var: str) -> list[str]:
    seq = tensor_source(a["seq_lens"])
    last_loc = tensor_source(a["last_loc"], form_of(a))
    return [f"{var} = a.alloc_decode({seq}, {seq}.cpu(), {last_loc})"]


def decode_target(alloc: Any, a: Args, device: str) -> tuple[Any, list[torch.Tensor]]:
    seq = a["seq_lens"]
    return no_inputs(
        alloc.alloc_decode(
            tensor(seq, device), tensor(seq, "cpu"), tensor(a["last_loc"], device, form_of(a))
        )
    )


def segment_target(alloc: Any, a: Args, device: str) -> tuple[Any, list[torch.Tensor]]:
    x = tensor(a["free_index"], device, form_of(a))
    return alloc.free_segment(x, start_pos=a["start_pos"]), [x]


def segments_target(alloc: Any, a: Args, device: str) -> tuple[Any, list[torch.Tensor]]:
    segs = [(tensor(s, device, form_of(a)), p) for s, p in a["segments"]]
    return alloc.free_segments(segs), [x for x, _ in segs]


def segments_source(a: Args, var: str) -> list[str]:
    segs = ", ".join(f"({tensor_source(s, form_of(a))}, {p})" for s, p in a["segments"])
    return [f"segs = [{segs}]", "a.free_segments(segs)"]


def cache_source(call: str, a: Args, var: str) -> list[str]:
    head = f"cache = TinyTreeCache.for_torch(a, {a['entries']!r}, DEVICE)"
    if call == "evict_to_free_tokens":
        return [head, f"a.evict_to_free_tokens(cache, {a['num_tokens']})"]
    context = "".join(f", {k}={v!r}" for k, v in capacity_context(a).items())
    return [
        head,
        f"{var} = a.check_decode_capacity(num_tokens={a['num_tokens']}, tree_cache=cache"
        f"{context})",
    ]


def capacity_context(a: Args) -> dict[str, Any]:
    """SGLang 0.5.23's extra ``check_decode_capacity`` keywords when the step carries them."""
    return {"requests": [], "spec_algorithm": None} if a.get("context") else {}


def evict_checks(a: Args, expect: Any, var: str) -> list[str]:
    if expect is None:
        return []
    return [f"assert len(cache.entries) == {len(a['entries']) - expect}"]


def extend_defaults(a: dict[str, Any]) -> dict[str, Any]:
    """The model's default ``extend_num_tokens``: ``sum(seq_lens) - sum(prefix_lens)``."""
    if a.get("extend_num_tokens") is None:
        a["extend_num_tokens"] = sum(a["seq_lens"]) - sum(a["prefix_lens"])
    return a


def resize_from_model(a: dict[str, Any]) -> dict[str, Any]:
    """The model takes a ``ResizeConfig``; the table its ``max_total_num_tokens``."""
    config = a["max_total_num_tokens"]
    if isinstance(config, ResizeConfig):
        a["max_total_num_tokens"] = config.max_total_num_tokens
    return a


def create_source(a: Args, var: str) -> list[str]:
    return [
        f"a = factory(size={a['size']}, page_size={a['page_size']}, "
        f"need_sort={a['need_sort']}, device=DEVICE)"
    ]


def performed_by_executor(*_: Any) -> Any:
    raise TypeError("create is performed by the executor (it builds the model and the target)")
