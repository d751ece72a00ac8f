"""Run one HiSparse call on the target and on :class:`~kvpool.spec.hisparse.HiSparseModel`,
then compare.

After every valid call: the result (None against slots, other slots, or not an int64 tensor;
reported under the clause that decided the call in the model, ``model.rule``), then the
census: both sides' free lists in order (``get_all_free_pages()`` of
``logical_attn_allocator`` and ``hisparse_attn_allocator``; ``model.rule``), the whole
full -> device mapping (``HSP-3``) and ``available_size()`` (``HSP-2``). ``create`` also reads
``size`` / ``size_full`` (``HSP-1``). A rejected call is the engine's (its clause, ``ERR-1``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kvpool.spec.contract import Divergence
from kvpool.spec.hisparse import HiSparseModel
from kvpool.spec.hisparse_dsv4 import HiSparseDSV4Model

from ...engine.core import Engine
from ...engine.report import OracleError
from ...engine.trace import TraceStep
from ...reporting.pagemap import render
from .calls import HISPARSE_CALLS
from .coverage import dsv4_events_of, events_of
from .dsv4_census import CLAUSES, FIELDS, census, census_asserts, spec_census

Census = tuple[list[int], list[int], list[int], int]


def _ints(x: Any) -> list[int]:
    return [int(v) for v in x.reshape(-1).tolist()]


def side_map(num_pages: int, free: list[int]) -> str:
    """One character per page from page 1: ``.`` free, ``o`` held."""
    listed = set(free)
    return "".join("." if p in listed else "o" for p in range(1, num_pages + 1))


class HiSparseExecutor(Engine):
    """A HiSparse target and the spec, call by call (see the module docstring)."""

    family = "hisparse"
    calls = HISPARSE_CALLS
    model: Any

    def create(self, size: int, ratio: int) -> None:
        """A fresh target and model of ``size`` device slots and ratio ``ratio``. Raises
        OracleError when the factory fails."""
        args = {"size": size, "page_size": self.page_size, "need_sort": self.need_sort,
                "ratio": ratio}
        step = TraceStep("create", args)
        self.trace.steps.append(step)
        self.model = HiSparseModel(size, self.page_size, ratio=ratio, need_sort=self.need_sort)
        try:
            self.target = self.factory(size=size, page_size=self.page_size,
                                       need_sort=self.need_sort, ratio=ratio, device=self.device)
        except Exception as err:
            raise OracleError(f"the factory failed: {type(err).__name__}: {err}") from err
        self._checked(0, lambda: "", lambda: self._created(step))
        self.events["create"] += 1

    def _created(self, step: TraceStep) -> None:
        model = self.model
        assert model is not None
        for name in ("size", "size_full"):
            got = int(getattr(self.target, name))
            if got != model.size_full:
                raise Divergence("HSP-1", f"{name} {got}, the spec's {model.size_full} "
                                          f"(size * ratio)")
        self._post(step)

    @property
    def dsv4(self) -> bool:
        """Whether the target is the DeepSeek V4 variant (``HSP-12..16``)."""
        return bool(getattr(self.caps, "dsv4", False))

    def create_dsv4(self, sizes: Mapping[str, int]) -> None:
        """A fresh DSV4 target and model (``sizes``: :func:`.dsv4.dsv4_sizes`). Raises
        OracleError when the factory fails."""
        args = {**sizes, "page_size": self.page_size, "need_sort": self.need_sort}
        step = TraceStep("create", args)
        self.trace.steps.append(step)
        self.model = HiSparseDSV4Model(
            sizes["size"], sizes["size_swa"], self.page_size,
            size_hisparse=sizes["size_hisparse"], hisparse_page_size=sizes["hisparse_page_size"],
            c4_logical_size=sizes["c4_logical_size"], need_sort=self.need_sort)
        try:
            self.target = self.factory(**args, device=self.device)
        except Exception as err:
            raise OracleError(f"the factory failed: {type(err).__name__}: {err}") from err
        self._checked(0, lambda: "", lambda: self._post(step))
        self.events["dsv4.create"] += 1

    def create_from(self, args: Mapping[str, Any]) -> None:
        if "size_swa" in args:
            self.create_dsv4({k: args[k] for k in ("size", "size_swa", "size_hisparse",
                                                   "hisparse_page_size", "c4_logical_size")})
            return
        self.create(args["size"], args["ratio"])

    def note(self, event: str) -> None:
        """Count a coverage event of the scheduler model."""
        self.events[event] += 1

    def _census(self) -> Any:
        if self.dsv4:
            return census(self.target)
        x = self.target
        return (_ints(x.logical_attn_allocator.get_all_free_pages()),
                _ints(x.hisparse_attn_allocator.get_all_free_pages()),
                _ints(x.full_to_hisparse_device_index_mapping), int(x.available_size()))

    def _record_rejected_state(self, step: TraceStep, state: Any) -> None:
        step.available_after = state[4 if self.dsv4 else 3]

    def _valid(self, step: TraceStep) -> Any:
        call, want, (got, _) = self._spec_then_target(step)
        if call.kind == "alloc":
            assert self.model is not None
            self._judge_ids(step, got, want, self.model.rule)
        return want

    def _post(self, step: TraceStep) -> None:
        model = self.model
        assert model is not None
        if self.dsv4:
            self._post_dsv4(step)
            return
        step.available_after = model.available_size()
        logical, device, mapping, size = self._census()
        for side, got, want in (("logical", logical, model.logical.get_all_free_pages()),
                                ("device", device, model.device.get_all_free_pages())):
            if got != want:
                raise Divergence(model.rule, f"after {step.call}: {side} free pages {got}, "
                                             f"the spec's {want}")
        want_map = model.mapping_list()
        if mapping != want_map:
            rows = [f"{s}: {g} (spec {w})" for s, (g, w) in enumerate(zip(mapping, want_map))
                    if g != w][:6]
            if len(mapping) != len(want_map):
                rows = [f"{len(mapping)} entries, the spec's {len(want_map)}"]
            raise Divergence("HSP-3", f"after {step.call}: the mapping differs at "
                                      f"{', '.join(rows)}")
        if size != model.available_size():
            raise Divergence("HSP-2", f"after {step.call}: available_size() {size}, the spec's "
                                      f"{model.available_size()} (min of both sides)")

    def _post_dsv4(self, step: TraceStep) -> None:
        """The DSV4 census (:func:`.dsv4.census`), field by field against the spec's."""
        model = self.model
        step.available_after = model.available_size()
        for name, clause, got, want in zip(FIELDS, CLAUSES, census(self.target),
                                           spec_census(model)):
            if got != want:
                raise Divergence(clause or model.rule,
                                 f"after {step.call}: {name} {got}, the spec's {want}")

    def _snapshot(self) -> Any:
        m = self.model
        assert m is not None
        if self.dsv4:
            return ("dsv4", spec_census(m))
        return (m.logical.num_pages, m.logical.get_all_free_pages(), m.device.num_pages,
                m.device.get_all_free_pages())

    def _before_line(self, state: Any) -> Callable[[], str]:
        if state[0] == "dsv4":
            return lambda: " ".join(f"{n}={v}" for n, v in zip(FIELDS, state[1]))
        return lambda: f"logical {side_map(state[0], state[1])} device {side_map(*state[2:])}"

    def _maps(self, index: int, before: Callable[[], str]) -> tuple[str, str]:
        """The page maps around step ``index``: the spec's before it and after it."""
        return (render(f"before step {index}", before()),
                render(f"after step {index}", self._before_line(self._snapshot())()))

    def _final_asserts(self, index: int) -> list[str]:
        """The failing call's result (where it has one), the spec's free lists and mapping."""
        step = self.trace.steps[index]
        if step.raises is not None or self.model is None:
            return []
        call = self.calls[step.call]
        out = call.checks(step.args, step.expect, f"r{index}") if call.checks else []
        m, clause = self.model, self.trace.clause
        if self.dsv4:
            return [*out, *census_asserts(m, clause or "HSP-12")]
        return [*out,
                f"assert a.logical_attn_allocator.get_all_free_pages().tolist() == "
                f"{m.logical.get_all_free_pages()!r}  # [{clause}]",
                f"assert a.hisparse_attn_allocator.get_all_free_pages().tolist() == "
                f"{m.device.get_all_free_pages()!r}  # [{clause}]",
                f"assert a.full_to_hisparse_device_index_mapping.tolist() == "
                f"{m.mapping_list()!r}  # [{clause}]",
                f"assert a.available_size() == {m.available_size()}  # [{clause}]"]

    def _events_of(self, step: TraceStep, state: Any, result: Any) -> list[str]:
        return (dsv4_events_of if self.dsv4 else events_of)(step, result)
