"""The Hypothesis state machine: a small scheduler that drives a target and the spec.

It generates only valid call sequences: requests arrive (``alloc_extend`` from an empty prefix;
token targets: ``alloc``), grow by chunks, decode in batches, finish or are retracted (``free``,
``free_segments``, into the tree cache), drop out-of-window pages, roll back whole trailing
pages, take raw page-aligned blocks, open and close free groups, merge, clear and resize. Sizes
are biased toward page boundaries and an almost-full pool. Bad calls (``kvpool.oracle.badcalls``)
run only against checked targets. Every call goes through an :class:`Executor`, which compares;
the caller-side bookkeeping is :class:`~kvpool.oracle.scheduler.Scheduler`.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from ...engine.examples import record_example
from ...engine.target import Config, Target
from .badcalls import applicable_kinds, make_bad_call
from .executor import Executor
from .scheduler import POOL_PAGES, Request, Scheduler

F = TypeVar("F", bound=Callable[..., Any])


def guarded(fn: F) -> F:
    """Mark the machine broken while a rule runs, so teardown skips after an error."""

    @functools.wraps(fn)
    def wrapper(self: OracleMachine, *args: Any, **kwargs: Any) -> Any:
        self.broken = True
        result = fn(self, *args, **kwargs)
        self.broken = False
        return result

    return wrapper  # type: ignore[return-value]


class OracleMachine(Scheduler, RuleBasedStateMachine):
    """Scheduler model over one target configuration (class attributes set by ``machine_for``)."""

    target: ClassVar[Target]
    config: ClassVar[Config]
    stats: ClassVar[dict[str, int]]
    coverage: ClassVar[Counter[str]]  # coverage events of every example (kvpool.oracle.coverage)

    def __init__(self) -> None:
        super().__init__()
        cls = type(self)
        self.init_scheduler(Executor(cls.target, cls.config))
        self.ready = False
        self.broken = False

    # -- lifecycle -------------------------------------------------------------------------------
    @initialize(num_pages=POOL_PAGES, ragged=st.booleans(), data=st.data())
    @guarded
    def create(self, num_pages: int, ragged: bool, data: st.DataObject) -> None:
        """A fresh pool; a large one half the time already serving a batch of 9-64 requests
        (warm start: big decode batches within a few steps)."""
        self.ex.create(self.pool_size(num_pages, ragged))
        self.ready = True
        if num_pages >= 64 and data.draw(st.booleans()):
            self.admit(data, data.draw(st.integers(9, 64)))

    @precondition(lambda self: self.ready and self.maintenance_calls())
    @rule(data=st.data())
    @guarded
    def maintenance(self, data: st.DataObject) -> None:
        """``merge_and_sort_free``, ``clear`` or ``resize`` (rarer: they reset the scheduler);
        under ``need_sort`` a ``clear`` with nothing staged first lets a request finish, so
        that it runs with pages staged (``LIFE-1``)."""
        call = data.draw(st.sampled_from(self.maintenance_calls()))
        if call == "clear" and self.ex.need_sort and not self.model.staged and self.reqs:
            self.finish(data)
        if call == "resize":
            num_pages, ragged = data.draw(POOL_PAGES), data.draw(st.booleans())
            self.ex.call("resize", max_total_num_tokens=self.pool_size(num_pages, ragged))
        else:
            self.ex.call(call)
        if call != "merge_and_sort_free":
            self.forget_all()

    # -- growth ------------------------------------------------------------------------------------
    @precondition(lambda self: self.ready)
    @rule(data=st.data())
    @guarded
    def new_requests(self, data: st.DataObject) -> None:
        self.admit(data, self.batch_size(data))

    @precondition(
        lambda self: self.ready and self.reqs and (self.uses_extend() or not self.caps.paged)
    )
    @rule(data=st.data())
    @guarded
    def extend_requests(self, data: st.DataObject) -> None:
        reqs = self.pick_requests(data)
        chunks = [self.draw_num_tokens(data, low=0, share=len(reqs)) for _ in reqs]
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
        """One decode step of a batch, or a burst of steps that crosses a page boundary."""
        reqs = self.pick_requests(data)
        first = len(reqs[0].row)
        to_cross = self.ps - first % self.ps + 1  # steps until the first request opens a page
        steps = data.draw(st.one_of(st.just(1), st.integers(2, 4), st.just(to_cross)))
        for _ in range(steps):
            if not self.decode_step(data, reqs):
                break

    def decode_step(self, data: st.DataObject, reqs: list[Request]) -> bool:
        """One ``alloc_decode`` (token: ``alloc``) for ``reqs``; False when it returned None."""
        self.make_room(data, len(reqs), check=True)
        if self.caps.paged:
            out = self.ex.call(
                "alloc_decode",
                seq_lens=[len(r.row) + 1 for r in reqs],
                last_loc=[r.row[-1] for r in reqs],
            )
        else:
            out = self.ex.call("alloc", need_size=len(reqs))
        if out is None:
            return False
        for req, slot in zip(reqs, out):
            req.row.append(slot)
        return True

    @precondition(lambda self: self.ready)
    @rule(data=st.data())
    @guarded
    def raw_alloc(self, data: st.DataObject) -> None:
        avail_pages = self.model.available_size() // self.ps
        # other requests taking memory: leave exactly 0-2 pages free, or run short by one
        near = [1, avail_pages - 2, avail_pages - 1, avail_pages, avail_pages + 1]
        n = data.draw(
            st.one_of(st.sampled_from([max(0, v) for v in near]), st.integers(0, avail_pages + 1))
        )
        out = self.ex.call("alloc", need_size=n * self.ps)
        if out:
            self.raw.append(out)

    @precondition(lambda self: self.ready and (self.reqs or self.uses_extend()))
    @rule(data=st.data(), left=st.integers(0, 2))
    @guarded
    def under_pressure(self, data: st.DataObject, left: int) -> None:
        """Other requests take the free list down to ``left`` pages (staged pages stay), then
        a batch that needs more arrives: a shortage with pages still free, or a merge first."""
        self.squeeze(left)
        decode = bool(self.reqs) and data.draw(st.booleans())
        if decode:
            self.decode_step(data, self.page_openers() or self.pick_requests(data))
        else:
            self.new_requests(data)

    # -- release -----------------------------------------------------------------------------------
    @precondition(lambda self: self.ready and self.reqs)
    @rule(data=st.data())
    @guarded
    def finish(self, data: st.DataObject) -> None:
        req = self.reqs[data.draw(st.sampled_from(sorted(self.reqs)))]
        modes = ["free", "pieces"] + (["segments"] if self.caps.segments != "none" else [])
        modes += ["page_ids"] if self.caps.page_ids else []
        modes += ["cache", "cache"] if self.caps.capacity_hooks else []
        mode = data.draw(st.sampled_from(modes))
        live = req.live()
        if mode == "cache":
            self.cache.append(live)
        elif mode == "page_ids":
            self.free_page_ids(data, live)
        elif mode == "segments":
            self.ex.call(
                "free_segments",
                segments=self.segments(data, req, req.start, len(req.row)),
                clobber=self.caps.ownership or self.group_open,
            )
        elif mode == "pieces":
            for piece in self.pieces(data, live, req.start):  # maybe with an empty free
                self.ex.call(
                    "free", free_index=piece, clobber=self.caps.ownership or self.group_open
                )
        else:
            if not self.caps.paged:
                live = list(data.draw(st.permutations(live)))
            live = self.with_repeat(data, live)
            name = "free_full" if self.caps.base_api and data.draw(st.booleans()) else "free"
            self.ex.call(name, free_index=live, clobber=self.caps.ownership or self.group_open)
        del self.reqs[req.rid]

    @precondition(lambda self: self.ready and self.caps.segments != "none" and self.window_reqs())
    @rule(data=st.data())
    @guarded
    def drop_window(self, data: st.DataObject) -> None:
        req = self.reqs[data.draw(st.sampled_from(self.window_reqs()))]
        last_page_start = (len(req.row) - 1) // self.ps * self.ps
        new_start = data.draw(
            st.sampled_from(range(req.start + self.ps, last_page_start + 1, self.ps))
        )
        self.ex.call(
            "free_segments",
            segments=self.segments(data, req, req.start, new_start),
            clobber=self.caps.ownership or self.group_open,
        )
        req.start = new_start

    @precondition(lambda self: self.ready and self.rollback_reqs())
    @rule(data=st.data())
    @guarded
    def rollback(self, data: st.DataObject) -> None:
        req = self.reqs[data.draw(st.sampled_from(self.rollback_reqs()))]
        cut = data.draw(st.sampled_from(range(req.start + self.ps, len(req.row), self.ps)))
        tail = req.row[cut:]
        if self.caps.page_ids and data.draw(st.booleans()):
            self.free_page_ids(data, tail)
        elif self.caps.segments != "none" and data.draw(st.booleans()):
            self.ex.call(
                "free_segment",
                free_index=tail,
                start_pos=cut,
                clobber=self.caps.ownership or self.group_open,
            )
        else:
            self.ex.call(
                "free",
                free_index=self.with_repeat(data, tail),
                clobber=self.caps.ownership or self.group_open,
            )
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
        name = "free_full" if self.caps.base_api and data.draw(st.booleans()) else "free"
        self.ex.call(
            name,
            free_index=self.with_repeat(data, slots),
            clobber=self.caps.ownership or self.group_open,
        )
        rest = block[: lo * ps] + block[hi * ps :]
        self.raw[i : i + 1] = [rest] if rest else []

    @precondition(lambda self: self.ready and self.caps.base_api and self.reqs)
    @rule(data=st.data())
    @guarded
    def translate(self, data: st.DataObject) -> None:
        """``translate_kv_indices_for_transfer`` of a request's live slots (``LIFE-3``)."""
        req = self.reqs[data.draw(st.sampled_from(sorted(self.reqs)))]
        self.ex.call("translate_kv_indices_for_transfer", kv_indices=req.live())

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
        if self.caps.checks("free_group_begin") and data.draw(st.booleans()):
            self.ex.call_bad("free_group_begin")  # groups do not nest (GROUP-1)
            self.ex.events["bad.nested_group"] += 1
        for _ in range(data.draw(st.integers(1, min(4, len(self.reqs))))):
            self.finish(data)
        if self.caps.checked and data.draw(st.booleans()):
            self.bad_call(data)  # bad input while frees are deferred (e.g. a deferred page again)
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

    @precondition(
        lambda self: self.ready and self.caps.capacity_hooks and (self.cache or self.reqs)
    )
    @rule(data=st.data(), check=st.booleans(), retire=st.integers(0, 3))
    @guarded
    def capacity(self, data: st.DataObject, check: bool, retire: int) -> None:
        """Finished requests go to the tree cache (``retire`` of them), then the scheduler asks
        for room: short by nothing, by one token or page, by the whole cache, or by more."""
        for rid in sorted(self.reqs)[:retire]:
            self.cache.append(self.reqs.pop(rid).live())
        if not self.cache:
            return
        cached = sum(len(e) for e in self.cache)
        avail = self.model.available_size()
        over = avail + cached * self.ps + 1  # more than evicting everything can free
        options = [0, avail, avail + 1, avail + 1, avail + self.ps, avail + cached, over]
        n = data.draw(st.sampled_from(options))
        name = "check_decode_capacity" if check else "evict_to_free_tokens"
        evicted = self.ex.call(name, entries=[list(e) for e in self.cache], num_tokens=n)
        del self.cache[:evicted]

    # -- bad input (checked targets only) --------------------------------------------------------
    @precondition(lambda self: self.ready and self.caps.checked)
    @rule(data=st.data())
    @guarded
    def bad_call(self, data: st.DataObject) -> None:
        """One to three bad calls (cheap: each is rejected and changes nothing)."""
        for _ in range(data.draw(st.integers(1, 3))):
            kinds = applicable_kinds(self)  # a partially checked target: maybe none here
            if not kinds:
                return
            kind = data.draw(st.sampled_from(kinds))
            name, args = make_bad_call(self, data, kind)
            self.ex.call_bad(name, **args)
            self.ex.events[f"bad.{kind}"] += 1

    # -- teardown: release everything, every page must be free again ----------------------------
    def teardown(self) -> None:
        """Release everything; count the example (see ``count_example``) and its calls."""
        try:
            if self.ready and not self.broken and not self.ex.failed:
                self.release_everything()
        finally:
            record_example(type(self), self.ex, sys.exc_info()[1])


def machine_for(target: Target, config: Config) -> type[OracleMachine]:
    """A machine class bound to one target configuration."""
    name = (
        f"Oracle_ps{config.page_size}_{'sorted' if config.need_sort else 'unsorted'}_{config.order}"
    )
    attrs = {
        "target": target,
        "config": config,
        "stats": {"examples": 0, "calls": 0, "failed": 0},
        "coverage": Counter(),
        "digest": hashlib.sha256(),
    }
    return type(name, (OracleMachine,), attrs)
