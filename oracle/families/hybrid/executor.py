"""Run one hybrid call on the target and on :class:`kvpool.spec.HybridModel`, then compare.

The hybrid family's part of the engine (:class:`~kvpool.oracle.engine.Engine`, which records
the trace, checks bad calls and ``ERR-1``, probes ownership and builds failures). After every
valid call: the result (slot for slot, SGLang's reference order; its dtype int64), both pools'
free censuses in order (``get_all_free_pages()`` of each side: free list then staged), the pairs
of ``full_to_swa_index_mapping`` and its trailing ``-1``, the three available sizes, the
eviction requests of the capacity hooks (``SWA-17``), the spec's invariants (``SWA-2..4``) and
the target's ``verify_byte_accounting()`` (``SWA-19``). Slot tensors go in the forms the target
declares (``slot_forms``: int32, strided views).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from kvpool.spec import ContractViolation, HybridModel
from kvpool.spec.contract import Divergence
from kvpool.spec.hybrid_pure import PureSWAModel

from ...engine.callforms import choose_form
from ...engine.core import Engine
from ...engine.dataplane import CheckedBuffer, TensorStore, live_slot, live_slots_mask
from ...engine.report import OracleError
from ...engine.trace import TraceStep
from ...reporting.pagemap import owners_from_steps, render, spec_line, target_line
from ..single.calls import as_list
from .calls import HYBRID_CALLS, HYBRID_DTYPES, PURE_CALLS, PURE_DTYPES, EvictRecorder
from .coverage import events_of

__all__ = ["CLAUSES", "FIELDS", "HybridExecutor", "census", "spec_census"]


def census(target: Any, pure: bool = False) -> tuple[object, ...]:
    """Everything the oracle compares, read from a target with SGLang's attributes (``pure``:
    the mapping's entries up to the pool's size, ``SWA-22``)."""
    mapping = target.full_to_swa_index_mapping
    values = mapping[:-1].tolist()
    if pure:
        values = values[:int(target.swa_attn_allocator.size) + 1]
    pairs = {f: s for f, s in enumerate(values) if s}
    return (target.full_attn_allocator.get_all_free_pages().tolist(),
            target.swa_attn_allocator.get_all_free_pages().tolist(), pairs, int(mapping[-1]),
            target.available_size(), target.full_available_size(), target.swa_available_size())


def spec_census(model: HybridModel) -> tuple[object, ...]:
    """The spec's side of :func:`census`."""
    return (model.full.get_all_free_pages(), model.swa.get_all_free_pages(), model.mapping_pairs(),
            -1, model.available_size(), model.full_available_size(), model.swa_available_size())


FIELDS = ("full free census", "SWA free census", "mapping pairs", "mapping's trailing entry",
          "available_size()", "full_available_size()", "swa_available_size()")
CLAUSES = ("INV-1", "INV-1", "SWA-2", "SWA-1", "SWA-5", "SWA-5", "SWA-5")
# the pure variant's clauses of the same fields (one pool; identity mapping; one capacity view)
PURE_CLAUSES = ("INV-1", "SWA-21", "SWA-22", "SWA-22", "SWA-23", "SWA-23", "SWA-23")
# each field as the repro reads it from the target ``a``
_SOURCES = (
    "a.full_attn_allocator.get_all_free_pages().tolist()",
    "a.swa_attn_allocator.get_all_free_pages().tolist()",
    "{f: s for f, s in enumerate(a.full_to_swa_index_mapping[:-1].tolist()) if s}",
    "int(a.full_to_swa_index_mapping[-1])",
    "a.available_size()", "a.full_available_size()", "a.swa_available_size()",
)


class HybridExecutor(Engine):
    """A sliding-window target and the spec, call by call (see the module docstring)."""

    family = "hybrid"
    calls = HYBRID_CALLS
    model: HybridModel | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._field: int | None = None  # the census field that differed (the repro asserts it)
        self._group_reused = False  # a free inside the open group had its inputs overwritten
        self._evict_want: list[tuple[int, int]] | None = None  # the spec's SWA-17 requests
        self.calls = PURE_CALLS if self.pure else HYBRID_CALLS  # the pure variant's clauses

    @property
    def pure(self) -> bool:
        """Whether the target is the pure sliding-window variant (``SWA-21..25``)."""
        return bool(getattr(self.caps, "pure_swa", False))

    def create(self, size: int, size_swa: int) -> None:
        """A fresh target and model of ``size`` / ``size_swa`` tokens (the pure variant: one
        pool of ``size_swa``)."""
        step = TraceStep("create", {"size": size, "size_swa": size_swa,
                                    "page_size": self.page_size, "need_sort": self.need_sort,
                                    **({"pure_swa": True} if self.pure else {})})
        self.trace.steps.append(step)
        self.model = (PureSWAModel(size_swa, self.page_size, need_sort=self.need_sort)
                      if self.pure else
                      HybridModel(size, size_swa, self.page_size, need_sort=self.need_sort))
        try:
            pure = {"pure_swa": True} if self.pure else {}  # a pure factory's marker (repros)
            self.target = self.factory(size=size, size_swa=size_swa, page_size=self.page_size,
                                       need_sort=self.need_sort, device=self.device, **pure)
        except Exception as err:
            raise OracleError(f"the factory failed: {type(err).__name__}: {err}") from err
        self._checked(0, lambda: "", lambda: self._post(step))

    def create_from(self, args: Mapping[str, Any]) -> None:
        self.create(args["size"], args["size_swa"])

    def note(self, event: str) -> None:
        """Count a coverage event the scheduler model recognises (window slides, fills, ...)."""
        self.events[event] += 1

    # -- engine hooks ----------------------------------------------------------------------------
    def _data_sides(self) -> list[CheckedBuffer]:
        """Two KV sides: the full one by full slot, live while the full pool holds its page; the
        SWA one through the target's ``translate_loc_from_full_to_swa``, live while the slot has
        its pair (a window release ends the SWA side's liveness only)."""
        return [CheckedBuffer("full", TensorStore(),
                              lambda slot: live_slot(self._spec().full, slot),
                              live_mask=lambda slots: live_slots_mask(self._spec().full, slots)),
                CheckedBuffer("swa", TensorStore(), lambda slot: self._spec().peer_of(slot) > 0,
                              translate=self.target.translate_loc_from_full_to_swa,
                              live_mask=lambda slots: torch.isin(slots, torch.tensor(
                                  self._spec().paired_slots(), dtype=torch.int64)))]

    def _prepare(self, name: str, args: dict[str, Any]) -> None:
        choose_form(args, self.caps.slot_forms, self.num_calls)  # int32 / strided slot tensors

    def _spec(self) -> HybridModel:
        assert self.model is not None
        return self.model

    def _valid(self, step: TraceStep) -> Any:
        model = self.model
        assert model is not None
        call = self.calls[step.call]
        spec_cache, target_cache = EvictRecorder(), EvictRecorder()
        try:
            want = call.spec(model, {**step.args, "tree_cache": spec_cache})
        except (ContractViolation, NotImplementedError) as err:
            raise OracleError(f"step {step.call}({step.args}) is invalid under the spec: "
                              f"{err}") from err
        step.expect = want
        group_open = model.full.free_group is not None
        got_obj, inputs = self._guard(step, call, lambda: call.target(
            self.target, {**step.args, "tree_cache": target_cache}, self.device))
        if step.call == "free_group_begin":
            self._group_reused = False
        if step.clobber:
            self._clobber(step, inputs, group_open=group_open)
            self._group_reused |= group_open and bool(inputs)
        self._check_dtype(step, got_obj, PURE_DTYPES if self.pure else HYBRID_DTYPES)
        got = as_list(got_obj) if isinstance(got_obj, torch.Tensor) else got_obj
        if got != want:
            raise Divergence(call.result_clause or "SWA-17",
                             f"{step.call} returned {got!r}, the spec says {want!r}")
        if target_cache.requests != spec_cache.requests:
            self._evict_want = list(spec_cache.requests)  # the repro asserts them
            raise Divergence("SWA-17", f"{step.call} asked the cache for {target_cache.requests} "
                                       f"(full, swa) tokens, the spec for {spec_cache.requests}")
        if call.kind == "alloc" and isinstance(got_obj, torch.Tensor):
            self._own_result(step, got_obj, got)
        return want

    def _post(self, step: TraceStep) -> None:
        model = self.model
        assert model is not None
        step.available_after = model.available_size()
        got, want = self._census(), spec_census(model)
        clauses = PURE_CLAUSES if self.pure else CLAUSES
        for i, (name, clause, g, w) in enumerate(zip(FIELDS, clauses, got, want)):
            if g != w:
                self._field = i
                raise Divergence(clause, f"after {step.call}: {name} is {_short(g)}, "
                                         f"the spec says {_short(w)}")
        try:
            model.check_invariants()
        except AssertionError as err:
            raise OracleError(f"the spec's invariants broke: {err}") from err
        self._check_held()
        verify = getattr(self.target, "verify_byte_accounting", None)
        problems = verify() if verify is not None else []
        self.events["cap.byte_accounting"] += step.call != "create" and verify is not None
        if problems:
            raise Divergence("SWA-19", f"after {step.call}: the target's census reports "
                                       f"{list(problems)[:3]}")

    def _cause(self, step: TraceStep, clause: str, detail: str) -> tuple[str, str]:
        """A group end that raises, or lists the padding page 0 free, after the caller overwrote
        (with zeros) the tensors it passed to the group's frees: the group kept them (GROUP-3)."""
        if step.call != "free_group_end" or not self._group_reused:
            return clause, detail
        try:
            got = self._census()
            zeros = any(0 in part for part in got[:2] if isinstance(part, list))
        except Exception:  # the target may be broken beyond reading
            zeros = False
        if step.raised is None and not zeros:
            return clause, detail
        return "GROUP-3", (f"free_group_end released what the caller wrote into the tensors it "
                           f"passed to the group's frees, not what they held: [{clause}] {detail}")

    def _census(self) -> tuple[object, ...]:
        return census(self.target, self.pure)

    def _record_rejected_state(self, step: TraceStep, census: Any) -> None:
        step.available_after = census[4]

    def _final_asserts(self, index: int) -> list[str]:
        step, clause = self.trace.steps[index], self.trace.clause
        call = self.calls[step.call]
        if clause == "SWA-19":
            return ["assert not a.verify_byte_accounting()  # SWA-19"]
        if clause == "SWA-17" and self._evict_want is not None:
            return [f"assert cache.requests == {self._evict_want!r}  # SWA-17 (full, swa)"]
        if clause == "ALIAS-1" and self._alias_step is not None:
            k = self._alias_step
            return [f"assert r{k}.tolist() == {self.trace.steps[k].expect!r}  # ALIAS-1"]
        if self._field is not None:
            want = spec_census(self.model)[self._field] if self.model is not None else None
            return [f"assert {_SOURCES[self._field]} == {want!r}  # [{clause}]"]
        if step.raises is None and call.checks is not None:
            return call.checks(step.args, step.expect, f"r{index}")
        return []

    def _maps(self, index: int, before: Callable[[], str]) -> tuple[str, str]:
        model = self.model
        assert model is not None
        owners = owners_from_steps(self.trace.steps, self.page_size)
        try:
            got = self._census()
            free = got[0]
            assert isinstance(free, list)
            full: str | None = target_line(model.full.num_pages, free)
        except Exception:  # the target may be broken beyond reading
            full = None
        return (render(f"before step {index}", before()),
                render(f"after step {index}, full pool", spec_line(model.full, owners), full))

    def _before_line(self, state: tuple[str, bool]) -> Callable[[], str]:
        return lambda: state[0]

    def _snapshot(self) -> tuple[str, bool]:
        """The full pool's page map before the call just appended, and whether a group is open."""
        assert self.model is not None
        owners = owners_from_steps(self.trace.steps[:-1], self.page_size)
        return spec_line(self.model.full, owners), self.model.full.free_group is not None

    def _events_of(self, step: TraceStep, state: tuple[str, bool], result: Any) -> list[str]:
        return events_of(step, state[1], result)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."
