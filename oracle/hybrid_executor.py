"""Run one hybrid call on the target and on :class:`kvpool.spec.HybridModel`, then compare.

After every call: the result (slot for slot, SGLang's reference order), both pools' free
censuses in order (``get_all_free_pages()`` of each side: free list then staged), the pairs of
``full_to_swa_index_mapping`` and its trailing ``-1``, the three available sizes, the eviction
requests of the capacity hooks, and the spec's invariants (``SWA-2..4``). A bad call must raise
one of the target's declared error types (a ContractViolation must name the spec's clause) and
leave the target unchanged (``ERR-1``). The first divergence raises :class:`HybridFailure`,
whose report lists the calls so far as a pytest function.
"""

from __future__ import annotations

from typing import Any, NoReturn

import torch
from kvpool.spec import ContractViolation, HybridModel

from .hybrid_calls import HYBRID_CALLS, EvictRecorder
from .hybrid_targets import HybridCapabilities
from .report import OracleError


class HybridFailure(AssertionError):
    """A divergence of a hybrid target from the spec: the clause, what differs, the calls."""

    def __init__(self, clause: str, detail: str, steps: list[str], target: str) -> None:
        super().__init__(f"[{clause}] {detail}")
        self.clause, self.detail, self.steps, self.target = clause, detail, steps, target

    def report(self) -> str:
        """The headline and the calls as a pytest function (``a`` is the target)."""
        module, _, name = self.target.partition(":")
        body = "\n".join(f"    {line}" for line in self.steps)
        return (f"[{self.clause}] {self.detail}\n\n"
                f"from {module} import {name} as factory\n"
                "from kvpool.oracle.hybrid_calls import EvictRecorder, t\n"
                "from types import SimpleNamespace\n\n"
                f"def test_repro():\n{body}\n")


def census(target: Any) -> tuple[object, ...]:
    """Everything the oracle compares, read from a target with SGLang's attributes."""
    mapping = target.full_to_swa_index_mapping
    values = mapping[:-1].tolist()
    pairs = {f: s for f, s in enumerate(values) if s}
    return (target.full_attn_allocator.get_all_free_pages().tolist(),
            target.swa_attn_allocator.get_all_free_pages().tolist(), pairs, int(mapping[-1]),
            target.available_size(), target.full_available_size(), target.swa_available_size())


def spec_census(model: HybridModel) -> tuple[object, ...]:
    """The spec's side of :func:`census`."""
    return (model.full.get_all_free_pages(), model.swa.get_all_free_pages(), dict(model.mapping),
            -1, model.available_size(), model.full_available_size(), model.swa_available_size())


FIELDS = ("full free census", "SWA free census", "mapping pairs", "mapping's trailing entry",
          "available_size()", "full_available_size()", "swa_available_size()")
CLAUSES = ("INV-1", "INV-1", "SWA-2", "SWA-1", "SWA-5", "SWA-5", "SWA-5")


class HybridExecutor:
    """The target and the spec, call by call (see the module docstring)."""

    def __init__(self, factory: Any, caps: HybridCapabilities, path: str, *, page_size: int,
                 need_sort: bool, device: str = "cpu") -> None:
        self.factory, self.caps, self.path = factory, caps, path
        self.page_size, self.need_sort, self.device = page_size, need_sort, device
        self.steps: list[str] = []
        self.model: HybridModel | None = None
        self.target: Any = None
        self.num_calls = 0
        self.reached: dict[str, int] = {}
        self.failed = False

    def create(self, size: int, size_swa: int) -> None:
        """A fresh target and model of ``size`` / ``size_swa`` tokens."""
        self.steps = [f"a = factory(size={size}, size_swa={size_swa}, page_size={self.page_size}, "
                      f"need_sort={self.need_sort})", "cache = EvictRecorder()"]
        self.model = HybridModel(size, size_swa, self.page_size, need_sort=self.need_sort)
        self.target = self.factory(size=size, size_swa=size_swa, page_size=self.page_size,
                                   need_sort=self.need_sort, device=self.device)
        self._compare("create")

    def note(self, event: str) -> None:
        """Count a coverage event (window slides, shortages, groups, ...)."""
        self.reached[event] = self.reached.get(event, 0) + 1

    def call(self, name: str, **args: Any) -> Any:
        """A valid call on both; returns the spec's result. Raises HybridFailure."""
        assert self.model is not None
        entry = HYBRID_CALLS[name]
        spec_cache, target_cache = EvictRecorder(), EvictRecorder()
        self.steps.append(entry.source(args))
        self.num_calls += 1
        try:
            want = entry.spec(self.model, args, spec_cache)
        except (ContractViolation, NotImplementedError) as err:
            raise OracleError(f"the scheduler generated a call the spec rejects: "
                              f"{self.steps[-1]}: {err}") from err
        try:
            got = entry.target(self.target, args, self.device, target_cache)
        except Exception as err:
            self._fail("ERR-1", f"{name} raised {type(err).__name__}: {err} on a valid call")
        got = got.tolist() if isinstance(got, torch.Tensor) else got
        if got != want:
            clause = {"alloc_decode": "SWA-9", "alloc_extend": "SWA-7", "alloc": "SWA-6",
                      "translate_loc_from_full_to_swa": "SWA-16"}.get(name, "SWA-17")
            self._fail(clause, f"{name} returned {got!r}, the spec says {want!r}")
        if target_cache.requests != spec_cache.requests:
            self._fail("SWA-17", f"{name} asked the cache for {target_cache.requests} "
                                 f"(full, swa) tokens, the spec for {spec_cache.requests}")
        self._compare(name)
        return want

    def call_bad(self, name: str, **args: Any) -> None:
        """A call the spec rejects: the target must raise a declared error and change nothing."""
        assert self.model is not None
        entry = HYBRID_CALLS[name]
        self.steps.append(f"{entry.source(args)}  # must raise")
        self.num_calls += 1
        before = self.model.snapshot()
        with_clause = None
        try:
            entry.spec(self.model, args, EvictRecorder())
        except ContractViolation as err:
            with_clause = err.clause
        if with_clause is None or self.model.snapshot() != before:
            raise OracleError(f"the bad call {self.steps[-1]} is not a spec error")
        self.note(f"bad:{with_clause}")
        target_before = census(self.target)
        try:
            entry.target(self.target, args, self.device, EvictRecorder())
        except self.caps.error_types as err:
            clause = getattr(err, "clause", None)
            if isinstance(err, ContractViolation) and clause != with_clause:
                self._fail(with_clause, f"{name} raised [{clause}], the spec says [{with_clause}]")
        except Exception as err:
            self._fail(with_clause, f"{name} raised {type(err).__name__} instead of a declared "
                                    "error type")
        else:
            self._fail(with_clause, f"{name} accepted the call")
        if census(self.target) != target_before:
            self._fail("ERR-1", f"{name} was refused but changed the state")

    def _compare(self, name: str) -> None:
        assert self.model is not None
        got, want = census(self.target), spec_census(self.model)
        for field, clause, g, w in zip(FIELDS, CLAUSES, got, want):
            if g != w:
                self._fail(clause, f"after {name}: {field} is {_short(g)}, "
                                   f"the spec says {_short(w)}")
        try:
            self.model.check_invariants()
        except AssertionError as err:
            raise OracleError(f"the spec's invariants broke: {err}") from err
        verify = getattr(self.target, "verify_byte_accounting", None)
        problems = verify() if verify is not None else []
        if problems:
            self._fail("SWA-19", f"after {name}: the target's census reports {problems[:3]}")

    def _fail(self, clause: str, detail: str) -> NoReturn:
        self.failed = True
        raise HybridFailure(clause, detail, list(self.steps), self.path)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."
