"""The Hypothesis state machine: a small scheduler that drives a target and the spec.

It generates only valid call sequences: requests arrive (``alloc_extend`` from an empty prefix;
token targets: ``alloc``), grow by chunks, decode in batches, finish or are retracted (``free``,
``free_segments``, into the tree cache), drop out-of-window pages, roll back whole trailing
pages, take raw page-aligned blocks, open and close free groups, merge, clear and resize. Sizes
are biased toward page boundaries and an almost-full pool. Bad calls (:mod:`.badcalls`) run
only against checked targets. Every call goes through an :class:`Executor`, which compares;
the caller-side bookkeeping is :class:`~kvpool.oracle.families.single.scheduler.Scheduler`.
"""

from __future__ import annotations

import functools
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from hypothesis import strategies as st

from ...engine.capabilities import Capabilities
from ...engine.draws import Draws
from ...engine.examples import record_example
from ...engine.families import Family
from ...engine.machines import bind
from ...engine.steps import ActionMachine, action
from ...engine.target import Config, Target
from .badcalls import draw_kind, make_bad_call
from .clause_map import SINGLE
from .executor import Executor
from .planning import plan_targets
from .scheduler import POOL_PAGES, Request, Scheduler

F = TypeVar("F", bound=Callable[..., Any])


def guarded(fn: F) -> F:
    """Mark the machine broken while a rule runs, so teardown skips after an error; a rule's
    ``data`` from Hypothesis becomes :class:`~kvpool.oracle.engine.draws.Draws` (cheap draws)."""

    @functools.wraps(fn)
    def wrapper(self: OracleMachine, *args: Any, **kwargs: Any) -> Any:
        data = kwargs.get("data")
        if data is not None and not isinstance(data, Draws):
            kwargs["data"] = Draws(data)
        self.broken = True
        result = fn(self, *args, **kwargs)
        self.broken = False
        return result

    return wrapper  # type: ignore[return-value]


class OracleMachine(Scheduler, ActionMachine):
    """Scheduler model over one target configuration (class attributes set by ``machine_for``)."""

    target: ClassVar[Target]
    config: ClassVar[Config]
    stats: ClassVar[dict[str, int]]
    coverage: ClassVar[Counter[str]]  # coverage events of every example (.coverage)

    def __init__(self) -> None:
        super().__init__()
        cls = type(self)
        self.init_scheduler(Executor(cls.target, cls.config))
        self.ready = False
        self.broken = False

    # -- lifecycle -------------------------------------------------------------------------------
    @guarded
    def start(self, data: Draws) -> None:
        """A fresh pool; a large one half the time already serving a batch of 9-64 requests
        (warm start: big decode batches within a few steps)."""
        num_pages, ragged = data.draw(POOL_PAGES), data.boolean()
        self.ex.create(self.pool_size(num_pages, ragged))
        self.ready = True
        if num_pages >= 64 and data.boolean():
            self.admit(data, data.integer(9, 64))

    @action(lambda self: self.maintenance_calls())
    @guarded
    def maintenance(self, data: Draws) -> None:
        """``merge_and_sort_free``, ``clear`` or ``resize`` (rarer: they reset the scheduler);
        under ``need_sort`` a ``clear`` with nothing staged first lets a request finish, so
        that it runs with pages staged (``LIFE-1``)."""
        call = data.choice(self.maintenance_calls())
        if call == "clear" and self.ex.need_sort and not self.model.staged and self.reqs:
            self.finish(data)
        if call == "resize":
            num_pages, ragged = data.draw(POOL_PAGES), data.boolean()
            self.ex.call("resize", max_total_num_tokens=self.pool_size(num_pages, ragged))
        else:
            self.ex.call(call)
        if call != "merge_and_sort_free":
            self.forget_all()

    # -- growth ------------------------------------------------------------------------------------
    @action()
    @guarded
    def new_requests(self, data: Draws) -> None:
        self.admit(data, self.batch_size(data))

    @action(lambda self: self.reqs and (self.uses_extend() or not self.caps.paged))
    @guarded
    def extend_requests(self, data: Draws) -> None:
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

    def can_decode(self) -> bool:
        """Whether requests grow by decode steps: ``alloc`` on a token target, ``alloc_decode``
        where the target declares it at this page size."""
        return not self.caps.paged or (self.caps.extend and (self.ps > 1 or self.caps.decode_ps1))

    @action(lambda self: self.reqs and self.can_decode())
    @guarded
    def decode(self, data: Draws) -> None:
        """One decode step of a batch, or a burst of steps that crosses a page boundary."""
        reqs = self.pick_requests(data)
        first = len(reqs[0].row)
        to_cross = self.ps - first % self.ps + 1  # steps until the first request opens a page
        kind = data.integer(0, 2)  # one step, 2-4 steps, or up to the first page boundary
        steps = 1 if kind == 0 else data.integer(2, 4) if kind == 1 else to_cross
        for _ in range(steps):
            if not self.decode_step(data, reqs):
                break

    def decode_step(self, data: Draws, reqs: list[Request]) -> bool:
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

    @action()
    @guarded
    def raw_alloc(self, data: Draws) -> None:
        avail_pages = self.model.available_size() // self.ps
        # other requests taking memory: leave exactly 0-2 pages free, or run short by one
        near = [1, avail_pages - 2, avail_pages - 1, avail_pages, avail_pages + 1]
        n = (
            data.choice([max(0, v) for v in near])
            if data.boolean()
            else data.integer(0, avail_pages + 1)
        )
        out = self.ex.call("alloc", need_size=n * self.ps)
        if out:
            self.raw.append(out)

    @action(lambda self: self.reqs or self.uses_extend(), rank=2)
    @guarded
    def under_pressure(self, data: Draws) -> None:
        """Other requests take the free list down to 0-2 pages (staged pages stay), then
        a batch that needs more arrives: a shortage with pages still free, or a merge first. A
        decode of the requests that open a page leaves fewer free pages than they open."""
        decode = bool(self.reqs) and self.can_decode() and data.boolean()
        openers = self.page_openers() if decode else []
        left = data.integer(0, 2)
        self.squeeze(min(left, len(openers) - 1) if openers else left)
        if decode:
            self.decode_step(data, openers or self.pick_requests(data))
        else:
            self.new_requests(data)

    # -- release -----------------------------------------------------------------------------------
    @action(lambda self: self.reqs)
    @guarded
    def finish(self, data: Draws) -> None:
        req = self.reqs[data.choice(sorted(self.reqs))]
        modes = ["free", "pieces"] + (["segments"] if self.caps.segments != "none" else [])
        modes += ["page_ids"] if self.caps.page_ids else []
        modes += ["cache", "cache"] if self.caps.capacity_hooks else []
        mode = data.choice(modes)
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
            name = "free_full" if self.caps.base_api and data.boolean() else "free"
            self.ex.call(name, free_index=live, clobber=self.caps.ownership or self.group_open)
        del self.reqs[req.rid]

    @action(lambda self: self.caps.segments != "none" and self.window_reqs())
    @guarded
    def drop_window(self, data: Draws) -> None:
        """Pages fall out of a request's window: ``free_segments`` of its first live pages, or
        (shared segments, outside a group, half of the time) one ``free_segment`` naming
        only their tokens from mid-page on (``Scheduler.wrap_segment``)."""
        req = self.reqs[data.choice(self.window_reqs())]
        if self.wrap_segment(data, req):
            return
        last_page_start = (len(req.row) - 1) // self.ps * self.ps
        new_start = data.choice(range(req.start + self.ps, last_page_start + 1, self.ps))
        self.ex.call(
            "free_segments",
            segments=self.segments(data, req, req.start, new_start),
            clobber=self.caps.ownership or self.group_open,
        )
        req.start = new_start

    @action(lambda self: self.rollback_reqs())
    @guarded
    def rollback(self, data: Draws) -> None:
        req = self.reqs[data.choice(self.rollback_reqs())]
        cut = data.choice(range(req.start + self.ps, len(req.row), self.ps))
        tail = req.row[cut:]
        if self.caps.page_ids and data.boolean():
            self.free_page_ids(data, tail)
        elif self.caps.segments != "none" and data.boolean():
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

    @action(lambda self: self.raw)
    @guarded
    def raw_free(self, data: Draws) -> None:
        i = data.integer(0, len(self.raw) - 1)
        block, ps = self.raw[i], self.ps
        num_pages = len(block) // ps
        lo = data.integer(0, num_pages - 1)
        hi = data.integer(lo + 1, num_pages)
        slots = block[lo * ps : hi * ps]
        if not self.caps.paged:
            slots = list(data.draw(st.permutations(slots)))
        name = "free_full" if self.caps.base_api and data.boolean() else "free"
        self.ex.call(
            name,
            free_index=self.with_repeat(data, slots),
            clobber=self.caps.ownership or self.group_open,
        )
        rest = block[: lo * ps] + block[hi * ps :]
        self.raw[i : i + 1] = [rest] if rest else []

    @action(lambda self: self.caps.base_api and self.reqs)
    @guarded
    def translate(self, data: Draws) -> None:
        """``translate_kv_indices_for_transfer`` of a request's live slots (``LIFE-3``)."""
        req = self.reqs[data.choice(sorted(self.reqs))]
        self.ex.call("translate_kv_indices_for_transfer", kv_indices=req.live())

    # -- groups, merge, capacity -----------------------------------------------------------------
    @action(lambda self: self.caps.groups and not self.group_open, rank=0)
    @guarded
    def group_begin(self, data: Draws) -> None:
        self.ex.call("free_group_begin")

    @action(lambda self: self.caps.groups and not self.group_open and self.reqs, rank=2)
    @guarded
    def finish_batch_in_group(self, data: Draws) -> None:
        """The scheduler's pattern: one group around several finishes, then end (maybe twice)."""
        times = data.integer(1, 2)
        self.ex.call("free_group_begin")
        if self.caps.checks("free_group_begin") and data.boolean():
            self.ex.call_bad("free_group_begin")  # groups do not nest (GROUP-1)
            self.ex.events["bad.nested_group"] += 1
        for _ in range(data.integer(1, min(4, len(self.reqs)))):
            self.finish(data)
        if self.caps.checked and data.boolean():
            self.bad_call(data)  # bad input while frees are deferred (e.g. a deferred page again)
        for _ in range(times):
            self.ex.call("free_group_end")

    @action(lambda self: self.caps.groups)
    @guarded
    def group_end(self, data: Draws) -> None:
        for _ in range(data.integer(1, 2)):  # a second end is a no-op (GROUP-2)
            self.ex.call("free_group_end")

    @action(lambda self: self.caps.merge, rank=0)
    @guarded
    def merge(self, data: Draws) -> None:
        self.ex.call("merge_and_sort_free")

    @action(lambda self: self.caps.capacity_hooks and (self.cache or self.reqs), rank=3)
    @guarded
    def capacity(self, data: Draws) -> None:
        """Finished requests go to the tree cache (``retire`` of them), then the scheduler asks
        for room: short by nothing, by one token or page, by the whole cache, or by more."""
        check, retire = data.boolean(), data.integer(0, 3)
        for rid in sorted(self.reqs)[:retire]:
            self.cache.append(self.reqs.pop(rid).live())
        if not self.cache:
            return
        cached = sum(len(e) for e in self.cache)
        avail = self.model.available_size()
        over = avail + cached * self.ps + 1  # more than evicting everything can free
        options = [0, avail, avail + 1, avail + 1, avail + self.ps, avail + cached, over]
        n = data.choice(options)
        name = "check_decode_capacity" if check else "evict_to_free_tokens"
        evicted = self.ex.call(name, entries=[list(e) for e in self.cache], num_tokens=n)
        del self.cache[:evicted]

    # -- bad input (checked targets only) --------------------------------------------------------
    @action(lambda self: self.caps.checked)
    @guarded
    def bad_call(self, data: Draws) -> None:
        """One to three bad calls (cheap: each is rejected and changes nothing)."""
        for _ in range(data.integer(1, 3)):
            kind = draw_kind(self, data)  # a partially checked target: maybe none here
            if kind is None:
                return
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
    return bind(OracleMachine, name, target, config)


# The single-pool family: SGLang's token and paged allocators (``python -m kvpool.oracle``).
FAMILY = Family("single", Executor, machine_for, SINGLE, Capabilities, "kvpool_capabilities",
                planner=plan_targets)
