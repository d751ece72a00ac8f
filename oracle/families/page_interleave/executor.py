"""Run one page-interleave call on the target, on a mirrored rank and on
:class:`~kvpool.spec.page_interleave_model.PageInterleaveModel`, then compare.

Each valid call is made on the target and on a *mirror*: a second allocator from the same
factory fed the same calls, as a second rank of the shard group is. After every call, in this
order: the mirror's result and state against the target's (``PINTER-12``); an allocation's
result against the spec's (None or not ``PINTER-6``, the resolved rotation bases ``PINTER-4``,
each request's per-class page counts ``PINTER-7``, the slots the clause that decided the call
in the model: ``PINTER-5``, or ``PINTER-9`` after a need_sort merge); then the census: the
class free and release lists (the deciding clause), the counts, ``get_all_free_pages()`` order
and ``aggregate_free_size()`` (``PINTER-2``), ``available_size()`` (``PINTER-3``) and
``least_full_class()`` (``PINTER-4``). A rejected call is the engine's (``PINTER-11``,
``ERR-1``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from kvpool.spec.contract import Divergence
from kvpool.spec.page_interleave_model import PageInterleaveModel

from ...engine.core import Engine
from ...engine.report import OracleError
from ...engine.trace import TraceStep
from ...reporting.pagemap import render
from .calls import PAGE_INTERLEAVE_CALLS
from .coverage import census_events, events_of, extend_events, free_events
from .state import class_map, state_of


class PageInterleaveExecutor(Engine):
    """A page-interleave target, its mirror and the spec, call by call (module docstring)."""

    family = "page_interleave"
    calls = PAGE_INTERLEAVE_CALLS
    model: PageInterleaveModel | None
    mirror: Any = None

    def create(self, size: int, shard_size: int) -> None:
        """A fresh target, mirror and model: ``shard_size`` ranks of ``size`` slots each.
        Raises OracleError when the factory fails."""
        args = {"size": size, "page_size": self.page_size, "shard_size": shard_size,
                "need_sort": self.need_sort}
        step = TraceStep("create", args)
        self.trace.steps.append(step)
        self.model = PageInterleaveModel(size, self.page_size, shard_size, self.need_sort)
        try:
            self.target = self.factory(**args, device=self.device)
            self.mirror = self.factory(**args, device=self.device)
        except Exception as err:
            raise OracleError(f"the factory failed: {type(err).__name__}: {err}") from err
        self._checked(0, lambda: "", lambda: self._post(step))
        self.events["create"] += 1

    def create_from(self, args: Mapping[str, Any]) -> None:
        self.create(args["size"], args["shard_size"])

    def note(self, event: str) -> None:
        """Count a coverage event of the scheduler model (after its call's checks)."""
        self.events[event] += 1

    def _census(self) -> Any:
        return state_of(self.target)

    def _record_rejected_state(self, step: TraceStep, census: Any) -> None:
        step.available_after = census[3]

    def _valid(self, step: TraceStep) -> Any:
        call, want, (got, _) = self._spec_then_target(step)
        mirrored, _ = self._guard(step, call,
                                  lambda: call.target(self.mirror, step.args, self.device))
        if call.kind == "alloc":
            self._judge_alloc(step, got, mirrored, want)
        return want

    def _judge_alloc(self, step: TraceStep, got: Any, mirrored: Any, want: Any) -> None:
        model = self.model
        assert model is not None
        mine, theirs = (_plain(got[0]), got[1]), (_plain(mirrored[0]), mirrored[1])
        if mine != theirs:
            raise Divergence("PINTER-12", f"{step.call}: rank 0 got {mine[0]} (bases "
                                          f"{mine[1]}), its mirror {theirs[0]} (bases "
                                          f"{theirs[1]}) from the same call stream")
        slots, bases = want["slots"], want["bases"]
        if (got[0] is None) != (slots is None):
            raise Divergence("PINTER-6", f"{step.call} returned {mine[0]}, the spec says "
                                         f"{slots} (class counts {model.counts()})")
        if bases is not None and got[1] != bases:
            raise Divergence("PINTER-4", f"{step.call} resolved rotation bases {got[1]}, the "
                                         f"spec's {bases} (least-full class, lowest id on a tie)")
        if got[0] is None:
            return
        if not isinstance(got[0], torch.Tensor) or got[0].dtype != torch.int64:
            raise Divergence("PINTER-5", f"{step.call} returned {got[0]!r}, not int64 slots")
        self._judge_balance(step, mine[0] or [])
        if mine[0] != slots:
            raise Divergence(model.rule, f"{step.call} returned slots {mine[0]}, the spec says "
                                         f"{slots}")

    def _judge_balance(self, step: TraceStep, slots: list[int]) -> None:
        """Each request's new pages: per-class counts differ by at most one (PINTER-7)."""
        n, ps = self.model.shard_size, self.page_size  # type: ignore[union-attr]
        requests = step.args.get("requests") or [[0, step.args.get("need_size", 0)]]
        at = 0
        for prefix, seq in requests:
            part, at = slots[at:at + seq - prefix], at + seq - prefix
            pages = list(dict.fromkeys(s // ps for s in part))
            per_class = [sum(1 for p in pages if p % n == r) for r in range(n)]
            if max(per_class) - min(per_class) > 1:
                raise Divergence("PINTER-7", f"{step.call}: a chain's new pages {pages} hold "
                                             f"{per_class} pages per rank (spread above one)")

    def _post(self, step: TraceStep) -> None:
        model = self.model
        assert model is not None
        step.available_after = model.available_size()
        seen, twin = state_of(self.target), state_of(self.mirror)
        if seen != twin:
            part = next(name for name, a, b in zip(_PARTS, seen, twin) if a != b)
            raise Divergence("PINTER-12", f"after {step.call}: rank 0 and its mirror differ in "
                                          f"{part}: {_part(seen, part)} vs {_part(twin, part)}")
        free, release, counts, available, aggregate, least, every = seen
        for name, value, want in (("class free lists", free, model.free_lists),
                                  ("class release lists", release, model.release_lists)):
            if value != want:
                raise Divergence(model.rule, f"after {step.call}: {name} {value}, the spec's "
                                             f"{want}")
        checks = (("PINTER-2", "class_free_page_counts()", counts, model.counts()),
                  ("PINTER-2", "get_all_free_pages()", every, model.all_free_pages()),
                  ("PINTER-2", "aggregate_free_size()", aggregate, model.aggregate_free_size()),
                  ("PINTER-3", "available_size()", available, model.available_size()),
                  ("PINTER-4", "least_full_class()", least, model.least_full_class()))
        for clause, name, shown, want in checks:
            if shown != want:
                raise Divergence(clause, f"after {step.call}: {name} {shown}, the spec's {want}")

    def _snapshot(self) -> Any:
        m = self.model
        assert m is not None
        return (m.shard_size, m.pages_per_rank, [list(f) for f in m.free_lists],
                [list(r) for r in m.release_lists], m.counts(), m.pending is not None)

    def _before_line(self, state: Any) -> Callable[[], str]:
        return lambda: class_map(*state[:4])

    def _maps(self, index: int, before: Callable[[], str]) -> tuple[str, str]:
        """The class maps around step ``index``: the spec's before, the spec's and the
        target's after (one row per class, one character per physical page from 1)."""
        state = self._snapshot()
        try:
            seen = state_of(self.target)
            target_map: str | None = class_map(state[0], state[1], seen[0], seen[1])
        except Exception:  # a target that fails to show its lists: the spec's map only
            target_map = None
        return (render(f"before step {index}", before()),
                render(f"after step {index}", class_map(*state[:4]), target_map))

    def _cause(self, step: TraceStep, clause: str, detail: str) -> tuple[str, str]:
        """A valid call that raised is reported under the clause that decided its effect."""
        if step.raised is not None and step.raises is None and self.model is not None:
            return self.model.rule, detail
        return clause, detail

    def _final_asserts(self, index: int) -> list[str]:
        """The failing call's result (where it has one) and the spec's class lists after it."""
        step = self.trace.steps[index]
        if step.raises is not None or self.model is None:
            return []
        call = self.calls[step.call]
        out = call.checks(step.args, step.expect, f"r{index}") if call.checks else []
        free = [list(f) for f in self.model.free_lists]
        release = [list(r) for r in self.model.release_lists]
        m = self.model
        return [*out, f"assert [x.tolist() for x in a.class_free_pages] == {free!r}  "
                      f"# [{self.trace.clause}]",
                f"assert [x.tolist() for x in a.class_release_pages] == {release!r}",
                f"assert a.class_free_page_counts() == {m.counts()!r}",
                f"assert a.get_all_free_pages().tolist() == {m.all_free_pages()!r}",
                f"assert a.aggregate_free_size() == {m.aggregate_free_size()}",
                f"assert a.least_full_class() == {m.least_full_class()}"]

    def _events_of(self, step: TraceStep, state: Any, result: Any) -> list[str]:
        model = self.model
        assert model is not None
        n, ps = model.shard_size, self.page_size
        out = census_events(model.counts(), ps) + events_of(step.call, step.args, result,
                                                              model.rule)
        if step.call == "alloc_extend":
            if result["slots"] is None:
                out += ["short"] + (["short.batch"] if len(step.args["requests"]) > 1 else [])
            else:
                out += extend_events(step.args["requests"], step.args["bases"], state[4], n, ps)
        if step.call == "alloc_cyclic" and result["slots"] is None:
            out.append("short")
        if step.call == "free":
            out += free_events(step.args["slots"], ps, n, state[5], self.need_sort)
        return out


_PARTS = ("class free lists", "class release lists", "class counts", "available_size",
          "aggregate_free_size", "least_full_class", "get_all_free_pages")


def _part(state: tuple[Any, ...], name: str) -> Any:
    return state[_PARTS.index(name)]


def _plain(value: Any) -> Any:
    return value.tolist() if isinstance(value, torch.Tensor) else value
