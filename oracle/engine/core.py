"""The part of call execution that every allocator family shares.

An :class:`Engine` owns a target allocator, its family's spec model and the trace. A family's
executor (:class:`~kvpool.oracle.families.single.executor.Executor` for single pools,
:class:`~kvpool.oracle.families.hybrid.executor.HybridExecutor` for the sliding-window allocator)
subclasses it and supplies the comparison: ``_valid`` (perform a valid call on both sides and
compare results), ``_post`` (the census after it), ``_census`` (what the target shows, compared
around a rejected call), ``_maps`` (the failure's before/after pictures) and
``_snapshot`` / ``_events_of`` (coverage). Written once here:

- the trace (one :class:`~kvpool.oracle.engine.trace.TraceStep` per call) and the failure
  (:class:`~kvpool.oracle.engine.report.Failure`: clause, trace, repro asserts, hint);
- a bad call: the spec must reject it (its clause), the target must raise a declared error type
  (a ``ContractViolation`` naming the same clause) and leave its census unchanged (``ERR-1``);
- a valid call that raises: the call's ``raise_clause`` (or the declared shortage form);
- ownership probes: the caller overwrites a free's input tensors (``ALIAS-2``), writes into every
  other allocation's result (``ALIAS-3``), and results it keeps must not change (``ALIAS-1``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from kvpool.spec import ContractViolation
from kvpool.spec.contract import Divergence

from ..reporting.hints import hint_for
from ..reporting.pagemap import render
from . import callforms, dataplane
from .call import MAX_HELD, Call
from .report import Failure, OracleError, OracleFailure, record_failure
from .repro import error_type_names
from .target import Config, Target
from .trace import Trace, TraceStep


class Engine:
    """Execution, probes and failures of one family (see the module docstring).

    ``failed`` turns True with the first divergence (the machine then skips its teardown
    release); ``num_calls`` counts the steps performed, ``events`` the coverage events reached.
    """

    family = ""  # the family's name, as a trace records it
    data_plane_default = False  # a family whose runs check KV bytes by default (dataplane)
    calls: Mapping[str, Call] = {}  # the family's call table

    def __init__(self, target: Target, config: Config) -> None:
        self.factory, self.caps = target.factory, target.caps.at(config.page_size)
        self.device, self.order = config.device, config.order
        self.page_size, self.need_sort = config.page_size, config.need_sort
        self.trace = Trace(
            target.path,
            config.page_size,
            config.need_sort,
            config.device,
            config.order,
            error_types=error_type_names(target.caps.error_types),
            shortage_types=error_type_names(target.caps.shortage_raises),
            family=self.family,
        )
        self.model: Any = None
        self.target: Any = None
        self.held: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        self.num_calls = 0
        self.failed = False
        self.events: Counter[str] = Counter()  # coverage events reached
        self._alias_step: int | None = None  # the step whose held result changed (ALIAS-1)
        self._dtype_assert: str | None = None  # a result's dtype the repro asserts
        self.data_plane = self.trace.data_plane = self.data_plane_default or dataplane.requested()
        self.plane: dataplane.DataPlane | None = None  # built for each target (dataplane)

    def _begin(self, args: dict[str, Any], model: Any, **factory_args: Any) -> TraceStep:
        """Start a run's target: record a ``create`` step of ``args``, take ``model`` as the spec
        side and build the target with ``factory(**factory_args)``; returns the step (the caller
        compares the fresh pair). Raises OracleError when the factory fails."""
        step = TraceStep("create", args)
        self.trace.steps.append(step)
        self.model = model
        self.target = self._build_target(**factory_args)
        return step

    def _build_target(self, **factory_args: Any) -> Any:
        """``factory(**factory_args)``. Raises OracleError, naming the factory's error, when it
        fails."""
        try:
            return self.factory(**factory_args)
        except Exception as err:
            raise OracleError(f"the factory failed: {type(err).__name__}: {err}") from err

    # -- family hooks ----------------------------------------------------------------------------
    def create_from(self, args: Mapping[str, Any]) -> None:
        """Build a fresh target and model from a ``create`` step's arguments."""
        raise NotImplementedError

    def _valid(self, step: TraceStep) -> Any:
        """Perform the valid ``step`` on both sides and compare; returns the caller's result."""
        raise NotImplementedError

    def _post(self, step: TraceStep) -> None:
        """Compare everything the target shows after ``step`` with the spec."""
        raise NotImplementedError

    def _census(self) -> Any:
        """What the target shows (compared around a rejected call and an ownership probe)."""
        raise NotImplementedError

    def _snapshot(self) -> Any:
        """The spec's state before a call, for coverage and the failure's page map."""
        return None

    def _events_of(self, step: TraceStep, state: Any, result: Any) -> Iterable[str]:
        """The coverage events one performed call reached."""
        return ()

    def _before_line(self, state: Any) -> Callable[[], str]:
        """The picture before the call just appended, drawn only if it fails."""
        return lambda: ""

    def _maps(self, index: int, before: Callable[[], str]) -> tuple[str, str]:
        """The failure's pictures before and after step ``index``."""
        return render(f"before step {index}", before()), render(f"after step {index}", "")

    def _final_asserts(self, index: int) -> list[str]:
        """The repro's asserts after the failing step ``index``."""
        return []

    def _failing_setup(self, index: int) -> list[str]:
        """The repro's lines just before the failing step ``index``'s call (what its final
        asserts need to have watched it, e.g. the page copies it issues)."""
        return []

    def _record_rejected_state(self, step: TraceStep, census: Any) -> None:
        """Store on a rejected ``step`` the state it must leave (for the repro)."""

    def _prepare(self, name: str, args: dict[str, Any]) -> None:
        """Complete a valid call's arguments before it is recorded (e.g. keywords it carries)."""

    def _data_sides(self) -> list[dataplane.CheckedBuffer]:
        """The KV sides the data plane checks for the current target (none by default)."""
        return []

    def _cause(self, step: TraceStep, clause: str, detail: str) -> tuple[str, str]:
        """The clause to report for a divergence seen at ``step``: a family names the rule of
        an earlier call that explains the symptom (the symptom's clause stays in the detail)."""
        return clause, detail

    def _hint(self, clause: str, detail: str) -> str | None:
        """The hint line of a failure: the declaration under which it would not be one."""
        return hint_for(clause, detail, self.trace, self.caps)

    # -- public steps ----------------------------------------------------------------------------
    def call(self, name: str, *, clobber: bool = False, **args: Any) -> Any:
        """Perform a valid call on both sides, compare, check; returns the caller's result (a
        list is the caller's own copy, not the trace's record)."""
        self._prepare(name, args)
        step = TraceStep(name, args, clobber=clobber)
        self.trace.steps.append(step)
        assert self.model is not None
        state = self._snapshot()
        before = self._before_line(state)

        def run() -> Any:
            result = self._valid(step)
            self._post(step)
            if self.data_plane:
                dataplane.after_call(self, len(self.trace.steps) - 1, name, result)
            return result

        result = self._checked(len(self.trace.steps) - 1, before, run)
        self.events.update(self._events_of(step, state, result))
        # a copy: the caller grows its requests' slot lists, the trace keeps what was expected
        return list(result) if isinstance(result, list) else result

    def call_bad(self, name: str, **args: Any) -> str:
        """Perform a call the spec rejects; the target must reject it alike. Returns the clause."""
        step = TraceStep(name, args)
        self.trace.steps.append(step)
        assert self.model is not None
        before = self._before_line(self._snapshot())
        try:
            self.calls[name].spec(self.model, step.args)
        except ContractViolation as err:
            step.raises = err.clause
            message = str(err)
        else:
            raise OracleError(f"generated bad call {name}({args}) is valid under the spec")
        self._checked(len(self.trace.steps) - 1, before, lambda: self._bad(step, message))
        # the clause checked (kvpool.oracle.reporting.clauses)
        self.events[f"rejected:{step.raises}"] += 1
        return str(step.raises)

    def _checked(self, index: int, before: Callable[[], str], run: Callable[[], Any]) -> Any:
        try:
            result = run()
        except Divergence as d:
            clause, detail = self._cause(self.trace.steps[index], d.clause, d.detail)
            self._fail(clause, detail, index, before)
        self.num_calls += 1
        return result

    # -- shared checks ---------------------------------------------------------------------------
    def _spec_then_target(self, step: TraceStep) -> tuple[Call, Any, Any]:
        """Perform the valid ``step`` on the model (its answer becomes ``step.expect``; the
        model's invariants must hold after it), then on the target (:meth:`_guard`). Returns
        ``(call, spec's answer, target's answer)``.

        Raises:
            OracleError: the model refuses the step (the machine sent an invalid call).
        """
        model = self.model
        assert model is not None
        call = self.calls[step.call]
        try:
            want = call.spec(model, step.args)
        except ContractViolation as err:
            raise OracleError(f"step {step.call}({step.args}) is invalid: {err}") from err
        step.expect = want
        model.check_invariants()
        got = self._guard(step, call, lambda: call.target(self.target, step.args, self.device))
        return call, want, got

    @staticmethod
    def _judge_ids(step: TraceStep, got: Any, want: list[int] | None, clause: str,
                   refused_clause: str | None = None) -> None:
        """An allocation's ids against the spec's: None exactly when the spec refuses (a
        refusal the spec grants breaks ``refused_clause``, default ``clause``), else an int64
        tensor of exactly ``want``.

        Raises:
            Divergence: under ``clause`` (or ``refused_clause``) when they differ.
        """
        if (got is None) != (want is None):
            raise Divergence(refused_clause if want is None and refused_clause else clause,
                             f"{step.call} returned {got!r}, the spec says {want!r}")
        if got is None:
            return
        if not isinstance(got, torch.Tensor) or got.dtype != torch.int64:
            raise Divergence(clause, f"{step.call} returned {got!r}, not an int64 tensor")
        ids = [int(v) for v in got.reshape(-1).tolist()]
        if ids != want:
            raise Divergence(clause, f"{step.call} returned {ids}, the spec says {want}")

    def _guard(
        self,
        step: TraceStep,
        call: Call,
        fn: Callable[[], Any],
        shortage: Callable[[], bool] | None = None,
    ) -> Any:
        """``fn()``; a raise on this valid call is recorded on ``step`` and breaks the call's
        ``raise_clause``, except an allocation's raise of a declared ``shortage_raises`` type
        where the spec's answer is None (``shortage()``): that is the None (no result, no
        inputs), and the checks after the call still require the spec's state."""
        try:
            return fn()
        except Exception as err:
            if shortage is not None and isinstance(err, self.caps.shortage_raises) and shortage():
                step.short_raised = error_type_names((type(err),))[0]
                return None, []
            step.raised = f"{type(err).__name__}: {err}"
            raise Divergence(
                call.raise_clause, f"{call.name} raised {step.raised} on a valid call"
            ) from err

    def _clobber(self, step: TraceStep, inputs: list[torch.Tensor], group_open: bool) -> None:
        """The caller overwrites the tensors it passed to ``step`` (``step.clobber``): outside a
        group the census must not change (``ALIAS-2``); inside one, what the group releases later
        must not change either (``GROUP-3``, seen at its end)."""
        seen = self._census() if self.caps.ownership and inputs else None
        if seen is not None and not group_open:
            self.events["alias.inputs"] += 1  # an ALIAS-2 case (GROUP-3 inside a group)
        for x in inputs:
            x.fill_(0)
        if seen is not None and self._census() != seen:
            raise Divergence(
                "ALIAS-2",
                f"writing into the tensor(s) passed to {step.call} changed the allocator: "
                f"{_change(seen, self._census())}",
            )

    def _probes(self, step: TraceStep) -> bool:
        """Whether the caller writes into this call's result and census (every other step)."""
        step.probe = self.caps.ownership and len(self.trace.steps) % 2 == 1
        return step.probe

    def _own_result(self, step: TraceStep, got_obj: torch.Tensor, got: list[int]) -> None:
        """An allocation's result tensor: on a probed step the caller writes garbage into it and
        the census must not change (``ALIAS-3``); else it is kept and must not change later
        (``ALIAS-1``, checked after every call)."""
        if self._probes(step):
            seen = self._census()
            got_obj.fill_(-1)
            if self._census() != seen:
                raise Divergence(
                    "ALIAS-3",
                    f"writing into the result of {step.call} changed the allocator: "
                    f"{_change(seen, self._census())}",
                )
        else:
            self.events["alias.held"] += bool(got)
            self.held.append((len(self.trace.steps) - 1, got_obj, got_obj.clone()))
            del self.held[:-MAX_HELD]

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
        self._record_rejected_state(step, before)
        accepted = self.caps.error_types_for(step.call)
        try:
            self.calls[step.call].target(self.target, step.args, self.device)
        except ContractViolation as err:  # kvpool's own type: the clause must be the spec's
            if err.clause != clause:
                raise Divergence(
                    str(clause), f"raised [{err.clause}] {err.detail}; the spec says {message}"
                ) from err
        except accepted:  # the target's declared error type: any message will do
            pass
        except Exception as err:
            step.raised = f"{type(err).__name__}: {err}"
            names = " or ".join(t.__name__ for t in accepted) or "a rejection (unchecked)"
            raise Divergence(
                str(clause),
                f"raised {type(err).__name__}: {err} instead of {names}; the spec says {message}",
            ) from err
        else:
            raise Divergence(str(clause), f"accepted the call; the spec rejects it: {message}")
        after = self._census()
        if after != before:
            change = _change(before, after, available=True)
            raise Divergence("ERR-1", f"the rejected call changed the state: {change}")
        self._check_held()
        if self.data_plane:
            dataplane.after_call(self, len(self.trace.steps) - 1, step.call, None)

    def _check_dtype(
        self, step: TraceStep, result: Any, dtypes: Mapping[str, tuple[str, str]]
    ) -> None:
        """Raise the clause of ``step``'s call when its tensor ``result`` has another dtype than
        SGLang's (``dtypes``: the family's table, :func:`~.callforms.result_dtype`); the repro
        then asserts the dtype."""
        wrong = callforms.result_dtype_error(step.call, step.args, result, dtypes)
        rule = callforms.result_dtype(step.call, step.args, dtypes)
        if wrong is not None and rule is not None:
            var = f"r{next(i for i, s in enumerate(self.trace.steps) if s is step)}"
            self._dtype_assert = f"assert {var}.dtype == {rule[1]}  # [{rule[0]}] SGLang's dtype"
            raise Divergence(*wrong)

    # -- failure ---------------------------------------------------------------------------------
    def _fail(self, clause: str, detail: str, index: int, before: Callable[[], str]) -> None:
        trace = self.trace
        trace.clause, trace.detail, trace.failing_step = clause, detail, index
        trace.final_asserts = self._final_asserts(index)
        if self._dtype_assert is not None:  # the result's values may be right: assert its dtype
            trace.final_asserts = [self._dtype_assert]
        if clause.startswith("DATA-"):  # the bytes are the harness's: the repro replays them
            trace.final_asserts = dataplane.repro_asserts(trace)
        own = self._dtype_assert is None and not clause.startswith("DATA-")
        trace.failing_setup = self._failing_setup(index) if own else []
        assert self.model is not None  # set by create, before any step can fail
        before_map, after_map = self._maps(index, before)
        failure = Failure(
            clause=clause,
            detail=detail,
            trace=trace,
            before=before_map,
            after=after_map,
            hint=self._hint(clause, detail),
        )
        record_failure(failure)
        self.failed = True
        raise OracleFailure(failure)


def _change(before: Any, after: Any, *, available: bool = False) -> str:
    """What differs between two censuses. A single pool's ``(free, available)`` pair: its free
    pages (and, with ``available``, its available size); a family's tuple: each changed part."""
    if isinstance(before, tuple) and len(before) == 2:
        size = f", available {before[1]} -> {after[1]}" if available else ""
        return f"free {before[0]} -> {after[0]}{size}"
    diffs = [f"{b!r} -> {a!r}" for b, a in zip(before, after) if a != b]
    return "; ".join(diffs)
