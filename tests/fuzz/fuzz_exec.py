"""One fuzz case, run in the current process: build the allocator, replay the calls, judge them.

A case (:mod:`fuzz_cases`) is plain JSON: the allocator (``kind`` token / paged / swa, sizes,
``page_size``, ``need_sort``), valid ``setup`` calls, then the adversarial ``calls``. Every tensor
argument is a spec (:func:`make_tensor`): int values, a dtype, a layout (strided, transposed,
2-D, 0-d, broadcast, offset view) and optionally a ``torch.Tensor`` subclass that lies about its
``numel()``, ``dtype``, contiguity, ``data_ptr()`` or ``len()``. ``run_case(case, target)``
returns a verdict: per call the outcome (result or exception class and clause), the allocator's
state before and after (:func:`snapshot`), its free census after, and the problems found with a
returned slot tensor (:func:`result_issues`). ``target``: ``native`` / ``numpy`` (kvpool's two
CPU backends, by ``KVPOOL_NATIVE``) or ``sglang`` (SGLang 0.5.23, for reference); ``entry``
runs a case of :mod:`fuzz_native` instead (one call of a ``kvpool.impl._native`` function).

Replay one case in a fresh process: ``python tests/fuzz/fuzz_exec.py '<case json>' native``
(or a seed of :func:`fuzz_cases.case_for` instead of the JSON).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from types import SimpleNamespace
from typing import Any

import torch

DTYPES = {"int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
          "uint8": torch.uint8, "float32": torch.float32, "float64": torch.float64,
          "bool": torch.bool}
TARGETS = ("native", "numpy", "sglang", "entry")


# -- tensors that lie about themselves ---------------------------------------------------------
class NumelLies(torch.Tensor):
    """Claims a thousand times its real element count."""

    def numel(self) -> int:  # type: ignore[override]
        return super().numel() * 1000 + 7

    def __len__(self) -> int:
        return super().__len__() * 1000 + 7


class DtypeLies(torch.Tensor):
    """Claims int64 whatever its storage holds."""

    @property
    def dtype(self) -> torch.dtype:  # type: ignore[override]
        return torch.int64


class ContiguityLies(torch.Tensor):
    """Claims to be contiguous (used on strided views)."""

    def is_contiguous(self, *args: Any, **kwargs: Any) -> bool:  # type: ignore[override]
        return True


class NullPointer(torch.Tensor):
    """Claims its data lies at address 8 (unmapped)."""

    def data_ptr(self) -> int:  # type: ignore[override]
        return 8


class ShiftedPointer(torch.Tensor):
    """Claims its data lies 1 MiB past its storage."""

    def data_ptr(self) -> int:  # type: ignore[override]
        return int(super().data_ptr()) + (1 << 20)


class LenLies(torch.Tensor):
    """Claims a length near 2**40."""

    def __len__(self) -> int:
        return 1 << 40


LIARS = {"numel": NumelLies, "dtype": DtypeLies, "contig": ContiguityLies,
         "nullptr": NullPointer, "shiftptr": ShiftedPointer, "len": LenLies}


def make_tensor(spec: dict[str, Any]) -> torch.Tensor:
    """The tensor a spec describes: ``values`` (ints) cast to ``dtype`` (wrapping), laid out as
    ``layout``, viewed as the lying subclass ``lie`` (None: an exact ``torch.Tensor``)."""
    values = torch.tensor(spec["values"], dtype=torch.int64).to(DTYPES[spec["dtype"]])
    n = values.numel()
    layout = spec.get("layout", "contig")
    if layout == "strided":  # every other element of a buffer twice as long
        buf = torch.zeros(2 * n, dtype=values.dtype)
        buf[::2] = values
        t = buf[::2]
    elif layout == "offset":  # a view that starts inside its storage
        buf = torch.zeros(n + 3, dtype=values.dtype)
        buf[3:] = values
        t = buf[3:]
    elif layout == "transposed" and n % 2 == 0 and n:
        t = values.reshape(2, n // 2).t()
    elif layout == "row2d":
        t = values.reshape(1, n)
    elif layout == "col2d":
        t = values.reshape(n, 1)
    elif layout == "scalar" and n == 1:
        t = values.reshape(())
    elif layout == "broadcast" and n:  # stride 0: the first value n times
        t = values[:1].expand(n)
    else:
        t = values
    lie = spec.get("lie")
    return t.as_subclass(LIARS[lie]) if lie else t


def materialize(arg: Any) -> Any:
    """Tensor specs become tensors; lists (segments) and other values pass through."""
    if isinstance(arg, dict) and "values" in arg:
        return make_tensor(arg)
    if isinstance(arg, list):
        return [materialize(a) for a in arg]
    if isinstance(arg, dict):
        return {k: materialize(v) for k, v in arg.items()}
    return arg


def segments_arg(arg: Any) -> Any:
    """``free_segments``' argument: a list of (tensor, start_pos) pairs."""
    return [(t, s) for t, s in arg]


# -- the allocators ----------------------------------------------------------------------------
def build(alloc: dict[str, Any], target: str) -> Any:
    """The allocator of the case on ``target`` (unchecked: the default fast path)."""
    from kvpool.oracle.families.hybrid import targets as hybrid_targets
    from kvpool.oracle.families.single import targets

    kind, ps, ns = alloc["kind"], alloc["page_size"], alloc["need_sort"]
    if kind == "swa":
        make = hybrid_targets.sglang_swa if target == "sglang" else \
            hybrid_targets.kvpool_swa_unchecked
        return make(size=alloc["size"], size_swa=alloc["size_swa"], page_size=ps, need_sort=ns)
    prefix = "sglang" if target == "sglang" else "kvpool"
    suffix = "" if target == "sglang" else "_unchecked"
    make = getattr(targets, f"{prefix}_{kind}{suffix}")
    return make(size=alloc["size"], page_size=ps, need_sort=ns)


def _pages(t: Any) -> list[int] | None:
    if t is None:
        return None
    return [int(v) for v in t.reshape(-1).tolist()]


def snapshot(a: Any) -> dict[str, Any]:
    """Everything observable of the allocator's state: sizes, free and staged lists in order,
    the open group (kvpool: its deferred pages; SGLang: the group's length), per side for SWA."""
    if hasattr(a, "full_attn_allocator"):
        mapping = getattr(a, "full_to_swa_index_mapping", None)
        return {"available": int(a.available_size()),
                "full": snapshot(a.full_attn_allocator), "swa": snapshot(a.swa_attn_allocator),
                "mapping": _pages(mapping),
                "group": None if a.free_group is None else len(a.free_group)}
    out: dict[str, Any] = {"size": a.size, "available": int(a.available_size()),
                           "free": _pages(a.free_pages), "staged": _pages(a.release_pages)}
    group = getattr(a, "free_group", None)
    if hasattr(a, "deferred_pages"):
        out["group"] = None if group is None else a.deferred_pages()
    else:
        out["group"] = None if group is None else len(group)
    return out


def safe_snapshot(a: Any) -> dict[str, Any]:
    """:func:`snapshot`, or ``{"unreadable": ...}`` when the state cannot even be read."""
    try:
        return snapshot(a)
    except Exception as exc:  # a corrupted state: reported, never a harness error
        return {"unreadable": f"{type(exc).__name__}: {exc}"[:200]}


def census_problems(a: Any) -> list[str]:
    """kvpool's free census and buffer invariants (empty when healthy); [] for SGLang."""
    if not hasattr(a, "check_invariants"):
        return []
    sides = [a.full_attn_allocator, a.swa_attn_allocator] if hasattr(a, "full_attn_allocator") \
        else [a]
    problems: list[str] = []
    for side in sides:
        try:
            side.check_invariants()
        except Exception as exc:  # AssertionError, or a state too broken to read
            problems.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    return problems


def free_set(snap: dict[str, Any]) -> set[int]:
    """The pages free or staged in a (single-pool) snapshot."""
    side = snap.get("full", snap)
    return set(side["free"] or []) | set(side["staged"] or [])


def result_issues(out: Any, before: dict[str, Any], after: dict[str, Any], ps: int,
                  last_loc: list[int]) -> list[str]:
    """Why a returned slot tensor was not computed from the pool (empty: it was).

    Every slot must lie on a page that was free or staged before the call and is not after
    (taken by this call), or continue one of the caller's ``last_loc`` slots on its page
    (``last_loc < slot <= last_loc + ps``, modulo 2**64); the pages taken must be
    ``available_size()``'s drop."""
    if not isinstance(out, torch.Tensor):
        return [f"returned {type(out).__name__}, not a tensor"]
    out = out.as_subclass(torch.Tensor)  # torch passes an input's subclass on: read the data
    if out.dtype != torch.int64 or out.dim() != 1:
        return [f"returned {out.dtype} of shape {tuple(out.shape)}"]
    if "unreadable" in before or "unreadable" in after:
        return [f"state unreadable: {before.get('unreadable') or after.get('unreadable')}"]
    taken = free_set(before) - free_set(after)
    returned = free_set(after) - free_set(before)
    if returned:
        return [f"pages became free during an allocation: {sorted(returned)[:8]}"]
    issues = []
    drop = before["available"] - after["available"]
    if drop != len(taken) * ps:
        issues.append(f"available_size dropped by {drop}, {len(taken)} pages left the free list")
    bad = [v for v in out.tolist() if v // ps not in taken
           and not any((v - loc - 1) % 2**64 < ps for loc in last_loc)]
    if bad:
        issues.append(f"{len(bad)} slots not from a taken page nor after a last_loc: {bad[:8]}")
    return issues


# -- running a case ----------------------------------------------------------------------------
def _call(a: Any, call: dict[str, Any]) -> Any:
    method, args = call["method"], materialize(call.get("args", []))
    kwargs = materialize(call.get("kwargs", {}))
    if method.endswith("_segments"):
        args = [segments_arg(args[0])]
    if method == "resize":  # SGLang's server config, read for max_total_num_tokens only
        args = [SimpleNamespace(max_total_num_tokens=args[0])]
    if method == "__abort__":
        os.abort()
    if method == "__null_read__":
        return ctypes.c_int64.from_address(16).value  # an unmapped address: SIGSEGV
    if method == "__exit__":
        os._exit(3)
    return getattr(a, method)(*args, **kwargs)


def _last_locs(call: dict[str, Any]) -> list[int]:
    if call["method"] not in ("alloc_extend", "alloc_decode"):
        return []
    spec = call["args"][4 if call["method"] == "alloc_extend" else 2]
    return [int(v) for v in spec["values"]] if isinstance(spec, dict) else []


def _outcome(a: Any, call: dict[str, Any], ps: int) -> dict[str, Any]:
    before = safe_snapshot(a)
    record: dict[str, Any] = {"method": call["method"]}
    try:
        out = _call(a, call)
    except Exception as exc:  # every exception class is part of the verdict
        record.update(raised=type(exc).__name__, clause=getattr(exc, "clause", None),
                      message=str(exc)[:240])
        out = None
    else:
        record["raised"] = None
        if call["method"].startswith("alloc") and out is not None:
            record["issues"] = result_issues(out, before, safe_snapshot(a), ps,
                                             _last_locs(call))
            out = [int(v) for v in out.reshape(-1).tolist()] if isinstance(
                out, torch.Tensor) else repr(out)[:80]
        elif isinstance(out, torch.Tensor):
            out = _pages(out)
        elif not isinstance(out, int | float | bool | type(None)):
            out = repr(out)[:80]
        record["result"] = out
    record["before"], record["after"] = before, safe_snapshot(a)
    record["census"] = census_problems(a)
    return record


def run_case(case: dict[str, Any], target: str) -> dict[str, Any]:
    """The verdict of one case on one target (see the module docstring)."""
    if target == "entry":
        import fuzz_native

        return fuzz_native.run_call(case)
    if target == "numpy":
        os.environ["KVPOOL_NATIVE"] = "0"
    elif target == "native":
        os.environ.pop("KVPOOL_NATIVE", None)
    a = build(case["alloc"], target)
    backend = type(getattr(getattr(a, "full_attn_allocator", a), "_ops", None)).__name__
    for call in case.get("setup", []):
        _call(a, call)
    ps = case["alloc"]["page_size"]
    return {"target": target, "backend": backend,
            "calls": [_outcome(a, call, ps) for call in case["calls"]]}


if __name__ == "__main__":  # replay: fuzz_exec.py '<case json>'|<seed> [native|numpy|sglang|entry]
    if sys.argv[1].isdigit() and sys.argv[2:3] == ["entry"]:
        from fuzz_native import native_case_for

        replayed = native_case_for(int(sys.argv[1]))
    elif sys.argv[1].isdigit():
        from fuzz_cases import case_for

        replayed = case_for(int(sys.argv[1]))
    else:
        replayed = json.loads(sys.argv[1])
    print(json.dumps(run_case(replayed, sys.argv[2] if len(sys.argv) > 2 else "native"),
                     indent=1))
