"""The unified call table: every call the oracle makes on a unified full + SWA composite.

``UNIFIED_CALLS[name]`` is a :class:`~kvpool.oracle.engine.call.Call` like the other families':
the invocation on :class:`kvpool.spec.unified.UnifiedSWAModel` (``spec``: plain lists), the
invocation on a target with SGLang 0.5.23's signatures (``target``), the same call as Python
source for a repro, the slot-carrying arguments and the clauses it can fail. Token ids are
*virtual* ids (``UNI-10``); the two translations read their physical rows (``UNI-11``). Slot
tensors (ids, ``last_loc``) go as int32 and/or strided views when ``args["form"]`` says so
(``callforms.choose_form``).
``free_full`` releases what ``free`` does on a page whose SWA side is already released, so its
spec form is the model's ``free``. The segment forms take a page-aligned segment of a row
(``start_pos``) and release the pages of its page representatives (every ``page_size``-th
token): ``free_swa_segment`` the SWA side (:func:`free_swa`), ``free_segment`` and
``free_full_segment`` both sides where bound, appending the virtual ids in the segment's order
(:func:`free_in_order`). Between ``free_group_begin`` and ``free_group_end`` the frees that
SGLang's composite defers (``free``, ``free_full``, ``free_segment``, ``free_full_segment``) wait
on the model too (:class:`Group`) and run at the end in its order: the plain frees as one
``free``, the full frees as one, then the segments' pages (SWA side of ``free_segment``'s,
then the full side of all, in order); window slides run at once. ``evict_to_free_tokens`` takes
a prefix cache holding the finished rows the scheduler left in it (:mod:`.cache`): the
eviction plan it asks for and its result are the spec's (``UNI-8``); :class:`ZeroCache`, with
nothing to evict, is what every other call is handed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from kvpool.spec import ContractViolation
from kvpool.spec.unified import UnifiedSWAModel

from ...engine import callforms as forms
from ...engine.call import Call
from ...engine.callforms import Args
from ..single.calls import free_call, plain_call
from .cache import decode_gate_call, evict_call, evict_spec
from .float_views import STATE_CALL
from .gates import GATE_CALL
from .idle import FLUSH_CALL
from .tail import TAIL_CALL

__all__ = ["REPRO_IMPORTS", "UNIFIED_CALLS", "UNIFIED_DTYPES", "Group", "ZeroCache", "evict_spec",
           "free_in_order"]

REPRO_IMPORTS = ("from kvpool.oracle.families.unified.calls import ZeroCache",  # calltables
                 "from kvpool.oracle.families.unified.float_views import set_state_slots, "
                 "view_problems",
                 "from kvpool.oracle.families.unified.placement import Geometry, "
                 "SubPoolGeometry, problems_of")


class ZeroCache:
    """A prefix cache with nothing evictable; records the composite's eviction requests."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, int]] = []

    def supports_prefix_sharing(self) -> bool:
        return True

    def full_evictable_size(self) -> int:
        return 0

    def swa_evictable_size(self) -> int:
        return 0

    def evict_for_alloc(self, params: Any, **_: Any) -> None:
        self.requests.append((int(params.num_tokens), int(params.swa_num_tokens)))


def free_in_order(model: UnifiedSWAModel, ids: list[int]) -> None:
    """A segment free (``UNI-10``): the pages of ``ids[::page_size]``, in that order, leave the
    SWA side where bound and the full side, and their virtual ids are appended in that order.

    Raises:
        ContractViolation: ``UNI-11`` when a page is not live; nothing changed.
    """
    model.free_swa(ids)  # checks liveness (UNI-11) before anything changes
    pages = list(dict.fromkeys(t // model.page_size for t in ids[::model.page_size]))
    model.full.release(pages)
    model.free_virtual += pages


class Group:
    """The frees an open free group defers, kept on the spec model (``model.group``)."""

    KINDS = ("free", "free_full", "free_segment", "free_full_segment")

    def __init__(self) -> None:
        self.deferred: dict[str, list[int]] = {kind: [] for kind in self.KINDS}

    @staticmethod
    def of(model: UnifiedSWAModel) -> Group | None:
        found: Group | None = getattr(model, "group", None)
        return found

    @staticmethod
    def begin(model: UnifiedSWAModel) -> None:
        model.group = Group()

    @staticmethod
    def end(model: UnifiedSWAModel) -> None:
        """Close the group: run its deferred frees in SGLang's order (module docstring)."""
        group = Group.of(model)
        model.group = None
        if group is None:
            return
        d = group.deferred
        for ids in (d["free"], d["free_full"]):
            if ids:
                model.free(ids)
        ps = model.page_size
        both = list(dict.fromkeys(t // ps for t in d["free_segment"]))
        model.swa.release([v for v in both if v in model.swa.v2p])
        pages = list(dict.fromkeys(both + [t // ps for t in d["free_full_segment"]]))
        model.full.release(pages)
        model.free_virtual += pages


def deferred(kind: str, spec: Any) -> Any:
    """``spec(model, ids)``, or, inside a group, the liveness check and the ids queued (for a
    segment: its page representatives)."""
    def run(model: UnifiedSWAModel, ids: list[int]) -> Any:
        group = Group.of(model)
        if group is None:
            return spec(model, ids)
        model.translate(ids)  # UNI-11: every page live, nothing changed otherwise
        if kind == "free_full":
            free_full_check(model, ids)
        reps = ids[::model.page_size] if kind.endswith("segment") else ids
        group.deferred[kind] += reps
        return None

    return run


def _segment(name: str, spec: Any) -> Call:
    def target(x: Any, a: Args, dev: str) -> tuple[Any, list[Any]]:
        idx = forms.tensor(a["free_index"], dev, forms.form_of(a))
        return getattr(x, name)(idx, start_pos=a["start_pos"]), [idx]

    return Call(
        name, "free", ("free_index", "start_pos"),
        spec=lambda m, a: spec(m, a["free_index"]), target=target,
        source=lambda a, var: [f"x = {forms.tensor_source(a['free_index'], forms.form_of(a))}",
                               f"a.{name}(x, start_pos={a['start_pos']})"],
        raise_clause="UNI-10", order_clause="UNI-10",
        reuse="x.fill_(0)  # the caller reuses its tensor", slot_args=("free_index",))


def free_full(model: UnifiedSWAModel, ids: list[int]) -> None:
    """``free_full`` (``UNI-10``): ``free`` of pages whose SWA side is already released.

    Raises:
        ContractViolation: ``UNI-10`` when a page's SWA side is still bound (the caller wants
            ``free``), ``UNI-11`` when a page is not live; nothing changed.
    """
    free_full_check(model, ids)
    model.free(ids)


def free_full_check(model: UnifiedSWAModel, ids: list[int]) -> None:
    """Raise ``UNI-10`` when a page of ``ids`` still has its SWA side bound."""
    bound = sorted({t // model.page_size for t in ids} & set(model.swa.v2p))
    if bound:
        raise ContractViolation("UNI-10", f"free_full of pages {bound} whose SWA side is live")


def _free(name: str, spec_name: str) -> Call:
    call = free_call(name, "UNI-10")

    def now(m: UnifiedSWAModel, ids: list[int]) -> Any:
        return free_full(m, ids) if name == "free_full" else getattr(m, spec_name)(ids)

    spec = now if name == "free_swa" else deferred(name, now)
    return dataclasses.replace(call, spec=lambda m, a: spec(m, a["free_index"]),
                               order_clause="UNI-10")


def _translate(name: str, side: str) -> Call:
    return Call(
        name, "state", ("kv_indices",),
        spec=lambda m, a: m.translate(a["kv_indices"], side),
        target=lambda x, a, dev: forms.no_inputs(getattr(x, name)(
            forms.tensor(a["kv_indices"], dev, forms.form_of(a)))),
        source=lambda a, var: [
            f"{var} = a.{name}({forms.tensor_source(a['kv_indices'], forms.form_of(a))})"],
        raise_clause="UNI-11", order_clause="UNI-11", result_clause="UNI-11",
        checks=forms.slots_checks, slot_args=("kv_indices",))


def token_calls(clause: str, alloc_source: Callable[[Args, str], list[str]]
                ) -> tuple[Call, Call, Call]:
    """``alloc``, ``alloc_extend`` and ``alloc_decode`` of a unified composite's token surface,
    each judged (raise, order and result) under ``clause``; ``alloc_source``: the repro line
    of an ``alloc``."""
    return (
        Call("alloc", "alloc", ("need_size",), spec=lambda m, a: m.alloc(a["need_size"]),
             target=lambda x, a, dev: forms.no_inputs(x.alloc(a["need_size"])),
             source=alloc_source, raise_clause=clause, order_clause=clause,
             result_clause=clause, checks=forms.slots_checks),
        Call("alloc_extend", "alloc",
             ("prefix_lens", "seq_lens", "last_loc", "extend_num_tokens"),
             spec=lambda m, a: m.alloc_extend(a["prefix_lens"], a["seq_lens"], a["last_loc"]),
             target=forms.extend_target, source=forms.extend_source, raise_clause=clause,
             order_clause=clause, result_clause=clause, checks=forms.slots_checks,
             slot_args=("last_loc",)),
        Call("alloc_decode", "alloc", ("seq_lens", "last_loc"),
             spec=lambda m, a: m.alloc_decode(a["seq_lens"], a["last_loc"]),
             target=forms.decode_target, source=forms.decode_source, raise_clause=clause,
             order_clause=clause, result_clause=clause, checks=forms.slots_checks,
             slot_args=("last_loc",)),
    )


def _alloc_source(a: Args, var: str) -> list[str]:
    return [f"{var} = a.alloc({a['need_size']})"]


def _create_source(a: Args, var: str) -> list[str]:
    return [f"a = factory(total_bytes={a['total_bytes']}, page_size={a['page_size']}, "
            f"lazy={a['lazy']}, device=DEVICE)"]


_TABLE = [
    Call("create", "state", ("total_bytes", "page_size", "lazy"),
         spec=forms.performed_by_executor, target=forms.performed_by_executor,
         source=_create_source, raise_clause="UNI-2", order_clause="UNI-2"),
    *token_calls("UNI-8", _alloc_source),
    _free("free", "free"),
    _free("free_swa", "free_swa"),
    _free("free_full", "free"),
    _segment("free_segment", deferred("free_segment", free_in_order)),
    _segment("free_full_segment", deferred("free_full_segment", free_in_order)),
    _segment("free_swa_segment", lambda m, ids: m.free_swa(ids)),
    _translate("translate_kv_indices_for_transfer", "full"),
    _translate("translate_loc_from_full_to_swa", "swa"),
    evict_call(),
    decode_gate_call(),
    FLUSH_CALL,
    TAIL_CALL,
    GATE_CALL,
    STATE_CALL,
    plain_call("clear", "state", "UNI-12", "UNI-12"),
    dataclasses.replace(plain_call("free_group_begin", "state", "UNI-10", "UNI-10"),
                        spec=lambda m, a: Group.begin(m)),
    dataclasses.replace(plain_call("free_group_end", "state", "UNI-10", "UNI-10"),
                        spec=lambda m, a: Group.end(m)),
]

UNIFIED_CALLS: dict[str, Call] = {c.name: c for c in _TABLE}
# the dtype of each result SGLang 0.5.23's composite hands out (``callforms.result_dtype_error``):
# int64 token ids, and int64 rows from both translations whatever the input's dtype (they gather
# through the sub-pools' int64 page tables; a static pool's identity keeps the input's, LIFE-3)
UNIFIED_DTYPES: dict[str, tuple[str, str]] = {
    "alloc": ("UNI-8", "int64"), "alloc_extend": ("UNI-8", "int64"),
    "alloc_decode": ("UNI-8", "int64"), "alloc_extend_swa_tail": ("UNI-8", "int64"),
    "translate_kv_indices_for_transfer": ("UNI-11", "int64"),
    "translate_loc_from_full_to_swa": ("UNI-11", "int64"),
}
