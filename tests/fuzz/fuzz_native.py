"""Hostile calls of every entry point of the compiled extension (``kvpool.impl._native``).

A case (plain JSON, :func:`native_case_for`) names one function and its arguments as specs: a
valid call of it with one argument (the systematic table) or several (the seeded mixes)
replaced by a hostile value of the same role: a page size of 0, negative or beyond int64; a
count or position that is negative, huge or beyond int64; a tensor of another dtype or layout,
empty, of another length, or one that lies about itself (``fuzz_exec.LIARS``), or a bare
address; a buffer of another item type, byte order or layout, read-only, empty, shorter or
longer, or not a buffer at all; an ownership bitmap too short, read-only or of another item
size; a ``runs`` list of non-ints or ints beyond int64. :func:`run_call` runs one case in the
current process (the fork server runs it in a child) and judges it:

- every int64 buffer and bitmap lies between sentinel words that must survive the call;
- a raise leaves every buffer and bitmap as it was;
- a result is the one the loop documents, computed here from the arguments with int64
  wrap-around (:data:`CHECKS`), and None (an input the loop leaves to the numpy form) writes
  nothing.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import numpy as np
import torch
from fuzz_exec import make_tensor

INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
SENTINEL, BIT_SENTINEL, MARGIN = -0x5A5A5A5A5A5A5A5B, 0xA5, 4


def t(values: list[int]) -> dict[str, Any]:
    """A valid tensor spec (int64, contiguous)."""
    return {"kind": "tensor", "tensor": {"values": values, "dtype": "int64", "layout": "contig"}}


def buf(values: list[int], role: str = "rbuf") -> dict[str, Any]:
    """A valid int64 buffer spec; ``role`` rbuf (read) or wbuf (written)."""
    return {"kind": "buf", "role": role, "values": values, "dtype": "int64", "layout": "margin"}


def num(value: int, role: str = "int") -> dict[str, Any]:
    """An int spec; ``role``: ps, int (a count or position), tokens, flag."""
    return {"kind": "int", "role": role, "value": value}


def bits(*pages: int, num_bytes: int = 4) -> dict[str, Any]:
    """An ownership bitmap spec with ``pages`` set."""
    return {"kind": "bits", "num_bytes": num_bytes, "set": list(pages), "form": "margin"}


NONE = {"kind": "obj", "role": "runs", "name": "none"}
PS = num(4, "ps")

# valid calls: the arguments of each entry point, in order
BASELINES: dict[str, list[dict[str, Any]]] = {
    "extend_count": [t([0, 3]), t([5, 9]), PS],
    "extend_layout": [t([0, 3]), t([5, 9]), t([-1, 30]), buf([11, 12, 13, 14]), PS,
                      num(11, "tokens")],
    "decode_count": [t([5, 9, 6]), PS],
    "decode_layout": [t([5, 9, 6]), t([3, 30, 41]), buf([11, 12]), PS],
    "page_ids": [t([0, 5, 17, -3]), PS, buf([0] * 4, "wbuf")],
    "segment_page_ids": [t(list(range(64, 74))), num(0), PS, num(1), buf([0] * 3, "wbuf")],
    "write_at": [buf([0] * 8, "wbuf"), num(2), t([7, 3, 9])],
    "copy_into": [buf([0] * 8, "wbuf"), num(2), buf([7, 3, 9])],
    "distinct_runs": [buf([5, 5, 3, 3, 9, 1], "wbuf")],
    "merge_below": [buf([1, 4, 8, 20]), buf([2, 9]), buf([0] * 6, "wbuf")],
    "sort_values": [buf([5, 1, 4, 1, 9], "wbuf")],
    "merge_front": [buf([0, 7, 3, 0, 1, 2, 5, 9], "wbuf"), num(4), num(1), num(2), NONE],
    "ascends_across": [buf([1, 3, 2]), num(1)],
    "defer": [t([0, 5, 17]), PS],
    "release": [PS, dict(t([16, 17, 40]), role="source"), num(1, "flag"), buf([0] * 8, "wbuf"),
                num(8), num(1, "flag"), num(8), bits(4, 10)],
    "slots_at": [PS, buf([3, 5, 7, 9]), num(1), num(2), bits()],
    "extend_take": [PS, buf([0, 0, 0, 0, 11, 12, 13, 14, 15], "wbuf"), num(4), num(0), num(-1),
                    NONE, t([0, 3]), t([0, 3]), t([5, 9]), t([5, 9]), t([-1, 30]),
                    num(11, "tokens"), bits(7)],
    "decode_take": [PS, buf([0, 0, 11, 12, 13], "wbuf"), num(2), num(0), num(-1), NONE,
                    t([5, 9, 6]), t([5, 9, 6]), t([3, 30, 41]), bits(10)],
}

# -- hostile values per role -------------------------------------------------------------------
BIG_INTS = [-1, 0, 1, 7, 2**31, 2**62, INT64_MAX, INT64_MIN, 2**63, -(2**64) - 1]
OBJECTS = ["none", "str", "float", "list"]


def _ints(role: str) -> list[dict[str, Any]]:
    values = {"ps": [0, -1, -4, INT64_MIN, 2**63, 2**64 + 4, 1, 3, 2**62, INT64_MAX],
              "tokens": [*BIG_INTS, 10, 12], "flag": [0, 1, 2]}.get(role, BIG_INTS)
    out = [num(v, role) for v in values]
    return out + [{"kind": "obj", "role": role, "name": n} for n in OBJECTS if role != "flag"]


def _tensors(good: dict[str, Any]) -> list[dict[str, Any]]:
    spec = good["tensor"]
    values = spec["values"]
    out = [dict(spec, dtype=d) for d in ("int32", "float64", "bool", "uint8")]
    out += [dict(spec, layout=lay) for lay in ("strided", "offset", "transposed", "row2d",
                                               "col2d", "scalar", "broadcast")]
    out += [dict(spec, lie=lie) for lie in ("numel", "dtype", "contig", "nullptr", "shiftptr",
                                            "len")]
    out += [dict(spec, values=v) for v in ([], [*values, 1], values[:-1],
                                           [INT64_MAX] * len(values), [INT64_MIN] * len(values))]
    return [*(dict(good, tensor=s) for s in out), num(0), num(8),
            {"kind": "obj", "role": "tensor", "name": "none"},
            {"kind": "obj", "role": "tensor", "name": "list"},
            dict(good, kind="buf", layout="margin", dtype="int64", values=values)]


def _buffers(good: dict[str, Any]) -> list[dict[str, Any]]:
    values = good["values"]
    out = [dict(good, dtype=d) for d in ("int32", "float64", "uint64", ">i8", "bool")]
    out += [dict(good, layout=lay) for lay in ("strided", "readonly", "2d", "bytearray",
                                               "bytes", "memoryview", "tensor", "list")]
    out += [dict(good, values=v) for v in ([], values[:-1], [*values, 0],
                                           [INT64_MAX] * len(values), [INT64_MIN] * len(values))]
    return [*out, num(0), {"kind": "obj", "role": "buf", "name": "none"}]


def _bitmaps(good: dict[str, Any]) -> list[dict[str, Any]]:
    out = [dict(good, num_bytes=n) for n in (0, 1)]
    out += [dict(good, num_bytes=64, set=list(range(512)))]
    out += [dict(good, form=f) for f in ("int64", "readonly", "strided", "bytes", "bytearray")]
    return [*out, num(0), {"kind": "obj", "role": "bits", "name": "none"}]


def _runs() -> list[dict[str, Any]]:
    lists: list[list[Any]] = [[], [0], [-1], [1], [10**6], [2**70], ["x"], [1.5], [1, 1, 1]]
    return [{"kind": "runs", "values": v} for v in lists] + [
        {"kind": "obj", "role": "runs", "name": n} for n in ("none", "str", "tuple")]


def _parts() -> list[dict[str, Any]]:
    pieces: list[list[Any]] = [[[16, 17]], [[16], [40, 41]], [], [[INT64_MAX, INT64_MIN]],
                               [[-1]], [[0] * 600], ["odd"], ["bytes"], ["int"]]
    return [{"kind": "parts", "pieces": p} for p in pieces]


def hostile(good: dict[str, Any]) -> list[dict[str, Any]]:
    """The hostile replacements of one argument spec."""
    if good["kind"] == "tensor":
        return _tensors(good) + (_parts() if good.get("role") == "source" else [])
    if good["kind"] == "buf":
        return _buffers(good)
    if good["kind"] == "bits":
        return _bitmaps(good)
    if good.get("role") == "runs":
        return _runs()
    return _ints(good["role"])


def _table() -> list[dict[str, Any]]:
    cases = [{"entry": name, "args": args, "label": "valid"} for name, args in BASELINES.items()]
    for name, args in BASELINES.items():
        for i, good in enumerate(args):
            for j, bad in enumerate(hostile(good)):
                changed = list(args)
                changed[i] = bad
                cases.append({"entry": name, "args": changed, "label": f"arg {i} variant {j}"})
    return cases


TABLE = _table()


def native_case_for(index: int) -> dict[str, Any]:
    """Case ``index``: the table's first, then seeded mixes (each argument replaced with
    probability 0.3); a pure function of ``index``."""
    if index < len(TABLE):
        return dict(TABLE[index], index=index)
    rng = random.Random(index)
    name = rng.choice(sorted(BASELINES))
    args = [rng.choice(hostile(a)) if rng.random() < 0.3 else a for a in BASELINES[name]]
    return {"entry": name, "args": args, "label": f"mix {index}", "index": index}


# -- building the arguments --------------------------------------------------------------------
class Guarded:
    """The arrays made for a call, each inside a larger one whose margins hold sentinels."""

    def __init__(self) -> None:
        self.margins: list[tuple[np.ndarray, Any]] = []

    def keep(self, whole: np.ndarray, sentinel: Any) -> None:
        self.margins.append((whole, sentinel))

    def broken(self) -> bool:
        """True when a write landed outside an array's own span."""
        return any(not (w[:MARGIN] == s).all() or not (w[w.size - MARGIN:] == s).all()
                   for w, s in self.margins)


def _int64_buffer(spec: dict[str, Any], guard: Guarded) -> Any:
    values, layout, dtype = spec["values"], spec["layout"], spec["dtype"]
    exact = np.array(values, dtype=np.int64)
    if dtype != "int64":
        return exact.astype(dtype)
    if layout == "margin":
        whole = np.full(exact.size + 2 * MARGIN, SENTINEL, dtype=np.int64)
        whole[MARGIN : MARGIN + exact.size] = exact
        guard.keep(whole, SENTINEL)
        return whole[MARGIN : MARGIN + exact.size]
    if layout == "strided":
        return np.repeat(exact, 2)[::2] if exact.size > 1 else np.zeros(4, dtype=np.int64)[::2]
    if layout == "readonly":
        exact.flags.writeable = False
        return exact
    return {"2d": lambda: exact.reshape(1, -1), "bytearray": lambda: bytearray(exact.tobytes()),
            "bytes": lambda: exact.tobytes(),
            "memoryview": lambda: memoryview(bytearray(exact.tobytes())).cast("q"),
            "tensor": lambda: torch.from_numpy(exact), "list": lambda: values}[layout]()


def _bitmap(spec: dict[str, Any], guard: Guarded) -> Any:
    size, form = spec["num_bytes"], spec["form"]
    raw = np.zeros(size, dtype=np.uint8)
    for page in spec["set"]:
        if 0 <= page < 8 * size:
            raw[page >> 3] |= 1 << (page & 7)
    if form == "margin":
        whole = np.full(size + 2 * MARGIN, BIT_SENTINEL, dtype=np.uint8)
        whole[MARGIN : MARGIN + size] = raw
        guard.keep(whole, BIT_SENTINEL)
        return whole[MARGIN : MARGIN + size]
    if form == "readonly":
        raw.flags.writeable = False
        return raw
    return {"int64": lambda: raw.astype(np.int64), "strided": lambda: np.repeat(raw, 2)[::2],
            "bytes": lambda: raw.tobytes(), "bytearray": lambda: bytearray(raw.tobytes())}[form]()


def _piece(piece: Any) -> Any:
    if isinstance(piece, list):
        return bytearray(np.array(piece, dtype=np.int64).tobytes())
    return {"odd": bytearray(7), "bytes": b"\0" * 8, "int": 5}[piece]


def build(spec: dict[str, Any], guard: Guarded) -> Any:
    """The Python object a spec describes."""
    kind = spec["kind"]
    if kind == "int":
        return spec["value"]
    if kind == "obj":
        return {"none": None, "str": "4", "float": 4.0, "list": [1, 2], "tuple": (1,)}[
            spec["name"]]
    if kind == "tensor":
        return make_tensor(spec["tensor"])
    if kind == "buf":
        return _int64_buffer(spec, guard)
    if kind == "bits":
        return _bitmap(spec, guard)
    if kind == "parts":
        return [_piece(p) for p in spec["pieces"]]
    return list(spec["values"])  # runs


# -- the reference ------------------------------------------------------------------------------
def w(x: int) -> int:
    """``x`` wrapped to int64 (the loops' arithmetic)."""
    return (x + 2**63) % 2**64 - 2**63


def readable(x: Any) -> list[int] | None:
    """The values of a tensor the loops read (exact type, int64, CPU, contiguous), else None."""
    if type(x) is torch.Tensor and x.dtype == torch.int64 and x.is_cpu and x.is_contiguous():
        return [int(v) for v in x.reshape(-1).tolist()]
    return None


def snapshot(x: Any) -> list[int] | None:
    """The values of an array argument (int64 values or bitmap bytes), to compare before and
    after; None for anything else."""
    if isinstance(x, np.ndarray):
        return [int(v) for v in x.reshape(-1).tolist()]
    if isinstance(x, memoryview):
        return [int(v) for v in x.tolist()]
    if isinstance(x, bytearray):
        return list(x)
    return None


def count_extend(pre: list[int], seq: list[int], ps: int) -> int:
    return w(sum(w(s + ps - 1) // ps - w(p + ps - 1) // ps for p, s in zip(pre, seq)))


def extend_slots(pre: list[int], seq: list[int], last: list[int], pages: list[int],
                 ps: int) -> list[int] | None:
    """The extend layout of a regular batch on exactly ``pages`` (None: another count)."""
    out: list[int] = []
    page = 0
    for p, s, loc in zip(pre, seq, last):
        e = s - p
        first = min(w(-p) % ps, e)
        out += [w(loc + 1 + i) for i in range(first)]
        for done in range(0, e - first, ps):
            if page == len(pages):
                return None
            out += [w(pages[page] * ps + i) for i in range(min(ps, e - first - done))]
            page += 1
    return out if page == len(pages) else None


def decode_slots(seq: list[int], last: list[int], pages: list[int], ps: int) -> list[int]:
    out, rank = [], 0
    for s, loc in zip(seq, last):
        if pages and s % ps == 1 % ps:
            out.append(w(pages[min(rank, len(pages) - 1)] * ps))
            rank += 1
        else:
            out.append(w(loc + 1))
    return out


def segment(slots: list[int], start: int, ps: int, offset: int) -> list[int]:
    seg = slots[start:]
    return [seg[0] // ps] + [seg[i] // ps for i in range(ps - offset, len(seg), ps)]


def bits_after(before: list[int], pages: list[int], value: int) -> list[int]:
    """A bitmap's bytes with the bits of ``pages`` inside it set (1) or cleared (0)."""
    out = list(before)
    for page in pages:
        if 0 <= page < 8 * len(out):
            mask = 1 << (page & 7)
            out[page >> 3] = out[page >> 3] | mask if value else out[page >> 3] & ~mask
    return out


def ascending(values: list[int]) -> bool:
    return all(a <= b for a, b in pairwise(values))


def compressed(values: list[int]) -> list[int]:
    """``values`` with every run of equal values as one entry."""
    return [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]


class Call:
    """One call's arguments, their array values before and after, and its result."""

    def __init__(self, args: list[Any], before: list[list[int] | None], result: Any) -> None:
        self.args, self.before, self.result = args, before, result
        self.after = [snapshot(a) for a in args]

    def expect(self, changes: dict[int, list[int]]) -> list[str]:
        """Problems unless argument i now holds ``changes[i]`` and every other is unchanged."""
        want = [changes.get(i, b) for i, b in enumerate(self.before)]
        return [] if self.after == want else [f"arrays {self.after} != expected {want}"]

    def patched(self, index: int, start: int, values: list[int]) -> list[int]:
        """Argument ``index``'s values before, with ``values`` written from ``start``."""
        out = list(self.before[index] or [])
        out[start : start + len(values)] = values
        return out

    def tensor(self, index: int) -> list[int]:
        """A tensor argument's values; AssertionError when the loops must not have read it."""
        values = readable(self.args[index])
        assert values is not None, f"argument {index} is not a tensor the loops read"
        return values


def _flag(ok: bool, what: str) -> list[str]:
    return [] if ok else [what]


def check_page_ids(c: Call) -> list[str]:
    ps = c.args[1]
    return c.expect({2: [v // ps for v in c.tensor(0)]})


def check_segment(c: Call) -> list[str]:
    _, start, ps, offset, _ = c.args
    return c.expect({4: segment(c.tensor(0), start, ps, offset)})


def check_write_at(c: Call) -> list[str]:
    return c.expect({0: c.patched(0, c.args[1], c.tensor(2))})


def check_copy_into(c: Call) -> list[str]:
    src = c.before[2]
    return c.expect({0: c.patched(0, c.args[1], src or [])}) + _flag(src is not None, "src?")


def check_extend_count(c: Call) -> list[str]:
    want = count_extend(c.tensor(0), c.tensor(1), c.args[2])
    return c.expect({}) + _flag(c.result == want, f"count {c.result} != {want}")


def check_extend_layout(c: Call) -> list[str]:
    if c.result is False:
        return c.expect({})
    pre, seq, last, tokens = c.tensor(0), c.tensor(1), c.tensor(2), c.args[5]
    regular = all(s >= p for p, s in zip(pre, seq)) and sum(seq) - sum(pre) == tokens
    want = extend_slots(pre, seq, last, c.before[3] or [], c.args[4]) if regular else None
    got = c.result.tolist() if isinstance(c.result, torch.Tensor) else c.result
    return c.expect({}) + _flag(want is not None and got == want, f"slots {got} != {want}")


def check_decode_count(c: Call) -> list[str]:
    ps = c.args[1]
    want = sum(s % ps == 1 % ps for s in c.tensor(0))
    return c.expect({}) + _flag(c.result == want, f"count {c.result} != {want}")


def check_decode_layout(c: Call) -> list[str]:
    want = decode_slots(c.tensor(0), c.tensor(1), c.before[2] or [], c.args[3])
    got = c.result.tolist() if isinstance(c.result, torch.Tensor) else c.result
    return c.expect({}) + _flag(got == want and len(c.tensor(0)) == len(want),
                                f"slots {got} != {want}")


def check_distinct_runs(c: Call) -> list[str]:
    before, k = c.before[0] or [], c.result
    head = sorted(set(before)) if k >= 0 else compressed(before)
    problems = _flag(abs(k) == len(head), f"k {k} for {len(head)} entries")
    return problems + c.expect({0: head + before[len(head):]})


def check_merge_below(c: Call) -> list[str]:
    free, staged, below = c.before[0] or [], c.before[1] or [], c.result
    if below == -1:
        return c.expect({}) + _flag(not staged or not ascending(staged), "refused a merge")
    if not (staged and ascending(staged) and 0 <= below <= len(free)):
        return [f"below {below} for free {free}, staged {staged}"]
    merged = sorted(free[:below] + staged)
    if ascending(free) and below != sum(f < staged[-1] for f in free):
        return [f"below {below} for free {free}, staged {staged}"]
    if not ascending(free):  # outside the contract: the same values, in some order
        got = (c.after[2] or [])[: len(merged)]
        return _flag(Counter(got) == Counter(merged), "lost values")
    return c.expect({2: c.patched(2, 0, merged)})


def check_sort_values(c: Call) -> list[str]:
    before = c.before[0] or []
    if c.result is False:
        return c.expect({}) + _flag(max(before) - min(before) >= 2**33, "declined a sort")
    return c.expect({0: sorted(before)})


def check_merge_front(c: Call) -> list[str]:
    buf, top, base, count, runs = c.before[0] or [], *c.args[1:]
    if c.result is False:
        return c.expect({})
    merged, region = buf[top:] + buf[base : base + count], (c.after[0] or [])[top - count:]
    problems = _flag(Counter(region) == Counter(merged), "the merge lost or made values")
    if not isinstance(runs, list) and ascending(buf[top:]):
        problems += _flag(region == sorted(merged), f"merged {region}")
    return problems + _flag((c.after[0] or [])[:base] == buf[:base], "wrote below the staging")


def check_ascends_across(c: Call) -> list[str]:
    v, i = c.before[0] or [], c.args[1]
    return _flag(c.result == (i <= 0 or i >= len(v) or v[i - 1] < v[i]), "wrong answer")


def check_defer(c: Call) -> list[str]:
    got = np.frombuffer(c.result, dtype=np.int64).tolist()
    return c.expect({}) + _flag(got == [v // c.args[1] for v in c.tensor(0)], f"pages {got}")


def _released(c: Call) -> list[int]:
    ps, source, dedup = c.args[0], c.args[1], c.args[2]
    if isinstance(source, list):
        pages = np.frombuffer(bytearray().join(source), dtype=np.int64).tolist()
    else:
        pages = [v // ps for v in c.tensor(1)]
    return sorted(set(pages)) if dedup else pages


def check_release(c: Call) -> list[str]:
    _, _, _, _, at, backwards, room, owners = c.args
    pages, k = _released(c), c.result
    if k < 0:
        return c.expect({}) + _flag(-1 - k == len(pages) > room, f"refused {k}")
    size = len(c.before[3] or [])
    start = ((at - k) if backwards else at) % size if size else 0
    want = list(c.before[3] or [])
    for i, page in enumerate(pages):
        want[(start + i) % size] = page
    changes = {3: want}
    if owners is not None:
        changes[7] = bits_after(c.before[7] or [], pages, 0)
    return _flag(k == len(pages), f"k {k} for {len(pages)} pages") + c.expect(changes)


def check_slots_at(c: Call) -> list[str]:
    ps, _, start, num_pages, owners = c.args
    buf = c.before[1] or []
    pages = [buf[(start + i) % len(buf)] for i in range(num_pages)]
    want = [w(p * ps + j) for p in pages for j in range(ps)]
    changes = {} if owners is None else {4: bits_after(c.before[4] or [], pages, 1)}
    return _flag(c.result.tolist() == want, "slots") + c.expect(changes)


def check_take(c: Call) -> list[str]:
    """extend_take / decode_take: a refusal moves nothing; an answer's merge keeps the list's
    values, its pages come off the list's front, its slots are the layout on them."""
    extend = len(c.args) == 13
    if c.result is None or c.result is False:
        return c.expect({})
    out, top_after, staged_after = c.result
    buf, top, staged, base = c.before[1] or [], c.args[2], c.args[3], c.args[4]
    merged = staged_after != staged
    top_m = top - staged if merged else top
    after = c.after[1] or []
    problems = _flag(0 <= top_m <= top_after <= len(buf), f"top {top} -> {top_after}")
    if merged:
        kept = Counter(buf[top:] + buf[base : base + staged])
        problems += _flag(Counter(after[top_m:]) == kept, "the merge lost or made values")
    elif after != buf:
        problems.append("the free list changed without a merge")
    pages = after[top_m:top_after]
    owners = c.args[12 if extend else 9]
    changes = {1: after}
    if owners is not None:
        changes[12 if extend else 9] = bits_after(c.before[12 if extend else 9] or [], pages, 1)
    if not isinstance(out, torch.Tensor):
        return problems + _flag(out is None or out is False, f"answer {out!r}") + c.expect(
            {1: after})
    ps = c.args[0]
    if extend:
        pre, seq, last = c.tensor(6), c.tensor(8), c.tensor(10)
        count = count_extend(c.tensor(7), c.tensor(9), ps)
        want = extend_slots(pre, seq, last, pages, ps)
    else:
        seq, last = c.tensor(6), c.tensor(8)
        count = len(seq) if ps == 1 else sum(s % ps == 1 % ps for s in c.tensor(7))
        want = decode_slots(seq, last, pages, ps)
    problems += _flag(count == len(pages), f"took {len(pages)} pages for {count}")
    return problems + _flag(out.tolist() == want, f"slots {out.tolist()} != {want}") + \
        c.expect(changes)


CHECKS: dict[str, Callable[[Call], list[str]]] = {
    "page_ids": check_page_ids, "segment_page_ids": check_segment, "write_at": check_write_at,
    "copy_into": check_copy_into, "extend_count": check_extend_count,
    "extend_layout": check_extend_layout, "decode_count": check_decode_count,
    "decode_layout": check_decode_layout, "distinct_runs": check_distinct_runs,
    "merge_below": check_merge_below, "sort_values": check_sort_values,
    "merge_front": check_merge_front, "ascends_across": check_ascends_across,
    "defer": check_defer, "release": check_release, "slots_at": check_slots_at,
    "extend_take": check_take, "decode_take": check_take,
}
# the functions whose None is an answer, not "left to the numpy form" (nothing to check more)
NONE_IS_AN_ANSWER = {"copy_into"}


def run_call(case: dict[str, Any]) -> dict[str, Any]:
    """Runs one case in this process and judges it (module docstring): the verdict's
    ``problems`` is empty when the call raised a Python exception with nothing written, or
    returned its documented result."""
    from kvpool.impl import _native  # type: ignore[attr-defined]

    guard = Guarded()
    args = [build(spec, guard) for spec in case["args"]]
    before = [snapshot(a) for a in args]
    verdict: dict[str, Any] = {"entry": case["entry"], "label": case["label"]}
    try:
        result = getattr(_native, case["entry"])(*args)
    except Exception as exc:  # a Python exception is an allowed answer: judged below
        verdict.update(raised=type(exc).__name__, message=str(exc)[:200])
        problems = _flag([snapshot(a) for a in args] == before, "raised after writing")
        problems += _flag(not isinstance(exc, SystemError), "SystemError: a C-level slip")
    else:
        verdict.update(raised=None, result=repr(result)[:200])
        call = Call(args, before, result)
        try:
            if result is None and case["entry"] not in NONE_IS_AN_ANSWER:
                problems = call.expect({})
            else:
                problems = CHECKS[case["entry"]](call)
        except (AssertionError, TypeError, ValueError, IndexError, ZeroDivisionError) as exc:
            problems = [f"a result the arguments do not allow: {type(exc).__name__}: {exc}"]
    if guard.broken():
        problems.append("a write landed outside its buffer (a sentinel changed)")
    verdict["problems"] = problems
    return verdict
