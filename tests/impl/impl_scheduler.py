"""A small scheduler that drives kvpool.impl and the spec's AllocatorModel side by side.

It keeps request rows (slot lists) and issues only valid calls: ``alloc``, ``alloc_extend`` for
new and continuing requests, ``alloc_decode``, ``free`` of whole requests and of trailing pages,
``free_segment`` from any start (the row keeps whole pages), ``free_segments`` over a row cut
into touching pieces with some skipped (``SEG-5`` dedup, unaligned starts), free groups,
``merge_and_sort_free``, ``clear`` and ``resize``, checked and unchecked. After every call the
returns, ``get_all_free_pages()`` order and ``available_size()`` must be equal and the impl's
``check_invariants()`` must hold. Choices come from a :class:`Chooser`: Hypothesis data
(shrinkable) or a seeded RNG (soak).

Caller errors are the oracle's (``kvpool.oracle.families.single.badcalls``, run on kvpool.impl
at these page sizes by ``test_impl_oracle.py``). This driver stays beside the oracle for what
the oracle's machine does not generate: ``free_full``, ``free_segment`` from an unaligned start,
pools of 0-48 pages, ``resize`` to 0 pages, the impl's own ``check_invariants()`` after every
call, and a seeded soak that ``test_impl_backend.py`` also runs on the torch backend. Adding
those to the oracle's machine would change the examples of its default run.
"""

from __future__ import annotations

import itertools
import random
from typing import Any, Protocol

from hypothesis import strategies as st
from impl_adapter import call_impl, free_list, make_impl
from kvpool.spec import AllocatorModel, ResizeConfig

OPS = ["alloc", "alloc", "extend", "extend", "extend", "decode", "decode", "decode", "free",
       "free", "free_tail", "segments", "segments", "segment", "group", "group", "merge",
       "clear", "resize"]
TOKEN_OP = {"extend": "alloc", "decode": "free"}  # token allocators: EXTEND-9 (test_impl_api)
PAGE_SIZES = [1, 2, 3, 4, 16, 64]


class Chooser(Protocol):
    def integer(self, lo: int, hi: int) -> int: ...
    def subset(self, items: list[int], lo: int, hi: int) -> list[int]: ...
    def permutation(self, items: list[int]) -> list[int]: ...


class HypothesisChooser:
    """Choices drawn from Hypothesis ``st.data()`` (shrinks to short traces)."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def integer(self, lo: int, hi: int) -> int:
        value: int = self.data.draw(st.integers(lo, hi))
        return value

    def subset(self, items: list[int], lo: int, hi: int) -> list[int]:
        chosen: list[int] = self.data.draw(st.lists(st.sampled_from(items), unique=True,
                                                    min_size=min(lo, len(items)), max_size=hi))
        return chosen

    def permutation(self, items: list[int]) -> list[int]:
        perm: list[int] = self.data.draw(st.permutations(items))
        return perm


class RandomChooser:
    """Choices from a seeded ``random.Random`` (uniform, broad, reproducible)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def subset(self, items: list[int], lo: int, hi: int) -> list[int]:
        k = self.rng.randint(min(lo, len(items)), min(hi, len(items)))
        return self.rng.sample(items, k)

    def permutation(self, items: list[int]) -> list[int]:
        return self.rng.sample(items, len(items))


def choose_config(choose: Chooser) -> dict[str, Any]:
    paged = choose.integer(0, 2) > 0
    return {
        "paged": paged,
        "page_size": PAGE_SIZES[choose.integer(0, len(PAGE_SIZES) - 1)] if paged else 1,
        "num_pages": choose.integer(0, 48),
        "need_sort": choose.integer(0, 1) == 1,
        "checked": choose.integer(0, 1) == 1,
    }


class Driver:
    """Runs each call on the model and the impl and compares everything observable."""

    def __init__(self, choose: Chooser, *, paged: bool, page_size: int, num_pages: int,
                 need_sort: bool, checked: bool, device: str = "cpu") -> None:
        self.choose = choose
        self.device = device
        self.ps = page_size
        self.model = AllocatorModel(num_pages * page_size, page_size, paged=paged,
                                    need_sort=need_sort)
        self.impl = make_impl(paged=paged, size=num_pages * page_size, page_size=page_size,
                              need_sort=need_sort, checked=checked, device=device)
        self.rows: dict[int, list[int]] = {}
        self.next_id = 0
        self.trace: list[str] = [f"paged={paged} ps={page_size} pages={num_pages} "
                                 f"need_sort={need_sort} checked={checked}"]

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.trace.append(f"{name}{args}{kwargs or ''}")
        where = "\n".join(self.trace)
        expected = getattr(self.model, name)(*args, **kwargs)
        got = call_impl(self.impl, name, args, kwargs, device=self.device)
        assert got == expected, f"{where}\n-> impl {got}, model {expected}"
        assert free_list(self.impl) == self.model.get_all_free_pages(), where
        assert self.impl.available_size() == self.model.available_size(), where
        self.impl.check_invariants()
        return expected

    def run(self, num_steps: int) -> None:
        for _ in range(num_steps):
            self.step(OPS[self.choose.integer(0, len(OPS) - 1)])
        self.call("free_group_end")

    def new_row(self, slots: list[int]) -> None:
        self.rows[self.next_id] = slots
        self.next_id += 1

    def pick_rows(self, min_len: int) -> list[int]:
        ids = sorted(r for r, row in self.rows.items() if len(row) >= min_len)
        return self.choose.subset(ids, 2, 4) if ids else []

    def step(self, op: str) -> None:
        if not self.model.paged:
            op = TOKEN_OP.get(op, op)
        if op in ("alloc", "extend", "decode"):
            self.allocate(op)
        elif op in ("free", "free_tail", "segments", "segment"):
            self.release(op)
        elif op == "group":
            self.call("free_group_end" if self.model.free_group is not None else "free_group_begin")
        elif op == "merge":
            self.call("merge_and_sort_free")
        elif op == "clear":
            self.rows.clear()
            self.call("clear")
        elif op == "resize":
            self.rows.clear()
            self.call("resize", ResizeConfig(self.choose.integer(0, 16) * self.ps))

    def allocate(self, op: str) -> None:
        ps, choose = self.ps, self.choose
        if op == "alloc":
            out = self.call("alloc", choose.integer(1, 4) * ps)
            if out is not None:
                self.new_row(out)
        elif op == "extend":
            ids = self.pick_rows(0)
            news = [choose.integer(0, 3 * ps + 1) for _ in range(choose.integer(0, 3))]
            pre = [len(self.rows[r]) for r in ids] + [0] * len(news)
            seq = [p + choose.integer(0, 2 * ps + 1) for p in pre[:len(ids)]] + news
            loc = [self.rows[r][-1] if self.rows[r] else -1 for r in ids] + [-1] * len(news)
            out = self.call("alloc_extend", pre, seq, loc)
            if out is not None:
                start = 0
                for i, (p, s) in enumerate(zip(pre, seq)):
                    if i < len(ids):
                        self.rows[ids[i]] += out[start:start + s - p]
                    else:
                        self.new_row(out[start:start + s - p])
                    start += s - p
        else:
            ids = self.pick_rows(1)
            out = self.call("alloc_decode", [len(self.rows[r]) + 1 for r in ids],
                            [self.rows[r][-1] for r in ids])
            if out is not None:
                for r, slot in zip(ids, out):
                    self.rows[r].append(slot)

    def release(self, op: str) -> None:
        if not self.rows:
            return
        ps, choose = self.ps, self.choose
        ids = sorted(self.rows)
        r = ids[choose.integer(0, len(ids) - 1)]
        row = self.rows[r]
        if op == "free":
            del self.rows[r]
            self.call("free", choose.permutation(row) if ps == 1 else row)
        elif op == "free_tail":
            keep = max(0, -(-len(row) // ps) - choose.integer(1, 2)) * ps
            self.rows[r] = row[:keep]
            self.call("free_full", row[keep:])
        elif op == "segment":  # any start: the start's page goes, the row keeps whole pages
            start = choose.integer(0, len(row))
            self.rows[r] = row[:start // ps * ps]
            self.call("free_segment", row[start:], start_pos=start)
        else:  # the row cut into touching pieces, some skipped (their pages stay owned)
            del self.rows[r]
            cuts = sorted(choose.integer(0, len(row)) for _ in range(choose.integer(0, 4)))
            bounds = [0, *cuts, len(row)]
            self.call("free_segments", [(row[a:b], a) for a, b in itertools.pairwise(bounds)
                                        if choose.integer(0, 3) > 0])
