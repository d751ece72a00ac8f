"""Run one unified call on the target and on :class:`kvpool.spec.unified.UnifiedSWAModel`.

The unified family's part of the engine (:class:`~kvpool.oracle.engine.Engine`: trace, bad
calls and ``ERR-1``, failures). After every valid call:

- the result (virtual token ids are fixed by the contract: ``UNI-8``, ``UNI-10``) and its
  dtype (int64, as SGLang's, whatever form the slot tensors were passed in: ``slot_forms``);
- the capacity views ``available_size()`` (``UNI-7``) and ``full_/swa_available_size()``
  (``UNI-9``), exactly, in both compaction modes;
- both translations of every live token (``translate_kv_indices_for_transfer``,
  ``translate_loc_from_full_to_swa``): by what must hold in both modes (:mod:`.placement`), and
  row for row under eager compaction, where placement is fixed: a row off the spec's page breaks
  ``UNI-6`` when a page copy of that call (the model's or the target's) touched its page, else
  ``UNI-4`` (the binding itself);
- each sub-pool's holes and span, read from the target's introspection snapshot
  (:class:`~kvpool.spec.unified_state.UnifiedState`, :func:`~.peer_state.state_of`): its own
  bookkeeping (holes distinct, inside the span, not live; span = live + holes) before the
  capacity views (and before a differing result is reported: a broken bookkeeping is its
  cause), and after them its span and number of holes against the model's (``UNI-5``,
  :mod:`.holes`);
- a live page moved only along a page copy the allocator issued (``UNI-6``, :class:`MoveLog`);
- after a free (and ``free_group_end``, once the group's deferred frees ran), each side binds
  exactly the model's live pages (``UNI-10``, :func:`~.holes.group_end_breach`); a tri-pool
  prealloc whose pages fit on its float chain (its SWA float's holes credited) is granted
  (``UNI-14``); a tri-pool's eviction hook and decode gate, led by the target, by their bounds
  (``UNI-14``, ``UNI-15``; :mod:`.tri_hook`);
- on a tri-pool (``float_chain``) its five capacity views, exactly, from its float chain's
  frontiers, and its live pages against the model's; an ``alloc`` within the
  ``available_size()`` it reported must succeed (``UNI-14``, :mod:`.float_views`);
- the spec's own census and the target's ``verify_byte_accounting()`` (``UNI-13``), and at
  every ``create`` the census probes (:mod:`.probes`; one the target cannot plant is counted
  as ``probe.unplanted``);
- with the data plane (on by default): every live token's K/V bytes, written through
  ``translate_write_loc`` (full) and the SWA translation when handed out, read back through
  the read translations (``DATA-1``; :mod:`.store`), after reading as zeros (``DATA-4``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from kvpool.spec import ContractViolation
from kvpool.spec.contract import Divergence
from kvpool.spec.unified import UnifiedSWAModel
from kvpool.spec.unified_float import fits_on_chain

from ...engine.callforms import choose_form
from ...engine.core import Engine
from ...engine.report import OracleError
from ...engine.trace import TraceStep
from ..single.calls import as_list
from .bound import Bounded, model_of
from .calls import UNIFIED_CALLS, UNIFIED_DTYPES, ZeroCache
from .coverage import events_of
from .fits import fitting, hint
from .float_views import chain_of, float_available, promised_alloc, view_clause, view_problems
from .holes import group_end_breach, model_breach, own_breach
from .peer_state import state_of
from .placement import MoveLog, move_repro, pages_of, placement_assert, placement_problems
from .probes import IMPORT as PLANT_IMPORT
from .probes import census_probe
from .targets import UnifiedCapabilities
from .tri_hook import judge_hook

FIELDS = ("available_size()", "full_available_size()", "swa_available_size()",
          "full rows of the live tokens", "SWA rows of the live tokens")
CLAUSES = ("UNI-7", "UNI-9", "UNI-9", "UNI-4", "UNI-4")  # rows: UNI-6 where a move touched
_SOURCES = ("a.available_size()", "a.full_available_size()", "a.swa_available_size()",
            "a.translate_kv_indices_for_transfer(t({ids!r})).tolist()",
            "a.translate_loc_from_full_to_swa(t({ids!r})).tolist()")


# the calls that release pages (a group's frees wait: the bindings agree until its end)
FREES = frozenset({"free", "free_full", "free_swa", "free_segment", "free_full_segment",
                   "free_swa_segment", "free_group_end"})


def live_tokens(model: UnifiedSWAModel) -> list[int]:
    """Every token id of every live virtual page, ascending."""
    ps = model.page_size
    return [v * ps + k for v in sorted(model.full.v2p) for k in range(ps)]


def spec_census(model: UnifiedSWAModel) -> tuple[Any, ...]:
    """What the contract fixes after a call: the three capacity views and both sides' rows."""
    ids = live_tokens(model)
    return (model.available_size(), model.full_available_size(), model.swa_available_size(),
            model.translate(ids), model.translate(ids, "swa"))


def census(target: Any, ids: list[int]) -> tuple[Any, ...]:
    """The target's side of :func:`spec_census`, its translations read for ``ids``."""
    x = torch.tensor(ids, dtype=torch.int64)
    rows = ((target.translate_kv_indices_for_transfer(x).tolist(),
             target.translate_loc_from_full_to_swa(x).tolist()) if ids else ([], []))
    return (target.available_size(), target.full_available_size(),
            target.swa_available_size(), *rows)


class UnifiedExecutor(Engine):
    """A unified full + SWA target and the spec, call by call (see the module docstring)."""

    family = "unified"
    calls = UNIFIED_CALLS
    data_plane_default = True
    model: UnifiedSWAModel | None
    caps: UnifiedCapabilities

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._field: int | None = None  # the census field that differed (the repro asserts it)
        self._placement_line: str | None = None  # the repro's placement assert, where it broke
        self._probe_lines: list[str] = []  # a census probe's sequence (UNI-13 at create)
        self._moves: list[MoveLog] = []
        self._where: tuple[dict[int, int], dict[int, int]] = ({}, {})
        self._hole_lines: list[str] = []  # a UNI-5 breach's repro assertion
        self._model_moves = (0, 0)  # the model's moves per side, as of the last call
        self._move_repro: tuple[list[str], list[str]] | None = None  # a UNI-6 stray page's

    # -- construction ----------------------------------------------------------------------------
    def create(self, total_bytes: int, lazy: bool) -> None:
        """A fresh target and model over a ``total_bytes`` buffer, lazy or eager compaction."""
        ps = self.page_size
        step = TraceStep("create", {"total_bytes": total_bytes, "page_size": ps, "lazy": lazy})
        self.trace.steps.append(step)
        self.trace.shape = "tri" if self.caps.float_chain else "full-swa"  # its correct allocator
        full_bytes, swa_bytes = self.caps.entry_bytes
        cap = self.caps.static_cap_pages * ps
        self.target = self._build(total_bytes, lazy)
        state = state_of(self.target)  # OracleError: the target offers no snapshot
        try:
            self.model = (UnifiedSWAModel(total_bytes, ps, full_bytes, swa_bytes, lazy=lazy,
                                          full_max_tokens=cap, swa_max_tokens=cap)
                          if self.caps.capacity_exact else model_of(state, ps, lazy, cap))
        except ContractViolation as err:
            raise OracleError(f"create({total_bytes}) is invalid under the spec: {err}") from err
        kv = self.target.get_kvcache()
        self._moves = [MoveLog(kv.full_kv_pool), MoveLog(kv.swa_kv_pool)]
        self._where = ({}, {})
        self._model_moves = (0, 0)
        self._checked(0, lambda: "", lambda: self._created(step, total_bytes))

    def create_from(self, args: Mapping[str, Any]) -> None:
        self.create(args["total_bytes"], args["lazy"])

    def _build(self, total_bytes: int, lazy: bool) -> Any:
        try:
            return self.factory(total_bytes=total_bytes, page_size=self.page_size, lazy=lazy,
                                device=self.device)
        except Exception as err:
            raise OracleError(f"the factory failed: {type(err).__name__}: {err}") from err

    def _created(self, step: TraceStep, total_bytes: int) -> None:
        modes = tuple(m == "lazy" for m in self.caps.compaction)
        unplanted: list[str] = []
        missed = census_probe(lambda lazy: self._build(total_bytes, lazy), self.caps,
                              self.page_size, modes, unplanted)
        self.events["probe.census"] += 1
        self.events["probe.unplanted"] += len(unplanted)
        if missed is not None:
            name, self._probe_lines, seen = missed
            raise Divergence("UNI-13", f"verify_byte_accounting() returned {seen} after the "
                                       f"{name} probe: {'; '.join(self._probe_lines[1:])}")
        self._post(step)

    def note(self, event: str) -> None:
        """Count a coverage event the scheduler model recognises."""
        self.events[event] += 1

    # -- engine hooks ----------------------------------------------------------------------------
    def _prepare(self, name: str, args: dict[str, Any]) -> None:
        choose_form(args, self.caps.slot_forms, self.num_calls)  # int32 / strided slot tensors
        if self.caps.float_chain and self.calls[name].kind == "cache":
            args["cache"] = "tri"  # a cache that stops when the tri-pool's predicate holds

    def _valid(self, step: TraceStep) -> Any:
        model = self.model
        assert model is not None
        call = self.calls[step.call]
        if self.caps.float_chain and call.kind == "cache":  # target-led (.tri_hook)
            return judge_hook(model, self.target, step, lambda fn: self._guard(step, call, fn))
        bound = None if self.caps.capacity_exact or call.kind != "alloc" else Bounded(
            model, promised_alloc(self.target, model, step.call, step.args)
            if self.caps.float_chain else None)
        if bound is not None:
            bound.before()
        promise = self._chain_promise(step) if self.caps.float_chain else None
        try:
            placed = {"state": state_of(self.target)} if step.call == "flush_opportunistic" else {}
            want = call.spec(model, {**step.args, "tree_cache": ZeroCache(), **placed})
        except (ContractViolation, NotImplementedError) as err:
            raise OracleError(f"step {step.call}({step.args}) is invalid under the spec: "
                              f"{err}") from err
        step.expect = want
        got_obj, _ = self._guard(step, call, lambda: call.target(
            self.target, {**step.args, "tree_cache": ZeroCache()}, self.device))
        self._check_dtype(step, got_obj, UNIFIED_DTYPES)
        got = as_list(got_obj) if isinstance(got_obj, torch.Tensor) else got_obj
        if got is None and promise is not None:
            raise Divergence("UNI-14", f"{step.call} was refused within the float chain's "
                                       f"room: {promise}")
        if bound is not None and bound.after(step.call, got, want):
            step.expect = None  # refused by the target, rolled back in the model
            self.events["bound.refused"] += 1
            return None
        if step.call.startswith("translate") and (model.lazy or not self.caps.capacity_exact):
            return want  # placement is free here (judged in _post)
        if got != want:
            self._check_holes(step, own_breach(state_of(self.target)))  # the cause, if so
            raise Divergence(call.result_clause or "UNI-8",
                             f"{step.call} returned {got!r}, the spec says {want!r}")
        return want

    def _chain_promise(self, step: TraceStep) -> str | None:
        """A tri-pool prealloc whose full and SWA pages fit on the float chain as it stands
        (``UNI-14``: ``can_reserve`` of unequal demands is :func:`fits_on_chain`, the float's
        holes credited) and whose virtual ids are free: what it must be granted; else None."""
        if step.call != "alloc_extend_swa_tail" or self.model is None:
            return None
        ps, a = self.page_size, step.args
        prefix, seq, tail = a["prefix_lens"][0], a["seq_lens"][0], a["swa_tail_len"]
        first, end = -(-prefix // ps), -(-seq // ps)
        swa = end - max(first, (seq - tail) // ps) if tail else 0
        chain = chain_of(self.target)
        if end - first > len(self.model.free_virtual) or not fits_on_chain(
                chain, end - first, swa):
            return None
        return (f"{end - first} full and {swa} SWA pages fit (the SWA float holds "
                f"{chain.swa_holes} holes)")

    def _post(self, step: TraceStep) -> None:
        model = self.model
        assert model is not None
        state = state_of(self.target)
        step.available_after = (float_available(self.target, state) if self.caps.float_chain
                                else model.available_size())
        self._check_holes(step, own_breach(state))
        breach = group_end_breach(state, model) if step.call in FREES else None
        if breach is not None:
            detail, self._hole_lines = breach  # the repro asserts the side's bindings
            raise Divergence("UNI-10", f"after {step.call}: {detail}")
        ids = live_tokens(model)
        got, want = census(self.target, ids), spec_census(model)
        exact = 3 if self.caps.capacity_exact else 0  # the capacity views; rows below
        for i, (name, clause, g, w) in enumerate(zip(FIELDS, CLAUSES, got, want)):
            if i < exact and g != w:
                self._field = i
                raise Divergence(clause, f"after {step.call}: {name} is {_short(g)}, the spec "
                                         f"says {_short(w)}")
        if self.caps.capacity_exact:
            self._check_holes(step, model_breach(state, model))
        if self.caps.float_chain:
            self.events["cap.float_chain"] += 1
            for detail in view_problems(self.target, model, state)[:1]:
                raise Divergence(view_clause(detail), f"after {step.call}: {detail}")
        for clause, detail in placement_problems(model, ids, got[3], got[4])[:1]:
            self._placement_line = placement_assert(model, ids, clause)
            raise Divergence(clause, f"after {step.call}: {detail}")
        self.events["placement"] += bool(ids)  # judged, and sound
        if self.caps.capacity_exact and not model.lazy:
            self._check_rows(step, ids, got, want)
        self._check_moves(step, ids, got[3], got[4])
        try:
            model.check_invariants()
        except AssertionError as err:
            raise OracleError(f"the spec's invariants broke: {err}") from err
        problems = self.target.verify_byte_accounting()
        self.events["cap.byte_accounting"] += 1
        if problems:
            raise Divergence("UNI-13", f"after {step.call}: verify_byte_accounting() reports "
                                       f"{list(problems)[:3]} on a state the spec holds healthy")

    def _check_holes(self, step: TraceStep, breach: tuple[str, list[str]] | None) -> None:
        """``UNI-5``: a breach of the holes' bookkeeping (:mod:`.holes`) fails the call."""
        if breach is not None:
            detail, self._hole_lines = breach
            raise Divergence("UNI-5", f"after {step.call}: {detail}")

    def _check_rows(self, step: TraceStep, ids: list[int], got: tuple[Any, ...],
                    want: tuple[Any, ...]) -> None:
        """Eager placement is fixed: each side's rows of the live tokens are the spec's. The
        first differing token breaks ``UNI-6`` when a page copy of this call (the model's move
        or a copy the target issued) touched its page before, its page now or the spec's page
        (a move that went wrong), else ``UNI-4`` (the page is bound elsewhere, nothing moved)."""
        model = self.model
        assert model is not None
        ps = self.page_size
        for k, pool, log, before, done in zip((3, 4), (model.full, model.swa), self._moves,
                                              self._where, self._model_moves):
            if got[k] == want[k]:
                continue
            i = next(j for j, (g, w) in enumerate(zip(got[k], want[k])) if g != w)
            touched = {p for pair in pool.moves[done:] + log.copies for p in pair}
            pages = {before.get(ids[i] // ps), got[k][i] // ps, want[k][i] // ps}
            moved = bool(pages & touched)
            self._field = k
            raise Divergence("UNI-6" if moved else CLAUSES[k],
                             f"after {step.call}: {FIELDS[k]} is {_short(got[k])}, the spec "
                             f"says {_short(want[k])} (token {ids[i]} on row {got[k][i]}, the "
                             f"spec's {want[k][i]}; "
                             f"{'a page copy of this call' if moved else 'no page copy'} "
                             f"touched its page)")

    def _check_moves(self, step: TraceStep, ids: list[int], full: list[int],
                     swa: list[int]) -> None:
        """``UNI-6``: live pages moved only along the copies issued since the last call."""
        ps = self.page_size
        model = self.model
        assert model is not None
        bound = [i for i, t in enumerate(ids) if t // ps in model.swa.v2p]
        now = (pages_of(full, ids, ps),
               pages_of([swa[i] for i in bound], [ids[i] for i in bound], ps))
        for k, (side, log, before, after) in enumerate(zip(("full", "SWA"), self._moves,
                                                           self._where, now)):
            moved = sum(before.get(v, p) != p for v, p in after.items())
            self.events["compaction.move"] += moved > 0
            stray = log.strays(before, after)
            wrong = log.unexplained(before, after)
            if wrong:
                self._move_repro = move_repro(k, stray[0], before[stray[0]], ps)
                raise Divergence("UNI-6", f"after {step.call}: {side} {wrong[0]}")
        self._where = now
        self._model_moves = (len(model.full.moves), len(model.swa.moves))

    def _cause(self, step: TraceStep, clause: str, detail: str) -> tuple[str, str]:
        """A divergence seen right after ``clear()`` breaks ``UNI-12`` (the symptom's clause
        stays in the detail)."""
        if step.call == "clear" and step.raised is None:
            return "UNI-12", f"[{clause}] {detail}"
        return clause, detail

    def _hint(self, clause: str, detail: str) -> str | None:
        """The declarations probes of fresh instances find the target would pass under
        (:mod:`.fits`); else an ``alloc_decode`` at page size 1 that diverges points at
        ``decode_ps1``; else the engine's hint."""
        found = fitting(type(self), self.factory, self.caps, self.device)
        if found:
            return hint(found)
        step = self.trace.steps[self.trace.failing_step or 0]
        if step.call == "alloc_decode" and self.page_size == 1 and self.caps.decode_ps1:
            return "if alloc_decode is not meant for page size 1: --declare decode_ps1=false"
        return super()._hint(clause, detail)

    def _census(self) -> tuple[Any, ...]:
        assert self.model is not None
        return census(self.target, live_tokens(self.model))

    def _record_rejected_state(self, step: TraceStep, census: Any) -> None:
        step.available_after = census[0]

    def _data_sides(self) -> list[Any]:
        from .store import unified_sides

        assert self.model is not None
        return unified_sides(self.target, self.model)

    def _final_asserts(self, index: int) -> list[str]:
        step, clause = self.trace.steps[index], self.trace.clause
        call = self.calls[step.call]
        if step.call == "create" and self._probe_lines:
            return [PLANT_IMPORT, *self._probe_lines[1:],
                    "assert a.verify_byte_accounting()  # UNI-13"]
        if clause == "UNI-13":
            return ["assert not a.verify_byte_accounting()  # UNI-13"]
        if clause == "UNI-6" and self._move_repro is not None:
            return self._move_repro[1]
        if clause in ("UNI-5", "UNI-10") and self._hole_lines:
            return self._hole_lines
        if self._placement_line is not None:
            return [self._placement_line]
        if clause in ("UNI-14", "UNI-16") and call.kind != "cache":  # else the hook's result
            if "refused within" in (self.trace.detail or ""):
                return [f"assert r{index} is not None  # [UNI-14] within available_size()"]
            return [f"assert view_problems(a) == []  # [{clause}]"]
        if self._field is not None and self.model is not None:
            ids = live_tokens(self.model)
            want = spec_census(self.model)[self._field]
            return [f"assert {_SOURCES[self._field].format(ids=ids)} == {want!r}  # [{clause}]"]
        judged = not step.call.startswith("tr") or f"{step.call} returned" in (
            self.trace.detail or "")  # a translation's rows are judged where placement is fixed
        if step.raises is None and call.checks is not None and judged:
            return call.checks(step.args, step.expect, f"r{index}")
        return []

    def _failing_setup(self, index: int) -> list[str]:
        moved = self.trace.clause == "UNI-6" and self._move_repro is not None
        return self._move_repro[0] if moved and self._move_repro else []

    def _events_of(self, step: TraceStep, state: Any, result: Any) -> list[str]:
        assert self.model is not None
        m = self.model
        return events_of(step, result, bool(m.full.holes or m.swa.holes))


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."
