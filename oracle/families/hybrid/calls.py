"""The hybrid call table: every call the oracle makes on a sliding-window allocator.

``HYBRID_CALLS[name]`` is a :class:`~kvpool.oracle.families.single.calls.Call` like the
single-pool table's:
the invocation on :class:`kvpool.spec.HybridModel` (``spec``: plain lists), the invocation on a
target with SGLang 0.5.23's signatures (``target``: tensors on the device, ``*_cpu`` host copies,
a resize config; returns the result and the input tensors the caller may overwrite), the same
call as Python source for a repro (``source``, ``checks``, ``reuse``), the arguments that carry
slots, and the clauses it can fail. Arguments are plain values (ints, lists of ints, segments as
``[[slots], start_pos]``); ``args["form"]`` passes the slot tensors (slots, segments,
``last_loc``, ``kv_indices``) as int32 and/or strided views (``callforms.choose_form``). The
capacity hooks take a tree cache: the executor passes an :class:`EvictRecorder` as
``args["tree_cache"]``. A new hybrid call is one more row here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch
from kvpool.spec import HybridModel, HybridResizeConfig

from ...engine import callforms as forms
from ...engine.call import Call
from ...engine.callforms import Args

__all__ = ["HYBRID_CALLS", "HYBRID_DTYPES", "PURE_CALLS", "PURE_DTYPES", "REPRO_IMPORTS",
           "EvictRecorder", "t"]

# the lines a hybrid repro imports beside the single-pool ones (``trace.to_pytest``)
REPRO_IMPORTS = (
    "from types import SimpleNamespace",
    "from kvpool.oracle.families.hybrid.calls import EvictRecorder",
)
_REUSE = "x.fill_(0)  # the caller reuses its tensor"
_REUSE_SEGS = "for x, _ in segs: x.fill_(0)  # the caller reuses its tensors"
Target = Callable[[Any, Args, str], tuple[Any, list[torch.Tensor]]]


class EvictRecorder:
    """A tree cache that records the eviction requests of the capacity hooks (``SWA-17``).

    SGLang's form (``supports_prefix_sharing()``, ``evict_for_alloc(EvictParams)``) and the
    spec's (``evict(num_tokens, swa_num_tokens)``) land in the same list; nothing is evicted.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[int, int]] = []

    def supports_prefix_sharing(self) -> bool:
        return True

    def evict_for_alloc(self, params: Any) -> None:
        self.requests.append((int(params.num_tokens), int(params.swa_num_tokens)))

    def evict(self, num_tokens: int, swa_num_tokens: int) -> None:
        self.requests.append((num_tokens, swa_num_tokens))


def t(values: Any, device: str = "cpu") -> torch.Tensor:
    """``values`` as an int64 tensor."""
    return torch.tensor(list(values), dtype=torch.int64, device=device)


def _slot_tensor(a: Args, arg: str, dev: str) -> torch.Tensor:
    """The slots of ``a[arg]`` as a tensor on ``dev`` in the call's form (``args["form"]``)."""
    return forms.tensor(a[arg], dev, forms.form_of(a))


def _slots(a: Args, arg: str) -> str:
    """Repro source of :func:`_slot_tensor`: ``t([...])`` in the call's form."""
    return forms.tensor_source(a[arg], forms.form_of(a))


def _free(name: str, raise_clause: str) -> Call:
    """A free of one tensor of full slots."""

    def target(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
        idx = _slot_tensor(a, "free_index", dev)
        return getattr(x, name)(idx), [idx]

    return Call(
        name, "free", ("free_index",),
        spec=lambda m, a: getattr(m, name)(a["free_index"]),
        target=target,
        source=lambda a, var: [f"x = {_slots(a, 'free_index')}", f"a.{name}(x)"],
        raise_clause=raise_clause, order_clause=raise_clause, reuse=_REUSE,
        slot_args=("free_index",))


def _segments(name: str) -> Call:
    def target(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
        segs = [(forms.tensor(s, dev, forms.form_of(a)), p) for s, p in a["segments"]]
        return getattr(x, name)(segs), [s for s, _ in segs]

    def source(a: Args, var: str) -> list[str]:
        segs = ", ".join(f"({forms.tensor_source(s, forms.form_of(a))}, {p})"
                         for s, p in a["segments"])
        return [f"segs = [{segs}]", f"a.{name}(segs)"]

    return Call(
        name, "free", ("segments",),
        spec=lambda m, a: getattr(m, name)([(s, p) for s, p in a["segments"]]),
        target=target, source=source, raise_clause="SWA-14", order_clause="SWA-14",
        reuse=_REUSE_SEGS, slot_args=("segments",))


def _plain(name: str, clause: str) -> Call:
    return Call(
        name, "state", (),
        spec=lambda m, a: getattr(m, name)(),
        target=lambda x, a, dev: forms.no_inputs(getattr(x, name)()),
        source=lambda a, var: [f"a.{name}()"], raise_clause=clause, order_clause=clause)


def _alloc(name: str, params: tuple[str, ...], target: Target, source: Callable[[Args], str],
           clause: str) -> Call:
    return Call(
        name, "alloc", params,
        spec=lambda m, a: getattr(m, name)(*(a[p] for p in params)),
        target=target, source=lambda a, var: [f"{var} = {source(a)}"],
        raise_clause=clause, order_clause=clause, result_clause=clause,
        checks=forms.slots_checks, slot_args=("last_loc",) if "last_loc" in params else ())


def _extend_forms(name: str, extra: tuple[str, ...] = ()) -> tuple[Target, Callable[[Args], str]]:
    """The target call and repro source of an extend-shaped call (``alloc_extend``, and
    ``alloc_extend_swa_tail`` with ``extra=("swa_tail_len",)``)."""
    def target(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
        pre, seq = a["prefix_lens"], a["seq_lens"]
        return forms.no_inputs(getattr(x, name)(
            t(pre, dev), t(pre), t(seq, dev), t(seq), _slot_tensor(a, "last_loc", dev),
            a["extend_num_tokens"], *(a[p] for p in extra)))

    def source(a: Args) -> str:
        pre, seq = a["prefix_lens"], a["seq_lens"]
        more = "".join(f", {a[p]}" for p in extra)
        return (f"a.{name}(t({pre!r}), t({pre!r}), t({seq!r}), t({seq!r}), "
                f"{_slots(a, 'last_loc')}, {a['extend_num_tokens']}{more})")

    return target, source


def _decode_target(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
    seq = a["seq_lens"]
    return forms.no_inputs(x.alloc_decode(t(seq, dev), t(seq), _slot_tensor(a, "last_loc", dev)))


def _capacity(name: str) -> Call:
    """A capacity hook; the spec's and the target's eviction requests are compared (SWA-17)."""

    def spec(m: HybridModel, a: Args) -> Any:
        if name == "check_decode_capacity":
            return m.check_decode_capacity(num_tokens=a["num_tokens"], tree_cache=a["tree_cache"])
        return m.evict_to_free_tokens(a["tree_cache"], a["num_tokens"])

    def target(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
        if name == "check_decode_capacity":
            return forms.no_inputs(
                x.check_decode_capacity(num_tokens=a["num_tokens"], tree_cache=a["tree_cache"]))
        return forms.no_inputs(x.evict_to_free_tokens(a["tree_cache"], a["num_tokens"]))

    def source(a: Args, var: str) -> list[str]:
        if name == "check_decode_capacity":
            n = a["num_tokens"]
            call = f"{var} = a.check_decode_capacity(num_tokens={n}, tree_cache=cache)"
        else:
            call = f"a.evict_to_free_tokens(cache, {a['num_tokens']})"
        return ["cache = EvictRecorder()", call]

    checks = (lambda a, e, var: [f"assert {var} == {e!r}"]) if name[0] == "c" else None
    return Call(name, "cache", ("num_tokens",), spec=spec, target=target, source=source,
                raise_clause="SWA-17", order_clause="SWA-17",
                result_clause="SWA-17" if checks else None, checks=checks)


def _create_source(a: Args, var: str) -> list[str]:
    pure = ", pure_swa=True" if a.get("pure_swa") else ""  # the pure variant (SWA-21)
    return [f"a = factory(size={a['size']}, size_swa={a['size_swa']}, "
            f"page_size={a['page_size']}, need_sort={a['need_sort']}, device=DEVICE{pure})"]


def _resize_target(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
    return forms.no_inputs(x.resize(SimpleNamespace(
        full_max_total_num_tokens=a["size"], swa_max_total_num_tokens=a["size_swa"])))


_TABLE = [
    Call("create", "state", ("size", "size_swa", "page_size", "need_sort"),
         spec=forms.performed_by_executor, target=forms.performed_by_executor,
         source=_create_source, raise_clause="SWA-1", order_clause="SWA-1"),
    _alloc("alloc", ("need_size",), lambda x, a, dev: forms.no_inputs(x.alloc(a["need_size"])),
           lambda a: f"a.alloc({a['need_size']})", "SWA-6"),
    _alloc("alloc_extend", ("prefix_lens", "seq_lens", "last_loc", "extend_num_tokens"),
           *_extend_forms("alloc_extend"), "SWA-7"),
    _alloc("alloc_extend_swa_tail",
           ("prefix_lens", "seq_lens", "last_loc", "extend_num_tokens", "swa_tail_len"),
           *_extend_forms("alloc_extend_swa_tail", ("swa_tail_len",)), "SWA-20"),
    _alloc("alloc_decode", ("seq_lens", "last_loc"), _decode_target,
           lambda a: (f"a.alloc_decode(t({a['seq_lens']!r}), t({a['seq_lens']!r}), "
                      f"{_slots(a, 'last_loc')})"), "SWA-9"),
    _free("free", "SWA-13"),
    _free("free_swa", "SWA-10"),
    _free("free_full", "SWA-12"),
    Call("free_swa_segment", "free", ("free_index", "start_pos"),
         spec=lambda m, a: m.free_swa_segment(a["free_index"], start_pos=a["start_pos"]),
         target=lambda x, a, dev: _segment_target(x, a, dev),
         source=lambda a, var: [f"x = {_slots(a, 'free_index')}",
                                f"a.free_swa_segment(x, start_pos={a['start_pos']})"],
         raise_clause="SWA-14", order_clause="SWA-14", reuse=_REUSE, slot_args=("free_index",)),
    _segments("free_segments"),
    _segments("free_full_segments"),
    Call("translate_loc_from_full_to_swa", "state", ("kv_indices",),
         spec=lambda m, a: m.translate_loc_from_full_to_swa(a["kv_indices"]),
         target=lambda x, a, dev: forms.no_inputs(
             x.translate_loc_from_full_to_swa(_slot_tensor(a, "kv_indices", dev))),
         source=lambda a, var: [
             f"{var} = a.translate_loc_from_full_to_swa({_slots(a, 'kv_indices')})"],
         raise_clause="SWA-16", order_clause="SWA-16", result_clause="SWA-16",
         checks=forms.slots_checks, slot_args=("kv_indices",)),
    _plain("free_group_begin", "SWA-15"),
    _plain("free_group_end", "SWA-15"),
    _plain("clear", "SWA-1"),
    Call("resize", "state", ("size", "size_swa"),
         spec=lambda m, a: m.resize(HybridResizeConfig(
             full_max_total_num_tokens=a["size"], swa_max_total_num_tokens=a["size_swa"])),
         target=_resize_target,
         source=lambda a, var: [
             f"a.resize(SimpleNamespace(full_max_total_num_tokens={a['size']}, "
             f"swa_max_total_num_tokens={a['size_swa']}))"],
         raise_clause="SWA-18", order_clause="SWA-18"),
    _capacity("check_decode_capacity"),
    _capacity("evict_to_free_tokens"),
]


def _segment_target(x: Any, a: Args, dev: str) -> tuple[Any, list[torch.Tensor]]:
    idx = _slot_tensor(a, "free_index", dev)
    return x.free_swa_segment(idx, start_pos=a["start_pos"]), [idx]


HYBRID_CALLS: dict[str, Call] = {c.name: c for c in _TABLE}
# the dtype of each result SGLang 0.5.23 hands out (``callforms.result_dtype_error``): int64
# slots, and an int64 translation whatever the input's dtype (SGLang's ``SWAKVPool`` indexes
# its int64 mapping with it; a static pool's identity translation keeps the input's, LIFE-3)
HYBRID_DTYPES: dict[str, tuple[str, str]] = {
    "alloc": ("SWA-6", "int64"), "alloc_extend": ("SWA-7", "int64"),
    "alloc_extend_swa_tail": ("SWA-20", "int64"), "alloc_decode": ("SWA-9", "int64"),
    "translate_loc_from_full_to_swa": ("SWA-16", "int64"),
}
# the pure variant (page size 1): int64 slots, and a translation that is its input (SWA-22)
PURE_DTYPES: dict[str, tuple[str, str]] = {
    "alloc": ("SWA-23", "int64"), "translate_loc_from_full_to_swa": ("SWA-22", "input"),
}
# the pure variant's clause of each call it takes (SWA-21..25): its table is the hybrid one's
# with these clauses for the raise, order and result checks
_PURE_CLAUSES = {
    "create": "SWA-21", "clear": "SWA-21", "alloc": "SWA-23",
    "translate_loc_from_full_to_swa": "SWA-22", "resize": "SWA-25",
    **dict.fromkeys(("free", "free_swa", "free_full", "free_swa_segment", "free_segments",
                     "free_full_segments", "free_group_begin", "free_group_end"), "SWA-24"),
}


def _pure(call: Call) -> Call:
    clause = _PURE_CLAUSES.get(call.name)
    if clause is None:
        return call
    result = clause if call.result_clause is not None else None
    return dataclasses.replace(call, raise_clause=clause, order_clause=clause,
                               result_clause=result)


PURE_CALLS: dict[str, Call] = {name: _pure(call) for name, call in HYBRID_CALLS.items()}
