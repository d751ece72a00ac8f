"""Traces as pytest functions: the calls as torch source, the asserts between them, a rejected
call under ``pytest.raises`` of the target's declared error types (only a ``ContractViolation``
must name the spec's clause), a shortage raised in a declared type as the None it stands for.
The failing step ends with the family's own asserts (``Trace.final_asserts``).
"""

from __future__ import annotations

import builtins

from .calltables import REPRO_IMPORTS, calls_for
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


def result_asserts(step: TraceStep, var: str, family: str = "single") -> list[str]:
    """Python asserts that the result bound to ``var`` is ``step.expect`` (none for most calls)."""
    checks = calls_for(family)[step.call].checks
    return [] if checks is None else checks(step.args, step.expect, var)


def call_source(step: TraceStep, var: str, family: str = "single") -> list[str]:
    """The torch-level call(s) of one step as Python source; results are bound to ``var``."""
    call = calls_for(family)[step.call]
    lines = call.source(step.args, var)
    return lines + ([call.reuse] if step.clobber and call.reuse else [])


def to_pytest(trace: Trace, factory_path: str, *, name: str = "test_kvpool_repro") -> str:
    """A self-contained pytest function replaying ``trace`` on ``factory_path`` (module:attr).

    Steps before the failing one assert their spec results (so the path is the same); the
    failing step ends with ``final_asserts`` (:mod:`kvpool.oracle.repro`); a rejected step runs
    under ``pytest.raises`` of the target's declared error types.
    """
    module, _, attr = factory_path.partition(":")
    fail = trace.failing_step if trace.failing_step is not None else len(trace.steps) - 1
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
        f"from {module} import {attr} as factory",
        *REPRO_IMPORTS[trace.family],
        "{imports}",
        "",
        f"DEVICE = {trace.device!r}",
        "",
        "def t(values):",
        "    return torch.tensor(values, dtype=torch.int64, device=DEVICE)",
        "",
    ]
    imports: set[str] = set()
    table = calls_for(trace.family)
    for i, step in enumerate(trace.steps[: fail + 1]):
        var = f"r{i}"
        calls = call_source(step, var, trace.family)
        if step.raises is not None:
            lines, needed = raises_block(trace, step, calls)
            body += lines
            imports |= needed
            continue
        short = step.short_raised is not None or (i == fail and step.expect is None)
        if short and trace.shortage_types and table[step.call].kind == "alloc":
            lines, needed = shortage_block(trace.shortage_types, calls, var)
            body += lines
            imports |= needed
        else:
            body += calls
        body += result_asserts(step, var, trace.family) if i < fail else trace.final_asserts
        body += probe_lines(step, var, trace.family)
    last = trace.steps[fail] if trace.steps else None
    if last is not None and last.available_after is not None:
        body.append(f"assert a.available_size() == {last.available_after}")
    if last is not None and last.census_after is not None:
        body.append(f"assert sorted(a.get_all_free_pages().tolist()) == {last.census_after!r}")
    if last is not None and last.free_after is not None:
        body.append(f"assert a.get_all_free_pages().tolist() == {last.free_after!r}")
    slot = body.index("{imports}")
    body[slot : slot + 1] = sorted(imports)
    return f"def {name}():\n" + "\n".join(("    " + line) if line else "" for line in body) + "\n"


def probe_lines(step: TraceStep, var: str, family: str = "single") -> list[str]:
    """The caller's writes after a probed call: garbage into the tensor it got back and into
    ``get_all_free_pages()``'s result (``ALIAS-3``: the allocator must not see them)."""
    if not step.probe:
        return []
    # Only an allocation that handed out slots binds a tensor to ``var``; a capacity hook's
    # answer (a bool or an eviction count) is no tensor to write into.
    kind = calls_for(family)[step.call].kind
    got_slots = kind == "alloc" and isinstance(step.expect, list) and step.expect
    lines = [f"{var}.fill_(-1)  # ALIAS-3: the caller owns this result"] if got_slots else []
    if family != "single":  # only a single pool's census is a tensor the caller gets
        return lines
    return [*lines, "a.get_all_free_pages().fill_(-1)  # ALIAS-3: and this census"]
