"""The Hypothesis state machine: a small scheduler that drives a target and the spec.

It generates only valid call sequences: requests arrive (``alloc_extend`` from an empty prefix;
token targets: ``alloc``), grow by chunks, decode in batches, finish or are retracted (``free``,
``free_segments``, into the tree cache), drop out-of-window pages, roll back whole trailing
pages, take raw page-aligned blocks, open and close free groups, merge, clear and resize. Sizes
are biased toward page boundaries and an almost-full pool. Bad calls (``kvpool.oracle.badcalls``)
run only against checked targets. Every call goes through an :class:`Executor`, which compares.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule
from kvpool.spec import AllocatorModel

from .badcalls import applicable_kinds, make_bad_call
from .capabilities import Capabilities
from .executor import Executor

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Request:
    """A request's kv row: slots of positions ``[0, len(row))``; ``[0, start)`` were dropped."""

    rid: int
    row: list[int]
    start: int = 0

    def live(self) -> list[int]:
        return self.row[self.start :]


def guarded(fn: F) -> F:
    """Mark the machine broken while a rule runs, so teardown skips after an error."""

    @functools.wraps(fn)
    def wrapper(self: OracleMachine, *args: Any, **kwargs: Any) -> Any:
        self.broken = True
        result = fn(self, *args, **kwargs)
        self.broken = False
        return result

    return wrapper  # type: ignore[return-value]


class OracleMachine(RuleBasedStateMachine):
    """Scheduler model over one target configuration (class attributes set by ``machine_for``)."""

    factory: ClassVar[Callable[..., Any]]
    caps: ClassVar[Capabilities]
    target_path: ClassVar[str]
    page_size: ClassVar[int]
    need_sort: ClassVar[bool]
    device: ClassVar[str]
    order: ClassVar[str]
    stats: ClassVar[dict[str, int]]

    def __init__(self) -> None:
        super().__init__()
        cls = type(self)
        self.ex = Executor(
            cls.factory,
            cls.caps,
            target_path=cls.target_path,
            page_size=cls.page_size,
            need_sort=cls.need_sort,
            device=cls.device,
            order=cls.order,
            owners=self.owners,
        )
        self.ps = cls.page_size
        self.reqs: dict[int, Request] = {}
        self.raw: list[list[int]] = []
        self.cache: list[list[int]] = []
        self.next_rid = 0
        self.ready = False
        self.broken = False
        cls.stats["examples"] += 1

    # -- helpers -------------------------------------------------------------------------------
    @property
    def model(self) -> AllocatorModel:
        assert self.ex.model is not None
        return self.ex.model

    @property
    def group_open(self) -> bool:
        return self.model.group is not None

    def owners(self) -> dict[int, str]:
        """Page -> one-letter owner for page maps."""
        out: dict[int, str] = {}
        for req in self.reqs.values():
            for slot in req.live():
                out[slot // self.ps] = chr(ord("A") + req.rid % 26)
        for block in self.raw:
            out.update((s // self.ps, "r") for s in block)
        for entry in self.cache:
            out.update((s // self.ps, "c") for s in entry)
        return out

    def count(self, data: st.DataObject, *, low: int = 1) -> int:
        """A token count biased toward page boundaries and the free capacity."""
        ps, avail = self.ps, self.model.available_size()
        picks = sorted(
            {
                max(low, v)
                for v in (
                    1,
                    ps - 1,
                    ps,
                    ps + 1,
                    2 * ps,
                    avail,
                    avail - ps + 1,
                    avail + 1,
                    avail + ps,
                )
            }
        )
        return data.draw(st.one_of(st.sampled_from(picks), st.integers(low, max(low, avail + ps))))

    def uses_extend(self) -> bool:
        return self.caps.paged and self.caps.extend

    def forget_all(self) -> None:
        self.reqs.clear()
        self.raw.clear()
        self.cache.clear()

    def add_rows(self, rows: list[list[int]]) -> None:
        for row in rows:
            self.reqs[self.next_rid] = Request(self.next_rid, row)
            self.next_rid += 1

    @staticmethod
    def split(slots: list[int], counts: list[int]) -> list[list[int]]:
        out, k = [], 0
        for n in counts:
            out.append(slots[k : k + n])
            k += n
        return out

    def segments(self, data: st.DataObject, req: Request, start: int, end: int) -> list[list[Any]]:
        """Positions ``[start, end)`` of a row cut into touching segments (maybe an empty one)."""
        if self.caps.segments == "shared":
            cuts = list(range(start + 1, end))
        else:
            cuts = [p for p in range(start + 1, end) if p % self.ps == 0]
        chosen = data.draw(st.lists(st.sampled_from(cuts), max_size=2, unique=True)) if cuts else []
        bounds = [start, *sorted(chosen), end]
        segs: list[list[Any]] = [[req.row[a:b], a] for a, b in itertools.pairwise(bounds)]
        if data.draw(st.booleans()):
            i = data.draw(st.integers(0, len(segs)))
            segs.insert(i, [[], bounds[i]])
        return segs

    # -- lifecycle -------------------------------------------------------------------------------
    @initialize(num_pages=st.integers(8, 24), ragged=st.booleans())
    @guarded
    def create(self, num_pages: int, ragged: bool) -> None:
        self.ex.create(num_pages * self.ps + (self.ps - 1 if ragged else 0))
        self.ready = True

    @precondition(lambda self: self.ready and self.caps.clear)
    @rule()
    @guarded
    def clear(self) -> None:
        self.ex.call("clear")
        self.forget_all()

    @precondition(lambda self: self.ready and self.caps.resize)
    @rule(num_pages=st.integers(8, 24), ragged=st.booleans())
    @guarded
    def resize(self, num_pages: int, ragged: bool) -> None:
        self.ex.call(
            "resize", max_total_num_tokens=num_pages * self.ps + (self.ps - 1 if ragged else 0)
        )
        self.forget_all()

    # -- growth ------------------------------------------------------------------------------------
    @precondition(lambda self: self.ready)
    @rule(data=st.data())
    @guarded
    def new_requests(self, data: st.DataObject) -> None:
        seqs = [self.count(data) for _ in range(data.draw(st.integers(1, 3)))]
        if self.uses_extend():
            bs = len(seqs)
            out = self.ex.call(
                "alloc_extend",
                prefix_lens=[0] * bs,
                seq_lens=seqs,
                last_loc=[-1] * bs,
                extend_num_tokens=sum(seqs),
            )
        elif not self.caps.paged:
            out = self.ex.call("alloc", need_size=sum(seqs))
        else:
            return
        if out is not None:
            self.add_rows(self.split(out, seqs))

    @precondition(
        lambda self: self.ready and self.reqs and (self.uses_extend() or not self.caps.paged)
    )
    @rule(data=st.data())
    @guarded
    def extend_requests(self, data: st.DataObject) -> None:
        rids = data.draw(
            st.lists(st.sampled_from(sorted(self.reqs)), min_size=1, max_size=3, unique=True)
        )
        reqs = [self.reqs[r] for r in rids]
        chunks = [self.count(data, low=0) for _ in reqs]
        if self.uses_extend():
            pre = [len(r.row) for r in reqs]
            out = self.ex.call(
                "alloc_extend",
                prefix_lens=pre,
                seq_lens=[p + c for p, c in zip(pre, chunks)],
                last_loc=[r.row[-1] for r in reqs],
                extend_num_tokens=sum(chunks),
            )
        else:
            out = self.ex.call("alloc", need_size=sum(chunks))
        if out is not None:
            for req, part in zip(reqs, self.split(out, chunks)):
                req.row += part

    @precondition(
        lambda self: (
            self.ready
            and self.reqs
            and (
                not self.caps.paged or (self.caps.extend and (self.ps > 1 or self.caps.decode_ps1))
            )
        )
    )
    @rule(data=st.data())
    @guarded
    def decode(self, data: st.DataObject) -> None:
        rids = data.draw(
            st.lists(st.sampled_from(sorted(self.reqs)), min_size=1, max_size=4, unique=True)
        )
        reqs = [self.reqs[r] for r in rids]
        if self.caps.paged:
            out = self.ex.call(
                "alloc_decode",
                seq_lens=[len(r.row) + 1 for r in reqs],
                last_loc=[r.row[-1] for r in reqs],
            )
        else:
            out = self.ex.call("alloc", need_size=len(reqs))
        if out is not None:
            for req, slot in zip(reqs, out):
                req.row.append(slot)

    @precondition(lambda self: self.ready)
    @rule(data=st.data())
    @guarded
    def raw_alloc(self, data: st.DataObject) -> None:
        avail_pages = self.model.available_size() // self.ps
        n = data.draw(
            st.one_of(
                st.sampled_from([1, avail_pages, avail_pages + 1]), st.integers(0, avail_pages + 1)
            )
        )
        out = self.ex.call("alloc", need_size=n * self.ps)
        if out:
            self.raw.append(out)

    # -- release -----------------------------------------------------------------------------------
    @precondition(lambda self: self.ready and self.reqs)
    @rule(data=st.data())
    @guarded
    def finish(self, data: st.DataObject) -> None:
        req = self.reqs[data.draw(st.sampled_from(sorted(self.reqs)))]
        modes = ["free"] + (["segments"] if self.caps.segments != "none" else [])
        modes += ["cache"] if self.caps.capacity_hooks else []
        mode = data.draw(st.sampled_from(modes))
        live = req.live()
        if mode == "cache":
            self.cache.append(live)
        elif mode == "segments":
            self.ex.call(
                "free_segments",
                segments=self.segments(data, req, req.start, len(req.row)),
                clobber=self.group_open,
            )
        else:
            if not self.caps.paged:
                live = list(data.draw(st.permutations(live)))
            self.ex.call("free", free_index=live, clobber=self.group_open)
        del self.reqs[req.rid]

    def _window_reqs(self) -> list[int]:
        return [
            r.rid for r in self.reqs.values() if (len(r.row) - 1) // self.ps * self.ps > r.start
        ]

    @precondition(lambda self: self.ready and self.caps.segments != "none" and self._window_reqs())
    @rule(data=st.data())
    @guarded
    def drop_window(self, data: st.DataObject) -> None:
        req = self.reqs[data.draw(st.sampled_from(self._window_reqs()))]
        last_page_start = (len(req.row) - 1) // self.ps * self.ps
        new_start = data.draw(
            st.sampled_from(range(req.start + self.ps, last_page_start + 1, self.ps))
        )
        self.ex.call(
            "free_segments",
            segments=self.segments(data, req, req.start, new_start),
            clobber=self.group_open,
        )
        req.start = new_start

    def _rollback_reqs(self) -> list[int]:
        return [r.rid for r in self.reqs.values() if len(r.row) > r.start + self.ps]

    @precondition(lambda self: self.ready and self._rollback_reqs())
    @rule(data=st.data())
    @guarded
    def rollback(self, data: st.DataObject) -> None:
        req = self.reqs[data.draw(st.sampled_from(self._rollback_reqs()))]
        cut = data.draw(st.sampled_from(range(req.start + self.ps, len(req.row), self.ps)))
        tail = req.row[cut:]
        if self.caps.segments != "none" and data.draw(st.booleans()):
            self.ex.call("free_segment", free_index=tail, start_pos=cut, clobber=self.group_open)
        else:
            self.ex.call("free", free_index=tail, clobber=self.group_open)
        del req.row[cut:]

    @precondition(lambda self: self.ready and self.raw)
    @rule(data=st.data())
    @guarded
    def raw_free(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.raw) - 1))
        block, ps = self.raw[i], self.ps
        num_pages = len(block) // ps
        lo = data.draw(st.integers(0, num_pages - 1))
        hi = data.draw(st.integers(lo + 1, num_pages))
        slots = block[lo * ps : hi * ps]
        if not self.caps.paged:
            slots = list(data.draw(st.permutations(slots)))
        self.ex.call("free", free_index=slots, clobber=self.group_open)
        rest = block[: lo * ps] + block[hi * ps :]
        self.raw[i : i + 1] = [rest] if rest else []

    # -- groups, merge, capacity -----------------------------------------------------------------
    @precondition(lambda self: self.ready and self.caps.groups and not self.group_open)
    @rule()
    @guarded
    def group_begin(self) -> None:
        self.ex.call("free_group_begin")

    @precondition(
        lambda self: self.ready and self.caps.groups and not self.group_open and self.reqs
    )
    @rule(data=st.data(), times=st.integers(1, 2))
    @guarded
    def finish_batch_in_group(self, data: st.DataObject, times: int) -> None:
        """The scheduler's pattern: one group around several finishes, then end (maybe twice)."""
        self.ex.call("free_group_begin")
        if self.caps.checked and data.draw(st.booleans()):
            self.ex.call_bad("free_group_begin")  # groups do not nest (GROUP-1)
        for _ in range(data.draw(st.integers(1, min(3, len(self.reqs))))):
            self.finish(data)
        for _ in range(times):
            self.ex.call("free_group_end")

    @precondition(lambda self: self.ready and self.caps.groups)
    @rule(times=st.integers(1, 2))
    @guarded
    def group_end(self, times: int) -> None:
        for _ in range(times):  # a second end is a no-op (GROUP-2)
            self.ex.call("free_group_end")

    @precondition(lambda self: self.ready and self.caps.merge)
    @rule()
    @guarded
    def merge(self) -> None:
        self.ex.call("merge_and_sort_free")

    @precondition(lambda self: self.ready and self.caps.capacity_hooks and self.cache)
    @rule(data=st.data(), check=st.booleans())
    @guarded
    def capacity(self, data: st.DataObject, check: bool) -> None:
        cached = sum(len(e) for e in self.cache)
        avail = self.model.available_size()
        n = data.draw(
            st.sampled_from(sorted({0, avail, avail + 1, avail + self.ps, avail + cached}))
        )
        name = "check_decode_capacity" if check else "evict_to_free_tokens"
        evicted = self.ex.call(name, entries=[list(e) for e in self.cache], num_tokens=n)
        del self.cache[:evicted]

    # -- bad input (checked targets only) --------------------------------------------------------
    @precondition(lambda self: self.ready and self.caps.checked)
    @rule(data=st.data())
    @guarded
    def bad_call(self, data: st.DataObject) -> None:
        call = make_bad_call(self, data, data.draw(st.sampled_from(applicable_kinds(self))))
        if call is not None:
            self.ex.call_bad(call[0], **call[1])

    # -- teardown: release everything, every page must be free again ----------------------------
    def teardown(self) -> None:
        try:
            if self.ready and not self.broken and not self.ex.failed:
                self.release_everything()
        finally:
            type(self).stats["calls"] += self.ex.num_calls

    def release_everything(self) -> None:
        """Close the group, free every request, raw block and cache entry; nothing may leak."""
        self.broken = True
        if self.group_open:
            self.ex.call("free_group_end")
        for req in list(self.reqs.values()):
            if req.live():
                self.ex.call("free", free_index=req.live())
        for slots in self.raw + self.cache:
            self.ex.call("free", free_index=slots)
        self.forget_all()
        self.broken = False
        assert self.model.available_size() == self.model.num_pages * self.ps, (
            "oracle bookkeeping leak"
        )


def machine_for(
    factory: Callable[..., Any],
    caps: Capabilities,
    *,
    target_path: str,
    page_size: int,
    need_sort: bool,
    device: str = "cpu",
    order: str = "exact",
) -> type[OracleMachine]:
    """A machine class bound to one target configuration."""
    name = f"Oracle_ps{page_size}_{'sorted' if need_sort else 'unsorted'}_{order}"
    attrs = {
        "factory": staticmethod(factory),
        "caps": caps,
        "target_path": target_path,
        "page_size": page_size,
        "need_sort": need_sort,
        "device": device,
        "order": order,
        "stats": {"examples": 0, "calls": 0},
    }
    return type(name, (OracleMachine,), attrs)
