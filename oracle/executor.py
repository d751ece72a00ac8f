"""Run one call on the target and on the spec side by side, and check everything after it.

The :class:`Executor` owns the target allocator, the reference model and the trace. Each valid
call is performed on both; results are compared (``exact``: slot for slot; ``contract``: the
spec accepts the target's choice and adopts it), then ``available_size()``, the free census,
the spec's invariants and every tensor handed out earlier (``ALIAS-1``). A bad call must raise
one of the target's declared error types (``Capabilities.checked``; a ``ContractViolation`` must
name the spec's clause) and leave the target unchanged (``ERR-1``). The first divergence
raises :class:`OracleFailure` carrying a :class:`~kvpool.oracle.report.Failure`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import torch
from kvpool.spec import AllocatorModel, ContractViolation
from kvpool.spec.contract import Divergence, accept_alloc, accept_decode, accept_extend

from .calls import ALLOC_CALLS, CACHE_CALLS, CALLS, MAX_HELD, Call, as_list, clone_model
from .hints import hint_for
from .pagemap import render, spec_line, target_line
from .report import Failure, OracleError, OracleFailure, record_failure
from .targets import Config, Target
from .trace import Trace, TraceStep, result_asserts
from .treecache import TinyTreeCache

# A target that raises one of these on an allocation the spec refuses only broke the None rule.
_ALLOC_RAISE_CLAUSES = tuple(CALLS[c].raise_clause for c in ALLOC_CALLS)


class Executor:
    """The target and the spec, driven call by call (see the module docstring)."""

    def __init__(
        self,
        target: Target,
        config: Config,
        *,
        owners: Callable[[], Mapping[int, str]] | None = None,
    ) -> None:
        """Drive ``target`` in ``config``; ``owners()`` labels owned pages in page maps.

        Raises ValueError for an order other than ``exact`` / ``contract``.
        """
        if config.order not in ("exact", "contract"):
            raise ValueError(f"order must be 'exact' or 'contract', got {config.order!r}")
        self.factory, self.caps = target.factory, target.caps
        self.device, self.order = config.device, config.order
        self.page_size, self.need_sort = config.page_size, config.need_sort
        self.owners = owners or dict
        self.trace = Trace(target.path, config.page_size, config.need_sort, config.device,
                           config.order)
        self.model: AllocatorModel | None = None
        self.target: Any = None
        self.held: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        self.num_calls = 0
        self.failed = False
        self._alias_step: int | None = None  # the step whose held result changed (ALIAS-1)

    def check_invariants(self) -> None:
        """The spec model's invariants hold and only allocation results are held.

        Raises AssertionError otherwise (``_post`` turns it into an :class:`OracleError`).
        """
        if self.model is not None:
            self.model.check_invariants()
        for index, _, _ in self.held:
            assert self.trace.steps[index].call in ALLOC_CALLS, "held a non-allocation result"

    # -- public steps ------------------------------------------------------------------------
    def create(self, size: int) -> None:
        """Build a fresh target and model of ``size`` tokens."""
        step = TraceStep(
            "create", {"size": size, "page_size": self.page_size, "need_sort": self.need_sort}
        )
        self.trace.steps.append(step)
        self.model = AllocatorModel(
            size, self.page_size, paged=self.caps.paged, need_sort=self.need_sort
        )
        try:
            self.target = self.factory(
                size=size, page_size=self.page_size, need_sort=self.need_sort, device=self.device
            )
        except Exception as err:
            raise OracleError(f"the factory failed: {type(err).__name__}: {err}") from err
        self._checked(step, len(self.trace.steps) - 1, "", lambda: self._post(step))

    def call(self, name: str, *, clobber: bool = False, **args: Any) -> Any:
        """Perform a valid call on both sides, compare, check; returns the target's result."""
        step = TraceStep(name, args, clobber=clobber)
        self.trace.steps.append(step)
        before = spec_line(self.model, self.owners()) if self.model else ""

        def run() -> Any:
            result = self._valid(step)
            self._post(step)
            return result

        return self._checked(step, len(self.trace.steps) - 1, before, run)

    def call_bad(self, name: str, **args: Any) -> str:
        """Perform a call the spec rejects; the target must reject it alike. Returns the clause."""
        step = TraceStep(name, args)
        self.trace.steps.append(step)
        assert self.model is not None
        before = spec_line(self.model, self.owners())
        try:
            CALLS[name].spec(self.model, step.args)
        except ContractViolation as err:
            step.raises = err.clause
            message = str(err)
        else:
            raise OracleError(f"generated bad call {name}({args}) is valid under the spec")
        self._checked(step, len(self.trace.steps) - 1, before, lambda: self._bad(step, message))
        return str(step.raises)

    def _checked(self, step: TraceStep, index: int, before: str, run: Callable[[], Any]) -> Any:
        try:
            result = run()
        except Divergence as d:
            self._fail(d.clause, d.detail, index, before)
        self.num_calls += 1
        return result

    # -- comparison ----------------------------------------------------------------------------
    def _valid(self, step: TraceStep) -> Any:
        model = self.model
        assert model is not None
        call = CALLS[step.call]
        if call.group == "cache":
            return self._cache_call(step, call)
        pre = clone_model(model) if call.group == "alloc" else model
        expected = None
        if call.group != "alloc" or self.order == "exact":
            try:
                expected = call.spec(model, step.args)
            except ContractViolation as err:
                raise OracleError(
                    f"step {step.call}({step.args}) is invalid under the spec: {err}"
                ) from err
        try:
            got_obj, inputs = call.target(self.target, step.args, self.device)
        except Exception as err:
            raise Divergence(
                call.raise_clause,
                f"{call.name} raised {type(err).__name__}: {err} on a valid call",
            ) from err
        if step.clobber:
            for x in inputs:
                x.fill_(0)
        if call.group != "alloc":
            return None
        got = as_list(got_obj)
        step.expect = expected if self.order == "exact" else got
        if self.order == "exact":
            if got != expected:
                self._accept(pre, step, got)  # a contract clause when the result is not even valid
                raise Divergence(
                    str(call.result_clause),
                    f"returned {got}, the reference order gives {expected}",
                )
        else:
            self._accept(model, step, got)
        if isinstance(got_obj, torch.Tensor):
            self.held.append((len(self.trace.steps) - 1, got_obj, got_obj.clone()))
            del self.held[:-MAX_HELD]
        return got

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

        ``expect``: the hook's answer (``check_decode_capacity``), else the entries evicted.
        """
        assert self.model is not None
        a = step.args
        model_cache = TinyTreeCache(self.model.free, a["entries"])
        target_cache = TinyTreeCache.for_torch(self.target, a["entries"], self.device)
        expected = call.spec(self.model, {**a, "tree_cache": model_cache})
        got = self._guard(
            call,
            lambda: call.target(self.target, {**a, "tree_cache": target_cache}, self.device)[0],
        )
        step.expect = model_cache.num_evicted if call.result_clause is None else expected
        if call.result_clause is not None and bool(got) != expected:
            raise Divergence(
                call.result_clause,
                f"{call.name}({a['num_tokens']}) returned {got}, the spec says {expected}",
            )
        if target_cache.num_evicted != model_cache.num_evicted:
            raise Divergence(
                "CAP-1",
                f"evicted {target_cache.num_evicted} cache entries for "
                f"{a['num_tokens']} tokens, the spec evicts {model_cache.num_evicted}",
            )
        return model_cache.num_evicted

    def _guard(self, call: Call, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as err:
            raise Divergence(
                call.raise_clause, f"{call.name} raised {type(err).__name__}: {err}"
            ) from err

    def _census(self) -> tuple[list[int], int]:
        free = self.target.get_all_free_pages()
        return (as_list(free) if free is not None else []), int(self.target.available_size())

    def _post(self, step: TraceStep) -> None:
        model = self.model
        assert model is not None
        free, available = self._census()
        step.available_after = model.available_size()
        step.census_after = sorted(model.get_all_free_pages())
        if self.order == "exact":
            step.free_after = model.get_all_free_pages()
        if available != model.available_size():
            raise Divergence(
                "INV-4", f"available_size() is {available}, the spec says {model.available_size()}"
            )
        if Counter(free) != Counter(model.get_all_free_pages()):
            want = Counter(model.get_all_free_pages())
            got = Counter(free)
            raise Divergence(
                "INV-2" if max(got.values(), default=0) > 1 else "INV-1",
                f"free census differs: target also lists "
                f"{sorted((got - want).elements())}, target lacks "
                f"{sorted((want - got).elements())}",
            )
        if self.order == "exact" and free != model.get_all_free_pages():
            raise Divergence(
                CALLS[step.call].order_clause,
                f"get_all_free_pages() is {free}, the "
                f"reference order gives {model.get_all_free_pages()}",
            )
        try:
            self.check_invariants()
        except AssertionError as err:
            raise OracleError(f"the spec model broke its own invariants: {err}") from err
        self._check_held()
        verify = getattr(self.target, "verify_byte_accounting", None)
        if verify is not None:
            problems = verify()
            if problems:
                raise Divergence("CAP-3", f"verify_byte_accounting() reports {list(problems)}")

    def _check_held(self) -> None:
        for index, tensor, clone in self.held:
            if not torch.equal(tensor, clone):
                self._alias_step = index
                raise Divergence(
                    "ALIAS-1",
                    f"the result of step {index} changed from "
                    f"{clone.tolist()} to {tensor.tolist()}",
                )

    def _bad(self, step: TraceStep, message: str) -> None:
        clause = step.raises
        before = self._census()
        step.census_after, step.available_after = sorted(before[0]), before[1]
        accepted = self.caps.error_types
        try:
            CALLS[step.call].target(self.target, step.args, self.device)
        except ContractViolation as err:  # kvpool's own type: the clause must be the spec's
            if err.clause != clause:
                raise Divergence(
                    str(clause), f"raised [{err.clause}] {err.detail}; the spec says {message}"
                ) from err
        except accepted:  # the target's declared error type: any message will do
            pass
        except Exception as err:
            names = " or ".join(t.__name__ for t in accepted)
            raise Divergence(
                str(clause),
                f"raised {type(err).__name__}: {err} instead of {names}; the spec says {message}",
            ) from err
        else:
            raise Divergence(str(clause), f"accepted the call; the spec rejects it: {message}")
        after = self._census()
        if after != before:
            raise Divergence(
                "ERR-1",
                f"the rejected call changed the state: free "
                f"{before[0]} -> {after[0]}, available {before[1]} -> {after[1]}",
            )
        self._check_held()

    # -- failure -------------------------------------------------------------------------------
    def _fail(self, clause: str, detail: str, index: int, before: str) -> None:
        trace = self.trace
        trace.clause, trace.detail, trace.failing_step = clause, detail, index
        step = trace.steps[index]
        asserts: list[str] = []
        if clause == "CAP-3":
            asserts.append("assert not a.verify_byte_accounting()  # CAP-3")
        elif clause == "ALIAS-1":
            k = index if self._alias_step is None else self._alias_step
            asserts.append(f"assert r{k}.tolist() == {self.trace.steps[k].expect!r}  # ALIAS-1")
        elif step.raises is None and step.call in ALLOC_CALLS + CACHE_CALLS:
            if self.order == "exact" or clause in _ALLOC_RAISE_CLAUSES:
                if self.order == "contract":
                    step.expect = None if step.expect is not None else []
                    asserts.append(
                        f"assert (r{index} is None) == {step.expect is None}  # {clause}"
                    )
                else:
                    asserts += result_asserts(step, f"r{index}")
            else:
                asserts.append(
                    f"assert r{index} is None or r{index}.tolist() != {step.expect!r}"
                    f"  # [{clause}] {detail}"
                )
                step.available_after = step.census_after = step.free_after = None
        trace.final_asserts = asserts
        after_spec = spec_line(self.model, self.owners()) if self.model else ""
        try:
            free, _ = self._census()
            after_target: str | None = target_line(self.model.num_pages if self.model else 0, free)
        except Exception:  # the target may be broken beyond reading
            after_target = None
        failure = Failure(
            clause=clause,
            detail=detail,
            trace=trace,
            before=render(f"before step {index}", before),
            after=render(f"after step {index}", after_spec, after_target),
            hint=hint_for(clause, detail, trace, self.caps),
        )
        record_failure(failure)
        self.failed = True
        raise OracleFailure(failure)
