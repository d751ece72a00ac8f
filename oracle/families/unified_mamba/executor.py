"""Run one unified full + Mamba call on the target and on
:class:`kvpool.spec.unified_mamba.UnifiedMambaModel`, then compare.

After every valid call (clauses of SPEC.md section 21):

- the result, exactly (token ids ``UMB-2``, state slots ``UMB-5``, an eager translation and an
  idle flush's page count ``UMB-7``) and its dtype;
- each end's own bookkeeping from the target's snapshot (``unified_state()``, SGLang's through
  :func:`~.peer.mamba_state_of`): holes distinct, inside the span, not live, span = live +
  holes (``UMB-8``); then each end's live virtual pages, span and number of holes against the
  model's (full: ``UMB-2``, state: ``UMB-5``) and the full end's free virtual ids in hand-out
  order (``UMB-2``);
- ``available_size()`` and ``full_available_size()`` (``UMB-3``), the state end's
  ``mamba_allocator.available_size()`` (``UMB-4``), ``size`` = available + live full tokens and
  ``size_full`` / ``size_mamba`` (``UMB-1``), exactly;
- every live token's translation: row for row under eager compaction, under lazy a bijection of
  live pages onto the full end's span keeping in-page offsets; a live page moved only along a
  page copy the target issued (``UMB-7``, :class:`~..unified.placement.MoveLog`);
- ``mamba_slot_full_token_cost()`` and ``full_tokens_before_mamba_recheck(n)`` for n around the
  state end's view (``UMB-6``);
- the model's census and invariants (a broken model is the harness's error) and the target's
  ``verify_byte_accounting()``, which must be empty (``UMB-8``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from kvpool.spec import ContractViolation
from kvpool.spec.contract import Divergence

from ...engine.core import Engine
from ...engine.report import OracleError
from ...engine.trace import TraceStep
from ..single.calls import as_list
from ..unified.executor import live_tokens
from ..unified.holes import hole_problems, own_breach, span_and_holes
from ..unified.placement import MoveLog, pages_of
from .calls import UNIFIED_MAMBA_CALLS, UNIFIED_MAMBA_DTYPES
from .coverage import events_of
from .peer import ENTRY_BYTES, STATE_BYTES, mamba_state_of
from .probes import IMPORT as PROBE_IMPORT
from .probes import census_probe
from .targets import UnifiedMambaCapabilities

ENDS = (("full", "UMB-2"), ("state", "UMB-5"))  # each end and the clause of its span and holes
STATE_CALLS = frozenset({"prepare_mamba_allocation", "alloc_state", "free_state"})


def _model_class() -> Any:
    from kvpool.spec.unified_mamba import UnifiedMambaModel

    return UnifiedMambaModel


def bijection_problems(ids: list[int], rows: list[int], ps: int,
                       span: range) -> list[str]:
    """``UMB-7`` under lazy compaction: each live page's tokens read one physical page at their
    own offsets, no two live pages share one, every page inside the full end's ``span``."""
    out: list[str] = []
    where: dict[int, int] = {}
    owner: dict[int, int] = {}
    for t, r in zip(ids, rows):
        v = t // ps
        if r % ps != t % ps:
            out.append(f"token {t} reads row {r}: in-page offset lost")
        elif where.setdefault(v, r // ps) != r // ps:
            out.append(f"virtual page {v} spans physical pages {where[v]} and {r // ps}")
    for v, p in where.items():
        if p not in span:
            out.append(f"live virtual page {v} on page {p}, outside the full end's span "
                       f"{span.start}..{span.stop - 1}")
        if owner.setdefault(p, v) != v:
            out.append(f"virtual pages {owner[p]} and {v} share physical page {p}")
    return out


class UnifiedMambaExecutor(Engine):
    """A unified full + Mamba target and the spec, call by call (module docstring)."""

    family = "unified_mamba"
    calls = UNIFIED_MAMBA_CALLS
    caps: UnifiedMambaCapabilities

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._assert_line: str | None = None  # the repro's assertion of the differing field
        self._moves: dict[str, MoveLog | None] = {}  # each end's page copies
        self._where: dict[str, dict[int, int]] = {}  # each end's live pages, as of the last call

    def create(self, total_bytes: int, lazy: bool) -> None:
        """A fresh target and model over a ``total_bytes`` buffer (both ends), eager or lazy.
        Raises OracleError when the factory fails or the spec rejects the buffer."""
        ps = self.page_size
        try:
            model = _model_class()(total_bytes, ps, ENTRY_BYTES, STATE_BYTES, lazy=lazy)
        except ContractViolation as err:
            raise OracleError(f"create({total_bytes}) is invalid under the spec: {err}") from err
        step = self._begin({"total_bytes": total_bytes, "page_size": ps, "lazy": lazy}, model,
                           total_bytes=total_bytes, page_size=ps, lazy=lazy, device=self.device)
        kv = self.target.get_kvcache()
        self._moves = {end: MoveLog(pool) if hasattr(pool, "move_physical_pages") else None
                       for end, pool in (("full", getattr(kv, "full_kv_pool", None)),
                                         ("state", getattr(kv, "mamba_pool", None)))}
        self._where = {}
        self._checked(0, lambda: "", lambda: self._created(step, total_bytes, lazy))
        self.events["create"] += 1

    def _created(self, step: TraceStep, total_bytes: int, lazy: bool) -> None:
        """The census probes on fresh instances (:mod:`.probes`), then the fresh pair."""
        unplanted: list[str] = []
        missed = census_probe(lambda: self._build_target(
            total_bytes=total_bytes, page_size=self.page_size, lazy=lazy, device=self.device),
            self.caps, self.page_size, unplanted)
        self.events["probe.census"] += 1
        self.events["probe.unplanted"] += len(unplanted)
        if missed is not None:
            fault, lines, seen = missed
            self._fail_field("UMB-8", f"verify_byte_accounting() returned {seen} with the fault "
                                      f"{fault} planted: {'; '.join(lines)}",
                             "\n".join([PROBE_IMPORT, *lines,
                                        "assert a.verify_byte_accounting()  # [UMB-8]"]))
        self._post(step)

    def create_from(self, args: Mapping[str, Any]) -> None:
        self.create(args["total_bytes"], args["lazy"])

    def note(self, event: str) -> None:
        """Count a coverage event the scheduler model recognises."""
        self.events[event] += 1

    # -- engine hooks ----------------------------------------------------------------------------
    def _valid(self, step: TraceStep) -> Any:
        model = self.model
        assert model is not None
        call = self.calls[step.call]
        extra = ({"state": mamba_state_of(self.target)} if step.call == "flush_opportunistic"
                 else {})
        try:
            want = call.spec(model, {**step.args, **extra})
        except (ContractViolation, NotImplementedError) as err:
            raise OracleError(f"step {step.call}({step.args}) is invalid under the spec: "
                              f"{err}") from err
        step.expect = want
        got_obj, _ = self._guard(step, call, lambda: call.target(self.target, step.args,
                                                                 self.device))
        self._check_dtype(step, got_obj, UNIFIED_MAMBA_DTYPES)
        got = as_list(got_obj) if isinstance(got_obj, torch.Tensor) else got_obj
        if step.call.startswith("translate") and model.lazy:
            return want  # placement is free under lazy compaction (judged in _post)
        if call.result_clause is not None and got != want:
            breach = own_breach(mamba_state_of(self.target))
            if breach is not None:  # a broken bookkeeping is the cause
                raise Divergence("UMB-8", f"after {step.call}: {breach[0]}")
            raise Divergence(call.result_clause,
                             f"{step.call} returned {got!r}, the spec says {want!r}")
        return want

    def _fail_field(self, clause: str, detail: str, line: str | None = None) -> None:
        self._assert_line = line
        raise Divergence(clause, detail)

    def _post(self, step: TraceStep) -> None:
        model = self.model
        assert model is not None
        x, name = self.target, step.call
        state = mamba_state_of(x)
        step.available_after = model.available_size()
        for end, side in state.sides.items():
            for problem in hole_problems(side)[:1]:
                self._fail_field("UMB-8", f"after {name}: {problem}",
                                 f"assert not hole_problems(mamba_state_of(a).sides[{end!r}])"
                                 "  # [UMB-8]")
        self._check_ends(name, state)
        self._check_views(name)
        self._check_rows(name, state)
        self._check_arithmetic(name)
        try:
            model.check_invariants()
            problems = list(model.census())
        except AssertionError as err:
            raise OracleError(f"the spec's invariants broke: {err}") from err
        if problems:
            raise OracleError(f"the spec's census reports {problems[:3]}")
        found = list(x.verify_byte_accounting())
        self.events["census"] += 1
        if found:
            self._fail_field("UMB-8", f"after {name}: verify_byte_accounting() reports "
                                      f"{found[:3]} on a state the spec holds healthy",
                             "assert a.verify_byte_accounting() == []  # [UMB-8]")

    def _check_ends(self, name: str, state: Any) -> None:
        """Each end's live virtual pages, span and holes, and full's free ids (in order)."""
        model = self.model
        for end, clause in ENDS:
            pool, side = getattr(model, end), state.sides[end]
            got, want = sorted(side.bindings), sorted(pool.v2p)
            if got != want:
                self._fail_field(clause, f"after {name}: the {end} end binds virtual pages "
                                         f"{got}, the spec's live ones are {want}",
                                 f"assert sorted(mamba_state_of(a).sides[{end!r}].bindings) "
                                 f"== {want!r}  # [{clause}]")
            have, spec = span_and_holes(side), (pool.span_pages(), len(pool.holes))
            if have != spec:
                self._fail_field(clause, f"after {name}: the {end} end's span is {have[0]} "
                                         f"pages with {have[1]} holes, the spec says {spec[0]} "
                                         f"with {spec[1]}",
                                 f"assert span_and_holes(mamba_state_of(a).sides[{end!r}]) "
                                 f"== {spec!r}  # [{clause}]")
        free = list(state.free_virtual)
        if free != list(model.free_virtual):
            self._fail_field("UMB-2", f"after {name}: the full end's free virtual ids are "
                                      f"{free}, the spec's {list(model.free_virtual)}",
                             f"assert list(mamba_state_of(a).free_virtual) == "
                             f"{list(model.free_virtual)!r}  # [UMB-2]")

    def _check_views(self, name: str) -> None:
        """``UMB-3`` / ``UMB-4`` / ``UMB-1``: the capacity views and sizes, exactly."""
        model, x = self.model, self.target
        live = len(model.full.v2p) * self.page_size
        views = (("available_size()", "UMB-3", x.available_size(), model.available_size()),
                 ("full_available_size()", "UMB-3", x.full_available_size(),
                  model.full_available_size()),
                 ("mamba_allocator.available_size()", "UMB-4",
                  x.mamba_allocator.available_size(), model.state_available_size()),
                 ("size", "UMB-1", x.size, model.available_size() + live))
        for source, clause, got, want in views:
            if int(got) != int(want):
                self._fail_field(clause, f"after {name}: {source} is {int(got)}, the spec "
                                         f"says {int(want)}",
                                 f"assert a.{source} == {int(want)}  # [{clause}]")
        for attr in ("size_full", "size_mamba"):
            want = getattr(model, attr, None)
            if want is not None and int(getattr(x, attr)) != int(want):
                self._fail_field("UMB-1", f"after {name}: {attr} is {int(getattr(x, attr))}, "
                                          f"the spec says {int(want)}",
                                 f"assert a.{attr} == {int(want)}  # [UMB-1]")

    def _check_rows(self, name: str, state: Any) -> None:
        """``UMB-7``: every live token's row (exact under eager; a bijection onto the full
        end's span under lazy), and live pages moved only along the target's page copies."""
        model, ps = self.model, self.page_size
        ids = live_tokens(model)
        rows = (self.target.translate_kv_indices_for_transfer(
            torch.tensor(ids, dtype=torch.int64)).tolist() if ids else [])
        if not model.lazy:
            want = model.translate(ids)
            if rows != want:
                self._fail_field("UMB-7", f"after {name}: the live tokens' rows are {rows}, "
                                          f"the spec says {want}",
                                 f"assert a.translate_kv_indices_for_transfer(t({ids!r}))"
                                 f".tolist() == {want!r}  # [UMB-7]")
        else:
            side = state.sides["full"]
            span = range(side.span_low, side.span_high)
            bad = bijection_problems(ids, rows, ps, span)
            if bad:
                self._fail_field("UMB-7", f"after {name}: {bad[0]}",
                                 f"assert bijection_problems({ids!r}, a.translate_kv_indices_"
                                 f"for_transfer(t({ids!r})).tolist(), {ps}, {span!r}) == []"
                                 "  # [UMB-7]")
        if ids:
            x = torch.tensor(ids, dtype=torch.int64)
            for source in ("translate_kv_loc", "translate_write_loc"):
                other = getattr(self.target, source)(x).tolist()
                if other != rows:
                    self._fail_field("UMB-7", f"after {name}: {source} reads {other}, the "
                                              f"transfer translation {rows}",
                                     f"assert a.{source}(t({ids!r})).tolist() == "
                                     f"a.translate_kv_indices_for_transfer(t({ids!r})).tolist()"
                                     "  # [UMB-7]")
        self.events["placement"] += bool(ids)
        self._check_moves(name, {"full": pages_of(rows, ids, ps),
                                 "state": dict(state.sides["state"].bindings)})

    def _check_moves(self, name: str, now: dict[str, dict[int, int]]) -> None:
        """``UMB-7``: on each end, a live page moved only along the page copies the target
        issued since the last call (the state end's live slots read from its snapshot)."""
        moved = False
        for end, pages in now.items():
            before, log = self._where.get(end, {}), self._moves.get(end)
            if log is not None:
                wrong = log.unexplained(before, pages)
                if wrong:
                    self._fail_field("UMB-7", f"after {name}: {end} end: {wrong[0]}")
            moved = moved or any(before.get(v, p) != p for v, p in pages.items())
        self.events["compaction.move"] += moved
        self._where = now

    def _check_arithmetic(self, name: str) -> None:
        """``UMB-6``: the slot's token cost and the recheck distance around the state view."""
        model, x = self.model, self.target
        cost, want = int(x.mamba_slot_full_token_cost()), int(model.mamba_slot_full_token_cost())
        if cost != want:
            self._fail_field("UMB-6", f"after {name}: mamba_slot_full_token_cost() is {cost}, "
                                      f"the spec says {want}",
                             f"assert a.mamba_slot_full_token_cost() == {want}  # [UMB-6]")
        base, nonzero = int(model.state_available_size()), False
        for n in sorted({0, 1, base, base + 1, base + 3}):
            got, spec = (int(x.full_tokens_before_mamba_recheck(n)),
                         int(model.full_tokens_before_mamba_recheck(n)))
            if got != spec:
                self._fail_field("UMB-6", f"after {name}: full_tokens_before_mamba_recheck({n}) "
                                          f"is {got}, the spec says {spec}",
                                 f"assert a.full_tokens_before_mamba_recheck({n}) == {spec}"
                                 "  # [UMB-6]")
            nonzero = nonzero or spec > 0
        self.events["arithmetic"] += 1
        self.events["arithmetic.missing"] += nonzero

    def _cause(self, step: TraceStep, clause: str, detail: str) -> tuple[str, str]:
        """A divergence seen right after a valid ``clear()`` breaks ``UMB-1`` (both ends empty,
        free ids in hand-out order); one seen after a state-end call on the full end's pages
        or views breaks ``UMB-5`` (such a call changes them only by running an open group's
        deferred frees or by relief). The symptom's clause stays in the detail."""
        if step.call == "clear" and step.raised is None:
            return "UMB-1", f"[{clause}] {detail}"
        if step.call in STATE_CALLS and step.raised is None and clause in ("UMB-2", "UMB-3"):
            return "UMB-5", f"[{clause}] {detail}"
        return clause, detail

    def _census(self) -> tuple[Any, ...]:
        model, x = self.model, self.target
        assert model is not None
        ids = live_tokens(model)
        rows = (x.translate_kv_indices_for_transfer(torch.tensor(ids, dtype=torch.int64))
                .tolist() if ids else [])
        state = mamba_state_of(x)
        return (int(x.available_size()), int(x.mamba_allocator.available_size()), rows,
                tuple(state.free_virtual), sorted(state.sides["state"].bindings))

    def _record_rejected_state(self, step: TraceStep, census: Any) -> None:
        step.available_after = census[0]

    def _final_asserts(self, index: int) -> list[str]:
        step = self.trace.steps[index]
        if self._assert_line is not None:
            return self._assert_line.split("\n")
        call = self.calls[step.call]
        if step.raises is None and call.checks is not None and step.raised is None:
            return call.checks(step.args, step.expect, f"r{index}")
        return []

    def _events_of(self, step: TraceStep, state: Any, result: Any) -> list[str]:
        m = self.model
        assert m is not None
        return events_of(step, result, bool(m.full.holes or m.state.holes))
