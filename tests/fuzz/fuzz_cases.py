"""Adversarial but type-correct calls, each case derived from one integer seed.

``case_for(seed)`` is a pure function of ``seed`` (``random.Random(seed)``; no clock, no global
state): an allocator (token, paged or SWA; page size 1, 4 or 16; ``need_sort`` on or off), a
valid ``setup`` that hands out pages ``1..held`` (and with ``need_sort`` stages the last one
back), then one adversarial scenario. Every tensor is a spec for :func:`fuzz_exec.make_tensor`.

Scenarios: bad ids in ``free`` / ``free_page_ids`` / ``free_segments`` / a free group (negative,
page 0, out of range, exactly at the pool's bounds, near the int64 limits, a page not handed
out, a page named twice), ``alloc`` sizes near the limits, ``alloc_extend`` / ``alloc_decode``
batches that disagree with themselves (lengths, ``*_cpu`` copies, ``extend_num_tokens`` up to
beyond int64, ``last_loc``, a wrong ``num_new_pages``), resize, the capacity hooks, translation
and the CPU-copy delegates, with any dtype, layout or lying subclass mixed in. A case whose
call the guard must reject on the unchecked path names the clause in ``guard`` (``{"calls":
[indices], "clause": ...}``: the first raising call among ``calls`` must raise
ContractViolation with it).
"""

from __future__ import annotations

import random
from typing import Any

INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
EDGE_COUNTS = [2**61, 2**62, INT64_MAX, INT64_MAX - 1, 2**31, 2**32 + 1, -1, INT64_MIN, -(2**61)]
BEYOND_INT64 = [2**63, 2**64 + 3, -(2**64) - 1]
LAYOUTS = ["contig", "strided", "offset", "transposed", "row2d", "col2d", "scalar", "broadcast"]
ODD_DTYPES = ["int32", "int16", "uint8", "float32", "float64", "bool"]
LIES = ["numel", "dtype", "contig", "nullptr", "shiftptr", "len"]
GUARDED_KINDS = ("token", "paged")  # SWA: cross-backend agreement and safety only


def tensor(values: list[int], dtype: str = "int64", layout: str = "contig",
           lie: str | None = None) -> dict[str, Any]:
    """A tensor spec (see :func:`fuzz_exec.make_tensor`)."""
    return {"values": [int(v) for v in values], "dtype": dtype, "layout": layout, "lie": lie}


class World:
    """The allocator of a case and what its setup leaves: pages ``1..held`` handed out, the
    others free (or staged)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.kind = rng.choice(["token", "paged", "paged", "swa"])
        self.ps = 1 if self.kind == "token" else rng.choice([1, 4, 16])
        self.num_pages = rng.choice([4, 8, 33])
        self.need_sort = rng.random() < 0.5
        self.held = rng.randint(2, self.num_pages - 1)
        self.staged = 1 if self.need_sort else 0  # the last held page given back in setup
        self.owned = list(range(1, self.held - self.staged + 1))

    def alloc_spec(self) -> dict[str, Any]:
        size = self.num_pages * self.ps
        spec = {"kind": self.kind, "size": size, "page_size": self.ps,
                "need_sort": self.need_sort}
        if self.kind == "swa":
            spec["size_swa"] = size
        return spec

    def setup(self) -> list[dict[str, Any]]:
        ps, n = self.ps, self.held * self.ps
        if self.kind == "swa" and ps > 1:  # one request of `held` pages from nothing
            take = {"method": "alloc_extend", "args": [
                tensor([0]), tensor([0]), tensor([n]), tensor([n]), tensor([-1]), n]}
        else:
            take = {"method": "alloc", "args": [n]}
        calls = [take]
        if self.staged:
            calls.append({"method": "free", "args": [tensor(self.page_slots(self.held))]})
        return calls

    def page_slots(self, page: int) -> list[int]:
        return [page * self.ps + i for i in range(self.ps)]

    def slot(self, page: int) -> int:
        return page * self.ps + self.rng.randrange(self.ps)

    def free_page(self) -> int:
        """A page free (or staged) after the setup."""
        if self.staged and self.rng.random() < 0.3:
            return self.held
        return self.rng.randint(self.held + 1, self.num_pages)

    def bad_slot(self, kind: str) -> tuple[int, str]:
        """One slot of the given badness and the clause that rejects it."""
        ps, n = self.ps, self.num_pages
        if kind == "neg":
            return self.rng.choice([-1, -ps, -(2**31), INT64_MIN, -(2**61)]), "FREE-1"
        if kind == "page0":
            return self.rng.randrange(ps), "FREE-2"
        if kind == "oob":
            return self.rng.choice([(n + 1) * ps, (n + 1) * ps + ps - 1, 2**31 - 1, 2**61,
                                    INT64_MAX, 2**62 + 3]), "FREE-1"
        if kind == "free":
            return self.slot(self.free_page()), "FREE-3"
        raise ValueError(kind)

    def bad_page(self, kind: str) -> tuple[int, str]:
        """One page id of the given badness (``free_page_ids``) and its clause."""
        n = self.num_pages
        if kind == "neg":
            return self.rng.choice([-1, -(2**31), INT64_MIN]), "FREE-1"
        if kind == "page0":
            return 0, "FREE-2"
        if kind == "oob":
            return self.rng.choice([n + 1, n + 2, 2**61, INT64_MAX]), "FREE-1"
        if kind == "free":
            return self.free_page(), "FREE-3"
        raise ValueError(kind)


def _dress(w: World, values: list[int], honest: bool) -> dict[str, Any]:
    """A tensor spec for ``values``: int64 contiguous, or (when not ``honest``) any layout,
    dtype or lie."""
    rng = w.rng
    if honest:  # int32 only where it holds the values (a wrapped id is another id)
        layout = rng.choice(["contig", "contig", "strided", "offset", "row2d"])
        fits = all(-(2**31) <= v < 2**31 for v in values)
        return tensor(values, rng.choice(["int64", "int64", "int32"] if fits else ["int64"]),
                      layout)
    roll = rng.random()
    if roll < 0.35:
        return tensor(values, rng.choice(ODD_DTYPES), rng.choice(LAYOUTS))
    if roll < 0.7:
        return tensor(values, "int64", rng.choice(LAYOUTS))
    lie = rng.choice(LIES)
    layout = "strided" if lie == "contig" else rng.choice(["contig", "strided"])
    dtype = "int32" if lie == "dtype" else rng.choice(["int64", "int64", "int32"])
    return tensor(values, dtype, layout, lie)


def _held_slots(w: World, k: int) -> list[int]:
    pages = w.rng.sample(w.owned, min(k, len(w.owned)))
    return [w.slot(p) for p in pages]


def free_bad_ids(w: World) -> dict[str, Any]:
    """``free`` (or ``free_full`` / ``free_swa``) of held slots with one bad id among them."""
    rng = w.rng
    kind = rng.choice(["neg", "page0", "oob", "free", "dup", "none"])
    values = _held_slots(w, rng.randint(0, 3))
    clause = None
    if kind == "dup" and values:
        values.append(values[0])
        clause = "FREE-3" if w.kind == "token" else None  # paged free() dedups a page
    elif kind not in ("dup", "none"):
        bad, clause = w.bad_slot(kind)
        values.insert(rng.randint(0, len(values)), bad)
    honest = rng.random() < 0.6
    method = "free"
    if w.kind == "swa":
        method = rng.choice(["free", "free", "free_swa", "free_full"])
    elif rng.random() < 0.2:
        method = "free_full"
    case = {"calls": [{"method": method, "args": [_dress(w, values, honest)]}]}
    if clause and honest and w.kind in GUARDED_KINDS:
        case["guard"] = {"calls": [0], "clause": clause}
    return case


def free_page_ids(w: World) -> dict[str, Any]:
    """``free_page_ids`` of held pages with one bad page among them."""
    if w.kind == "swa":
        return free_bad_ids(w)
    rng = w.rng
    kind = rng.choice(["neg", "page0", "oob", "free", "dup", "none"])
    pages = rng.sample(w.owned, min(rng.randint(0, 3), len(w.owned)))
    clause = None
    if kind == "dup" and pages:
        pages.append(pages[-1])
        clause = "FREE-3"
    elif kind not in ("dup", "none"):
        bad, clause = w.bad_page(kind)
        pages.insert(rng.randint(0, len(pages)), bad)
    honest = rng.random() < 0.6
    case = {"calls": [{"method": "free_page_ids", "args": [_dress(w, pages, honest)]}]}
    if clause and honest:
        case["guard"] = {"calls": [0], "clause": clause}
    return case


def free_group(w: World) -> dict[str, Any]:
    """A free group whose frees name a bad id, or a page twice across the group."""
    rng = w.rng
    first = _held_slots(w, rng.randint(1, 2))
    kind = rng.choice(["neg", "page0", "oob", "free", "again"])
    if kind == "again":  # the same page in two frees of one group: paged dedups it
        second, clause = [first[0]], ("FREE-3" if w.kind == "token" else None)
    else:
        bad, clause = w.bad_slot(kind)
        second = [bad]
    calls = [{"method": "free_group_begin"},
             {"method": "free", "args": [tensor(first)]},
             {"method": "free", "args": [_dress(w, second, True)]},
             {"method": "free_group_end"}]
    case: dict[str, Any] = {"calls": calls}
    if clause and w.kind in GUARDED_KINDS:
        case["guard"] = {"calls": [2, 3], "clause": clause}
    return case


def free_segments(w: World) -> dict[str, Any]:
    """``free_segment(s)`` of a held row with a wrong ``start_pos`` or a bad id."""
    rng = w.rng
    ps = w.ps
    pages = w.owned[: rng.randint(1, len(w.owned))]
    row = [s for p in pages for s in w.page_slots(p)]
    start = rng.choice([0, 0, -1, -ps, 1, len(row), len(row) + 1, 2**61, INT64_MAX,
                        INT64_MIN, rng.randrange(max(1, len(row)))])
    clause = None
    if rng.random() < 0.3 and start == 0:  # on a slot the stride reads (SEG-2)
        bad, clause = w.bad_slot(rng.choice(["neg", "page0", "oob", "free"]))
        row[rng.randrange(len(pages)) * ps] = bad
    honest = rng.random() < 0.6
    if rng.random() < 0.5:
        call = {"method": "free_segment", "args": [_dress(w, row, honest)],
                "kwargs": {"start_pos": start}}
    else:
        cut = rng.randrange(len(row) + 1)
        call = {"method": "free_segments", "args": [[[_dress(w, row[:cut], honest), start],
                                                     [_dress(w, row[cut:], honest), cut]]]}
    case: dict[str, Any] = {"calls": [call]}
    if clause and honest and w.kind in GUARDED_KINDS:
        case["guard"] = {"calls": [0], "clause": clause}
    return case


def alloc_sizes(w: World) -> dict[str, Any]:
    """``alloc`` of sizes near the pool's bounds and the int64 limits."""
    n = w.num_pages * w.ps
    need = w.rng.choice([0, 1, w.ps - 1, n, n + 1, n - w.ps, *EDGE_COUNTS])
    return {"calls": [{"method": "alloc", "args": [need]}]}


def _batch(w: World) -> tuple[list[int], list[int], list[int]]:
    """A valid extend batch: prefix, seq, last_loc (continuing held pages or from nothing)."""
    rng, ps = w.rng, w.ps
    prefix, seq, last = [], [], []
    continuable = list(w.owned)
    for _ in range(rng.randint(1, 3)):
        if continuable and rng.random() < 0.5:
            page = continuable.pop(rng.randrange(len(continuable)))
            offset = rng.randrange(ps)
            p = rng.randint(0, 3) * ps + offset + 1
            prefix.append(p)
            last.append(page * ps + offset)
        else:
            prefix.append(0)
            last.append(-1)
        seq.append(prefix[-1] + rng.randint(0, 2 * ps + 1))
    return prefix, seq, last


def alloc_extend(w: World) -> dict[str, Any]:
    """``alloc_extend`` of a batch with one inconsistency, or a guarded bad ``last_loc``."""
    rng = w.rng
    prefix, seq, last = _batch(w)
    ent = sum(s - p for s, p in zip(seq, prefix))
    prefix_cpu, seq_cpu = list(prefix), list(seq)
    mutation = rng.choice(["none", "ent", "ent", "empty", "lens", "cpu", "neg", "huge_seq",
                           "last_loc", "last_loc_guard", "hint"])
    clause = None
    kwargs: dict[str, Any] = {}
    if mutation == "ent":
        ent = rng.choice([ent + 1, ent - 1, 0, *EDGE_COUNTS, *BEYOND_INT64])
    elif mutation == "hint" and w.kind == "paged":  # SGLang's SWA composite passes it
        kwargs["num_new_pages"], clause = _wrong_hint(w, prefix, seq), "EXTEND-4"
    elif mutation == "empty":
        prefix = seq = last = prefix_cpu = seq_cpu = []
        ent = rng.choice([1, 7, 2**61, INT64_MAX])
    elif mutation == "lens":
        rng.choice([prefix, seq, last, prefix_cpu, seq_cpu]).append(rng.choice([0, 5]))
    elif mutation == "cpu":
        target = rng.choice([prefix_cpu, seq_cpu])
        target[rng.randrange(len(target))] = rng.choice([0, 2**61, INT64_MAX, -1, 10**6])
    elif mutation == "neg":
        target = rng.choice([prefix, seq])
        target[rng.randrange(len(target))] = -rng.choice([1, 2**61])
        prefix_cpu, seq_cpu = list(prefix), list(seq)
    elif mutation == "huge_seq":
        i = rng.randrange(len(seq))
        seq[i] = seq_cpu[i] = rng.choice([2**61, 2**62, INT64_MAX])
        ent = rng.choice([ent, seq[i] - prefix[i]])
    elif mutation in ("last_loc", "last_loc_guard"):
        # a request whose layout continues last_loc's page: a partial prefix page, new tokens
        cont = [i for i, p in enumerate(prefix) if p > 0 and p % w.ps and seq[i] > p]
        if mutation == "last_loc_guard" and cont and w.ps > 1 and w.kind in GUARDED_KINDS:
            i = rng.choice(cont)
            kind = rng.choice(["free", "page0", "oob"])
            page = {"free": w.free_page(), "page0": 0, "oob": w.num_pages + 1}[kind]
            last[i] = page * w.ps + (prefix[i] - 1) % w.ps
            clause = "EXTEND-3"
        else:
            last[rng.randrange(len(last))] = rng.choice([-1, 0, -(2**61), 2**61, INT64_MAX])
    honest = mutation == "last_loc_guard" or rng.random() < 0.6
    args = [_dress(w, v, honest) for v in (prefix, prefix_cpu, seq, seq_cpu, last)]
    call = {"method": "alloc_extend", "args": [*args, ent], "kwargs": kwargs}
    case: dict[str, Any] = {"calls": [call]}
    if clause and honest:
        case["guard"] = {"calls": [0], "clause": clause}
    return case


def _wrong_hint(w: World, prefix: list[int], seq: list[int]) -> int:
    """A ``num_new_pages`` other than the batch's page count (``EXTEND-4``)."""
    ps = w.ps
    count = sum(-(-s // ps) - -(-p // ps) for p, s in zip(prefix, seq))
    return w.rng.choice([h for h in (-1, 0, count - 1, count + 1, count + 40, 2**63)
                         if h != count])


def alloc_decode(w: World) -> dict[str, Any]:
    """``alloc_decode`` of a batch with one inconsistency, or a guarded bad ``last_loc``."""
    rng, ps = w.rng, w.ps
    seq, last = [], []
    for page in rng.sample(w.owned, min(rng.randint(1, 3), len(w.owned))):
        offset = rng.randrange(ps)  # the last filled slot's offset; seq - 1 = offset + 1
        seq.append(rng.randint(0, 2) * ps + offset + 2)
        last.append(page * ps + offset)
    seq_cpu = list(seq)
    mutation = rng.choice(["none", "empty", "lens", "cpu", "neg", "huge", "last_loc",
                           "last_loc_guard"])
    clause = None
    if mutation == "empty":
        seq = last = seq_cpu = []
    elif mutation == "lens":
        rng.choice([seq, last, seq_cpu]).append(rng.choice([1, 5]))
    elif mutation == "cpu":
        seq_cpu[rng.randrange(len(seq_cpu))] = rng.choice([0, 1, 2**61, INT64_MAX, -5])
    elif mutation in ("neg", "huge"):
        i = rng.randrange(len(seq))
        seq[i] = seq_cpu[i] = rng.choice([0, -1, INT64_MIN] if mutation == "neg" else
                                         [2**61, INT64_MAX, 2**62 + 1])
    elif mutation == "last_loc":
        last[rng.randrange(len(last))] = rng.choice([-1, 0, -(2**61), 2**61, INT64_MAX])
    elif mutation == "last_loc_guard":
        cont = [i for i, s in enumerate(seq) if (s - 1) % ps]  # continues its page
        if cont and w.kind in GUARDED_KINDS:
            i = rng.choice(cont)
            page = rng.choice([w.free_page(), 0, w.num_pages + 1])
            last[i] = page * ps + (seq[i] - 2) % ps
            clause = "DECODE-3"
    honest = mutation == "last_loc_guard" or rng.random() < 0.6
    args = [_dress(w, v, honest) for v in (seq, seq_cpu, last)]
    case: dict[str, Any] = {"calls": [{"method": "alloc_decode", "args": args}]}
    if clause and honest:
        case["guard"] = {"calls": [0], "clause": clause}
    return case


def lifecycle(w: World) -> dict[str, Any]:
    """Calls without tensor arguments in an odd order: merges, clears, a stray group end."""
    names = ["merge_and_sort_free", "clear", "free_group_end", "free_group_begin",
             "available_size"]
    return {"calls": [{"method": w.rng.choice(names)} for _ in range(w.rng.randint(1, 4))]}


def surface(w: World) -> dict[str, Any]:
    """SGLang's other entry points: resize, the capacity hooks, translation, the CPU-copy
    delegates, the hybrid's one-sided segment frees, then an allocation on what is left."""
    rng, n = w.rng, w.num_pages * w.ps
    count = rng.choice([0, 1, n, n + 1, *EDGE_COUNTS])
    ids = _dress(w, [w.slot(p) for p in w.owned[:2]] + [w.bad_slot("oob")[0]], False)
    calls: list[dict[str, Any]] = [
        {"method": "resize", "args": [rng.choice([0, w.ps, n, 2 * n, -1, -(2**61), 2**61])]},
        {"method": "evict_to_free_tokens", "args": [None, count]},
        {"method": "check_decode_capacity", "kwargs": {"num_tokens": count, "tree_cache": None}},
        {"method": "translate_kv_indices_for_transfer", "args": [ids]},
        {"method": "get_cpu_copy", "args": [ids]},
    ]
    if w.kind == "swa":
        calls += [{"method": "translate_loc_from_full_to_swa", "args": [ids]},
                  {"method": rng.choice(["free_swa_segment", "free_full_segment"]),
                   "args": [ids], "kwargs": {"start_pos": rng.choice([0, 1, -1, 2**61])}}]
    calls = rng.sample(calls, rng.randint(1, len(calls)))
    calls.append({"method": "alloc", "args": [w.ps]})
    return {"calls": calls}


SCENARIOS = [free_bad_ids, free_bad_ids, free_page_ids, free_group, free_segments,
             alloc_sizes, alloc_extend, alloc_extend, alloc_decode, lifecycle, surface]


def case_for(seed: int) -> dict[str, Any]:
    """The case of ``seed``: allocator, setup, calls and (where the guard applies) ``guard``."""
    rng = random.Random(seed)
    w = World(rng)
    scenario = rng.choice(SCENARIOS)
    case = scenario(w)
    case.update(seed=seed, scenario=scenario.__name__, alloc=w.alloc_spec(), setup=w.setup())
    return case
