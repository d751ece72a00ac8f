"""Traces as pytest functions: the calls as torch source, the asserts between them, a rejected
call under ``pytest.raises`` of the target's declared error types (only a ``ContractViolation``
must name the spec's clause), a shortage raised in a declared type as the None it stands for.
The failing step ends with the family's own asserts (``Trace.final_asserts``).

Literal slot lists are written compactly (``[*range(4, 260)]`` for a run of consecutive slots).
A trace in contract order of a family whose record names a contract-order writer
(``Registered.contract_repro``: the single pool's
:mod:`kvpool.oracle.families.single.repro_spec`) is written in the contract's terms instead: the
spec model runs beside the allocator,
later arguments name the slots this allocator chose, and every step asserts the contract's
property, so the repro fails on the broken allocator and passes on any correct one, whatever
pages it picks.
"""

from __future__ import annotations

import builtins
import importlib
from dataclasses import replace
from types import ModuleType
from typing import Any

from .calltables import calls_for, repro_imports
from .registry import DEFAULT_FAMILY, registered
from .trace import Trace, TraceStep

CONTRACT_VIOLATION = "kvpool.spec.errors.ContractViolation"


def error_type_names(types: tuple[type[BaseException], ...]) -> list[str]:
    """Dotted names of exception classes, as a trace stores them."""
    return [f"{t.__module__}.{t.__qualname__}" for t in types]


def _exception_exprs(names: list[str]) -> tuple[list[str], set[str]]:
    """Source expressions for exception classes given by dotted name, and their imports."""
    imports, exprs = set(), []
    for name in names:
        module, _, cls = name.rpartition(".")
        if name == CONTRACT_VIOLATION:
            exprs.append("ContractViolation")
        elif module == "builtins" and hasattr(builtins, cls):
            exprs.append(cls)
        else:
            imports.add(f"from {module} import {cls}")
            exprs.append(cls)
    return exprs, imports


def shortage_block(names: list[str], calls: list[str], var: str) -> tuple[list[str], set[str]]:
    """An allocation of a target that declares ``shortage_raises`` (``names``) where the spec's
    answer is None: a raise of those types binds ``var`` to None (the result it stands for)."""
    exprs, imports = _exception_exprs(names)
    head = exprs[0] if len(exprs) == 1 else f"({', '.join(exprs)})"
    lines = ["try:", *("    " + line for line in calls)]
    lines += [f"except {head}:  # the target's form of None (a shortage)", f"    {var} = None"]
    return lines, imports


def raises_block(trace: Trace, step: TraceStep, calls: list[str]) -> tuple[list[str], set[str]]:
    """The lines running a rejected call under ``pytest.raises``, and the imports they need."""
    exprs, imports = _exception_exprs(trace.error_types or [CONTRACT_VIOLATION])
    if exprs == ["ContractViolation"]:
        check = f"assert err.value.clause == {step.raises!r}"
    else:  # the target's own types: a ContractViolation among them must still name the clause
        check = (
            "assert not isinstance(err.value, ContractViolation) or "
            f"err.value.clause == {step.raises!r}"
        )
    head = exprs[0] if len(exprs) == 1 else f"({', '.join(exprs)})"
    lines = [f"with pytest.raises({head}) as err:", *("    " + line for line in calls), check]
    return lines, imports


def result_asserts(step: TraceStep, var: str, family: str = DEFAULT_FAMILY) -> list[str]:
    """Python asserts that the result bound to ``var`` is ``step.expect`` (none for most calls)."""
    checks = calls_for(family)[step.call].checks
    return [] if checks is None else checks(step.args, step.expect, var)


def call_source(step: TraceStep, var: str, family: str = DEFAULT_FAMILY) -> list[str]:
    """The torch-level call(s) of one step as Python source; results are bound to ``var``."""
    call = calls_for(family)[step.call]
    lines = call.source(step.args, var)
    return lines + ([call.reuse] if step.clobber and call.reuse else [])


class Literal(list):  # type: ignore[type-arg]
    """A list of ints whose ``repr`` writes runs of 4 or more consecutive values as ranges
    (``*range(4, 260)``) and of 4 or more equal values as repeats (``*[0] * 32``)."""

    def __repr__(self) -> str:
        parts, i, values = [], 0, list(self)
        while i < len(values):
            step = 1 if i + 1 < len(values) and values[i + 1] == values[i] + 1 else 0
            j = i
            while j + 1 < len(values) and values[j + 1] == values[j] + step:
                j += 1
            if j - i < 3:
                parts.append(repr(values[i]))
                i += 1
                continue
            if step:
                parts.append(f"*range({values[i]}, {values[j] + 1})")
            else:
                parts.append(f"*[{values[i]}] * {j - i + 1}")
            i = j + 1
        return "[" + ", ".join(parts) + "]"


class Mapped(Literal):
    """Recorded slots (or page ids) as repro source that maps them to this allocator's."""

    def __init__(self, values: Any, helper: str) -> None:
        super().__init__(values)
        self.helper = helper

    def __repr__(self) -> str:
        return f"{self.helper}({super().__repr__()})"


def compact(value: Any) -> Any:
    """``value`` with every list of ints (at any depth) a :class:`Literal`."""
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return value if isinstance(value, Literal) else Literal(value)
    if isinstance(value, (list, tuple)):
        return type(value)(compact(v) for v in value)
    if isinstance(value, dict):
        return {k: compact(v) for k, v in value.items()}
    return value


def mapped_args(step: TraceStep, family: str) -> dict[str, Any]:
    """``step``'s arguments as contract-order repro source: slot lists through ``m`` (page ids
    through ``mp``), every other list compact."""
    names = calls_for(family)[step.call].slot_args
    out: dict[str, Any] = compact(dict(step.args))
    for name in names:
        value = out.get(name)
        if value is None:
            continue
        if name == "segments":
            out[name] = [[Mapped(idx, "m"), start] for idx, start in value]
        elif name == "entries":
            out[name] = [Mapped(e, "m") for e in value]
        else:
            out[name] = Mapped(value, "mp" if name == "page_ids" else "m")
    return out


def _compact_step(step: TraceStep) -> TraceStep:
    return replace(step, args=compact(step.args), expect=compact(step.expect))


def contract_writer(trace: Trace) -> ModuleType | None:
    """The module that writes ``trace``'s repro in the contract's terms (its family's
    ``Registered.contract_repro``), or None: exact order, no writer, or a trace it does not
    support."""
    path = registered(trace.family).contract_repro
    if trace.order != "contract" or not path:
        return None
    writer = importlib.import_module(path)
    return writer if writer.supported(trace) else None


def to_pytest(trace: Trace, factory_path: str, *, name: str = "test_kvpool_repro") -> str:
    """A self-contained pytest function replaying ``trace`` on ``factory_path`` (module:attr).

    Exact order: steps before the failing one assert their spec results (so the path is the
    same); the failing step ends with ``final_asserts`` (this module). Contract
    order (single pool): every step asserts the contract's property against the spec model run
    beside it (see the module docstring). A rejected step runs under ``pytest.raises`` of the
    target's declared error types.
    """
    module, _, attr = factory_path.partition(":")
    fail = trace.failing_step if trace.failing_step is not None else len(trace.steps) - 1
    writer = contract_writer(trace)
    head = f"[{trace.clause}] {trace.detail}" if trace.clause else "replay"
    body = [
        f'"""{head}',
        "",
        f"kvpool.oracle, {trace.order} order, page_size={trace.page_size}, "
        f'need_sort={trace.need_sort}."""',
        "import pytest",
        "import torch",
        "",
        "from kvpool.oracle.families.single.treecache import TinyTreeCache",
        "from kvpool.spec import ContractViolation, ResizeConfig",
        *(writer.PRELUDE if writer else []),
        f"from {module} import {attr} as factory",
        *repro_imports(trace.family),
        "{imports}",
        "",
        f"DEVICE = {trace.device!r}",
        "",
        "def t(values):",
        "    return torch.tensor(values, dtype=torch.int64, device=DEVICE)",
        "",
        *(writer.HELPERS if writer else []),
    ]
    imports: set[str] = set()
    for i in range(min(fail + 1, len(trace.steps))):
        lines, needed = (
            _contract_step(trace, i, writer) if writer else _exact_step(trace, i, fail)
        )
        body += lines
        imports |= needed
    if not writer:
        body += _census_asserts(trace.steps[fail] if trace.steps else None)
    slot = body.index("{imports}")
    body[slot : slot + 1] = sorted(imports)
    return f"def {name}():\n" + "\n".join(("    " + line) if line else "" for line in body) + "\n"


def _census_asserts(last: TraceStep | None) -> list[str]:
    """The exact-order census asserts after the failing step (the spec's, recorded)."""
    if last is None:
        return []
    out = []
    if last.available_after is not None:
        out.append(f"assert a.available_size() == {last.available_after}")
    if last.census_after is not None:
        out.append(
            f"assert sorted(a.get_all_free_pages().tolist()) == {compact(last.census_after)!r}"
        )
    if last.free_after is not None:
        out.append(f"assert a.get_all_free_pages().tolist() == {compact(last.free_after)!r}")
    return out


def _call_lines(
    trace: Trace, i: int, step: TraceStep, var: str, calls: list[str], fail: int
) -> tuple[list[str], set[str]]:
    """A step's call, under ``pytest.raises`` when rejected, or with a declared shortage type
    standing for None; returns whether nothing more follows it (a rejected step)."""
    if step.raises is not None:
        return raises_block(trace, step, calls)
    short = step.short_raised is not None or (i == fail and step.expect is None)
    table = calls_for(trace.family)
    if short and trace.shortage_types and table[step.call].kind == "alloc":
        return shortage_block(trace.shortage_types, calls, var)
    return calls, set()


def _exact_step(trace: Trace, i: int, fail: int) -> tuple[list[str], set[str]]:
    step, var = trace.steps[i], f"r{i}"
    shown = _compact_step(step)
    source = _aliasing(trace, i, call_source(shown, var, trace.family))
    if i == fail:  # what the final asserts watch the call with
        source = trace.failing_setup + source
    lines, needed = _call_lines(trace, i, step, var, source, fail)
    if step.raises is not None:
        return lines, needed
    lines = lines + (
        result_asserts(shown, var, trace.family) if i < fail else trace.final_asserts
    )
    if i < fail and registered(trace.family).repro_reads_available and (
            step.available_after is not None):
        # the oracle reads the capacity views after every call: so does the repro (a view
        # cached across calls shows only where it was read before)
        lines.append(f"assert a.available_size() == {step.available_after}")
    return lines + _probes(trace, i, var), needed


CENSUS_NOW = "(a.get_all_free_pages().tolist(), a.available_size())"


def _aliasing(trace: Trace, i: int, lines: list[str]) -> list[str]:
    """A single pool's failing step of an ``ALIAS-2`` failure: the census read before the
    caller reuses its input tensor(s) and asserted unchanged after, as the oracle checks it."""
    step = trace.steps[i]
    reuse = calls_for(trace.family)[step.call].reuse
    if (trace.clause != "ALIAS-2" or i != trace.failing_step
            or not registered(trace.family).census_tensor or not step.clobber
            or reuse not in lines):
        return lines
    at = lines.index(reuse)
    return [*lines[:at], f"seen = {CENSUS_NOW}", reuse,
            f"assert {CENSUS_NOW} == seen  # ALIAS-2: the caller's write reached the allocator",
            *lines[at + 1 :]]


def _probes(trace: Trace, i: int, var: str) -> list[str]:
    """``probe_lines`` of step ``i``; at the failing step of a single pool's ``ALIAS-3``
    failure, between a census read before the writes and an assert that it is unchanged."""
    lines = probe_lines(trace.steps[i], var, trace.family)
    if (trace.clause != "ALIAS-3" or i != trace.failing_step
            or not registered(trace.family).census_tensor):
        return lines
    return [f"seen = {CENSUS_NOW}", *lines,
            f"assert {CENSUS_NOW} == seen  # ALIAS-3: the caller's write reached the allocator"]


def _contract_step(trace: Trace, i: int, writer: ModuleType) -> tuple[list[str], set[str]]:
    """One step of a contract-order repro, written by ``writer`` (:func:`contract_writer`)."""
    step, var = trace.steps[i], f"r{i}"
    fail = trace.failing_step if trace.failing_step is not None else len(trace.steps) - 1
    if step.call == "create":
        setup = writer.create_lines(step, trace.paged)
        probes = _probes(trace, i, var) if i == fail else []  # the constructor diverged
        return call_source(step, var) + setup + ["census()", *probes], set()
    args = mapped_args(step, trace.family)
    shown = replace(step, args=args, expect=compact(step.expect))
    source = _aliasing(trace, i, call_source(shown, var, trace.family))
    if i == fail:  # what the final asserts watch the call with
        source = trace.failing_setup + source
    lines, needed = _call_lines(trace, i, step, var, source, fail)
    if step.raises is not None:
        return lines, needed
    lines = lines + writer.spec_lines(shown, var, args)
    if i == fail and trace.clause == "ALIAS-1":
        lines += [f"assert {line}" for line in _alias_lines(trace)]
    if i == fail and trace.clause == "CAP-3":
        lines.append("assert not a.verify_byte_accounting()  # CAP-3")
    if i == fail:  # a result's dtype (the exact form's assert; pins no page)
        lines += [a for a in trace.final_asserts if a.startswith(f"assert {var}.dtype ")]
    return [*lines, "census()", *_probes(trace, i, var)], needed


def _alias_lines(trace: Trace) -> list[str]:
    """ALIAS-1 in contract order: every earlier result still holds the slots it was given."""
    fail = trace.failing_step if trace.failing_step is not None else len(trace.steps) - 1
    return [
        f"r{k}.tolist() == m({compact(s.expect)!r})  # ALIAS-1"
        for k, s in enumerate(trace.steps[:fail])
        if calls_for(trace.family)[s.call].kind == "alloc" and s.expect and not s.probe
    ]


def probe_lines(step: TraceStep, var: str, family: str = DEFAULT_FAMILY) -> list[str]:
    """The caller's writes after a probed call: garbage into the tensor it got back and into
    ``get_all_free_pages()``'s result (``ALIAS-3``: the allocator must not see them)."""
    if not step.probe:
        return []
    # Only an allocation that handed out slots binds a tensor to ``var``; a capacity hook's
    # answer (a bool or an eviction count) is no tensor to write into.
    kind = calls_for(family)[step.call].kind
    got_slots = kind == "alloc" and isinstance(step.expect, list) and step.expect
    lines = [f"{var}.fill_(-1)  # ALIAS-3: the caller owns this result"] if got_slots else []
    if not registered(family).census_tensor:  # a census the caller gets as a tensor only
        return lines
    return [*lines, "a.get_all_free_pages().fill_(-1)  # ALIAS-3: and this census"]
