"""Run one call on a single-pool target and on the spec side by side, and check everything after.

The :class:`Executor` is the single-pool family's part of the engine
(:class:`~kvpool.oracle.engine.Engine`: trace, bad calls and ``ERR-1``, ownership probes,
failures). Each valid call is performed on both sides; results are compared (``exact``: slot
for slot; ``contract``: the spec accepts the target's choice and adopts it), then
``available_size()``, the free census, the spec's invariants and every tensor handed out earlier
(``ALIAS-1``). The first divergence raises :class:`OracleFailure` carrying a
:class:`~kvpool.oracle.engine.report.Failure`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from kvpool.spec import AllocatorModel, ContractViolation
from kvpool.spec.census import decode_capacity_ok
from kvpool.spec.contract import (
    Divergence,
    accept_alloc,
    accept_decode,
    accept_extend,
    check_census,
)
from kvpool.spec.wording import counted

from ...engine.call import Call
from ...engine.callforms import DTYPES, choose_form
from ...engine.core import Engine
from ...engine.dataplane import CheckedBuffer, TensorStore, live_slot, live_slots_mask
from ...engine.report import OracleError
from ...engine.target import Config, Target
from ...engine.trace import TraceStep
from ...reporting.pagemap import owners_from_steps, render, spec_line, status_line, target_line
from .asserts import failure_asserts
from .attribution import census_clause, raise_cause
from .calls import ALLOC_CALLS, CALLS, as_list, clone_model, model_state, spec_accepts
from .causes import MERGE_CALLS, explain, short_after_merge, skipped_merge
from .coverage import Before, events_of, snapshot
from .decode_cause import page_open_mismatch
from .treecache import TinyTreeCache

__all__ = ["Executor", "OracleError"]


class Executor(Engine):
    """A single-pool target and the spec, driven call by call (see the module docstring)."""

    family = "single"
    calls = CALLS
    model: AllocatorModel | None

    def __init__(self, target: Target, config: Config) -> None:
        """Drive ``target`` in ``config``.

        Raises ValueError for an order other than ``exact`` / ``contract``.
        """
        if config.order not in ("exact", "contract"):
            raise ValueError(f"order must be 'exact' or 'contract', got {config.order!r}")
        super().__init__(target, config)
        self.trace.paged = self.caps.paged  # a repro's spec side is built the same way

    # the spec model's state its invariants last held in (``_post`` checks again on a change)
    _model_checked: tuple[Any, ...] | None = None
    _staged_before: list[int] = []  # noqa: RUF012 - never mutated, replaced per call

    def owners(self) -> dict[int, str]:
        """Owned page -> the letter of the step that handed it out (``pagemap``)."""
        return owners_from_steps(self.trace.steps, self.page_size)

    def check_invariants(self) -> None:
        """The spec model's invariants hold and only allocation results are held.

        Raises AssertionError otherwise (``_post`` turns it into an :class:`OracleError`).
        """
        if self.model is not None:
            self.model.check_invariants()
        self._check_held_kinds()

    def _check_held_kinds(self) -> None:
        """Raise AssertionError when a held result is not an allocation's."""
        for index, _, _ in self.held:
            assert self.trace.steps[index].call in ALLOC_CALLS, "held a non-allocation result"

    # -- public steps ------------------------------------------------------------------------
    def create(self, size: int) -> None:
        """Build a fresh target and model of ``size`` tokens."""
        self._staged_before = []
        step = self._begin(
            {"size": size, "page_size": self.page_size, "need_sort": self.need_sort},
            AllocatorModel(size, self.page_size, paged=self.caps.paged, need_sort=self.need_sort),
            size=size, page_size=self.page_size, need_sort=self.need_sort, device=self.device,
        )
        self._checked(len(self.trace.steps) - 1, lambda: "", lambda: self._post(step))
        self.events.update(events_of(step, snapshot(self.model), self.model, None))

    def create_from(self, args: Mapping[str, Any]) -> None:
        self.create(args["size"])

    # -- engine hooks ----------------------------------------------------------------------------
    def _data_sides(self) -> list[CheckedBuffer]:
        """One KV side: a harness-owned row per slot, live while the spec model holds its page."""
        return [CheckedBuffer("kv", TensorStore(), lambda slot: live_slot(self.model, slot),
                              live_mask=lambda slots: live_slots_mask(self.model, slots))]

    def _prepare(self, name: str, args: dict[str, Any]) -> None:
        if name == "check_decode_capacity" and self.caps.capacity_context:
            args.setdefault("context", self.num_calls % 2 == 0)  # SGLang's keywords, every other
        choose_form(args, self.caps.slot_forms, self.num_calls)  # int32 / strided slot tensors

    def _snapshot(self) -> Before:
        assert self.model is not None
        return snapshot(self.model)

    def _events_of(self, step: TraceStep, state: Any, result: Any) -> Iterable[str]:
        return events_of(step, state, self.model, result)

    def _before_line(self, state: Before) -> Callable[[], str]:
        """The page map before the call just appended to the trace, drawn only if it fails."""
        steps = len(self.trace.steps) - 1
        return lambda: status_line(
            state.status, owners_from_steps(self.trace.steps[:steps], self.page_size)
        )

    def _maps(self, index: int, before: Callable[[], str]) -> tuple[str, str]:
        model = self.model
        assert model is not None
        after_spec = spec_line(model, self.owners())
        try:
            free, _ = self._census()
            after_target: str | None = target_line(model.num_pages, free)
        except Exception:  # the target may be broken beyond reading
            after_target = None
        return (
            render(f"before step {index}", before()),
            render(f"after step {index}", after_spec, after_target),
        )

    def _cause(self, step: TraceStep, clause: str, detail: str) -> tuple[str, str]:
        """A valid call that raised, or an allocation short after a merge that lost staged
        pages: the rule that explains it (``attribution``)."""
        if self._staged_before and step.call in MERGE_CALLS:
            try:
                free, _ = self._census()
            except Exception:  # a target broken beyond reading keeps its clause
                free = list(self._staged_before)
            lost = short_after_merge(step.call, clause, detail, self._staged_before, free)
            if lost is not None:
                return lost
        return raise_cause(self.trace.steps, clause, detail)

    def _final_asserts(self, index: int) -> list[str]:
        return failure_asserts(self.trace, index, alias_step=self._alias_step)

    def _record_rejected_state(self, step: TraceStep, census: Any) -> None:
        step.census_after, step.available_after = sorted(census[0]), census[1]

    # -- comparison ----------------------------------------------------------------------------
    def _valid(self, step: TraceStep) -> Any:
        model = self.model
        assert model is not None
        call = CALLS[step.call]
        if call.kind == "cache":
            return self._cache_call(step, call)
        pre = clone_model(model) if call.kind == "alloc" else model
        # the staged pages a merge in this call takes (attribution's SORT-3)
        self._staged_before: list[int] = list(model.staged) if self.need_sort else []
        expected = None
        if call.kind != "alloc" or self.order == "exact":
            try:
                expected = call.spec(model, step.args)
            except ContractViolation as err:
                raise OracleError(
                    f"step {step.call}({step.args}) is invalid under the spec: {err}"
                ) from err
            step.expect = expected  # the spec's result, asserted by a repro even if this raises
        try:
            got_obj, inputs = self._guard(
                step,
                call,
                lambda: call.target(self.target, step.args, self.device),
                shortage=lambda: self._spec_short(pre, step, expected),
            )
        except Divergence:
            if expected is None and call.kind == "alloc":  # contract order: not checked yet
                self._spec_accepts(pre, step)
            raise
        self._check_dtype(step, got_obj, DTYPES)
        if step.clobber:
            self._clobber(step, inputs, group_open=model.free_group is not None)
        if call.kind != "alloc":
            # a state call with an answer (LIFE-3)
            if call.result_clause is not None and as_list(got_obj) != expected:
                raise Divergence(
                    call.result_clause,
                    f"{call.name} returned {as_list(got_obj)}, the spec gives {expected}",
                )
            return None
        got = as_list(got_obj)
        step.expect = expected if self.order == "exact" else got
        if (step.call == "alloc_decode" and got != expected  # which requests open a page
                and spec_accepts(pre, step.call, step.args)):
            opened = page_open_mismatch(step.args, got, pre.page_size,
                                        {*pre.free_pages, *pre.staged})
            if opened is not None:
                raise Divergence(*opened)
        if self.order == "exact":
            if got != expected:
                self._accept(pre, step, got)  # a contract clause when the result is not even valid
                raise Divergence(
                    str(call.result_clause),
                    f"returned {got}, the reference order gives {expected}",
                )
        else:
            self._accept(model, step, got)
        if isinstance(got_obj, torch.Tensor):  # ALIAS-3 on a probed step, else ALIAS-1
            self._own_result(step, got_obj, got)
        return got

    @staticmethod
    def _spec_accepts(model: AllocatorModel, step: TraceStep) -> None:
        """Raise :class:`OracleError` when the spec rejects ``step`` on (a copy of) ``model``:
        a target raising on an invalid call (a shortened trace's) is no divergence."""
        try:
            CALLS[step.call].spec(clone_model(model), step.args)
        except ContractViolation as err:
            raise OracleError(
                f"step {step.call}({step.args}) is invalid under the spec: {err}"
            ) from err

    def _accept(self, model: AllocatorModel, step: TraceStep, got: Any) -> None:
        a = step.args
        if step.call == "alloc":
            accept_alloc(model, a["need_size"], got)
        elif step.call == "alloc_extend":
            accept_extend(model, a["prefix_lens"], a["seq_lens"], a["last_loc"], got)
        else:
            accept_decode(model, a["seq_lens"], a["last_loc"], got)

    def _cache_call(self, step: TraceStep, call: Call) -> Any:
        """A capacity hook on both sides, each with its own tree cache of the same entries.

        CAP-1 asks the cache for the shortfall; in contract order a target that evicts more
        entries is conformant and the spec adopts its choice (evicts as many), in exact order
        the count must be the spec's. ``check_decode_capacity`` gets SGLang 0.5.23's extra
        keywords when the step says so and the target declares ``capacity_context``.
        ``expect``: the hook's answer (``check_decode_capacity``), else the entries evicted.
        """
        model = self.model
        assert model is not None
        a = dict(step.args)
        if not self.caps.capacity_context:
            a.pop("context", None)
        num_tokens = a["num_tokens"]
        model_cache = TinyTreeCache(model.free, a["entries"])
        target_cache = TinyTreeCache.for_torch(self.target, a["entries"], self.device)
        call.spec(model, {**a, "tree_cache": model_cache})
        answers = call.result_clause is not None  # check_decode_capacity

        def spec_answer() -> Any:
            if answers:
                return decode_capacity_ok(num_tokens, model.available_size())
            return model_cache.num_evicted

        if self.order == "exact":  # known before the target runs (a repro asserts it)
            step.expect = spec_answer()
        got = self._guard(
            step,
            call,
            lambda: call.target(self.target, {**a, "tree_cache": target_cache}, self.device)[0],
        )
        try:
            model_cache.check_invariants()
        except AssertionError as err:
            raise OracleError(f"the spec's tree cache broke its invariants: {err}") from err
        try:
            target_cache.check_invariants()
        except AssertionError as err:
            raise Divergence("CAP-1", f"{call.name} left the tree cache broken: {err}") from err
        more = target_cache.num_evicted - model_cache.num_evicted
        step.evicted = target_cache.num_evicted  # its frees, for the census's cause
        if more > 0 and self.order == "contract":
            model_cache.evict_entries(more)
        elif more != 0:
            step.expect, step.evicted = spec_answer(), model_cache.num_evicted
            raise Divergence(
                "CAP-1",
                f"evicted {counted(target_cache.num_evicted, 'cache entry', 'cache entries')} for "
                f"{counted(num_tokens, 'token')}, "
                f"the spec evicts {model_cache.num_evicted}"
                + (" (fewer than the shortfall needs)" if more < 0 else ""),
            )
        step.expect = spec_answer()
        if answers and bool(got) != step.expect:
            raise Divergence(
                str(call.result_clause),
                f"{call.name}({num_tokens}) returned {got}, the spec says {step.expect}",
            )
        return model_cache.num_evicted

    def _spec_short(self, pre: AllocatorModel, step: TraceStep, expected: Any) -> bool:
        """Whether the spec answers the allocation ``step`` with None (a shortage), on ``pre``."""
        if self.order == "exact":
            return expected is None
        self._spec_accepts(pre, step)
        return CALLS[step.call].spec(clone_model(pre), step.args) is None

    def _census(self, result: Any = None) -> tuple[list[int], int]:
        """``(get_all_free_pages(), available_size())`` as a list and an int; ``result``: the
        list's tensor when the caller fetched it already."""
        free = self.target.get_all_free_pages() if result is None else result
        return (as_list(free) if free is not None else []), int(self.target.available_size())

    def _probe_census(self, census: Any, free: list[int], available: int) -> None:
        """Write garbage into ``census``, a ``get_all_free_pages()`` result read into ``free``
        and ``available`` just now; the census must not change."""
        if isinstance(census, torch.Tensor):
            census.fill_(-1)
            self.events["alias.results"] += 1
        again = self._census()
        if again != (free, available):
            raise Divergence(
                "ALIAS-3",
                f"writing into the result of get_all_free_pages() changed the allocator: free "
                f"{free} -> {again[0]}, available {available} -> {again[1]}",
            )

    def _post(self, step: TraceStep) -> None:
        model = self.model
        assert model is not None
        result = self.target.get_all_free_pages()
        free, available = self._census(result)
        if step.probe or (step.call not in ALLOC_CALLS and self._probes(step)):
            self._probe_census(result, free, available)
        spec_free, spec_available = model.get_all_free_pages(), model.available_size()
        step.available_after, step.census_after = spec_available, sorted(spec_free)
        exact = self.order == "exact"
        if exact:
            step.free_after = spec_free
        same_order = exact and free == spec_free  # then the census is the same multiset too
        if available != spec_available or not (same_order or sorted(free) == step.census_after):
            want, got = Counter(spec_free), Counter(free)
            extra, lacking = sorted((got - want).elements()), sorted((want - got).elements())
            explained = explain(
                self.trace.steps,
                page_size=self.page_size,
                num_pages=model.num_pages,
                extra=extra,
                lacking=lacking,
                group_open=model.free_group is not None,
                available_delta=available - model.available_size(),
                shortage=step.expect is None,
                handed_out=step.expect if isinstance(step.expect, list) else (),
                merged=self._staged_before,
            )
            if explained is not None:  # the call's own rule covers exactly these pages
                clause, detail = explained
                raise Divergence(
                    clause,
                    f"{detail}; available_size() is {available}, the spec says "
                    f"{model.available_size()} (the cause; the symptom: "
                    f"[{census_clause(model, free, available)}])",
                )
            check_census(model, free, available)
        if exact and not same_order:
            raise Divergence(*skipped_merge(self.trace.steps, self._staged_before, free) or (
                CALLS[step.call].order_clause,
                f"get_all_free_pages() is {free}, the reference order gives {spec_free}"))
        state = model_state(model)
        if state != self._model_checked:  # the invariants are a function of this state
            try:
                self.check_invariants()
            except AssertionError as err:
                raise OracleError(f"the spec model broke its own invariants: {err}") from err
            self._model_checked = state
        else:
            self._check_held_kinds()
        self._check_held()
        verify = getattr(self.target, "verify_byte_accounting", None)
        if verify is not None:
            problems = verify()
            self.events["cap.byte_accounting"] += step.call != "create"
            if problems:
                raise Divergence("CAP-3", f"verify_byte_accounting() reports {list(problems)}")

