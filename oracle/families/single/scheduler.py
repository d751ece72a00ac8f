"""The scheduler model behind the oracle's state machine: requests, raw blocks, a tree cache.

It remembers what the caller owns (each request's kv row, raw ``alloc`` blocks, cache entries),
draws sizes biased toward page boundaries and the free capacity, cuts rows into segments, and
releases everything at the end. The rules that drive it live in :mod:`.machine`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from kvpool.spec import AllocatorModel

from ...engine.capabilities import Capabilities
from ...engine.draws import Draws
from ...engine.report import OracleError
from .coverage import POWER_MIN
from .executor import Executor

# Pool sizes in pages: small pools (shortages) and large ones (batches of dozens of requests).
POOL_PAGES = st.one_of(st.integers(8, 24), st.integers(64, 256))


def near_powers_of_two(room: int, low: int = 1) -> list[int]:
    """Sizes around each power of two that fits: ``2**k - 1, 2**k, 2**k + 1`` in ``[low, room]``
    (``k >= 1``), largest first."""
    out: list[int] = []
    power = 2
    while power - 1 <= room:
        out += [n for n in (power + 1, power, power - 1) if low <= n <= room]
        power *= 2
    return sorted(set(out), reverse=True)


@dataclass
class Request:
    """A request's kv row: slots of positions ``[0, len(row))``; ``[0, start)`` were dropped."""

    rid: int
    row: list[int]
    start: int = 0

    def live(self) -> list[int]:
        return self.row[self.start :]


class Scheduler:
    """Caller-side state of one run; ``ex`` performs and checks every allocator call."""

    ex: Executor
    caps: Capabilities
    ps: int
    reqs: dict[int, Request]
    raw: list[list[int]]
    cache: list[list[int]]
    next_rid: int

    def init_scheduler(self, ex: Executor) -> None:
        """Start with nothing owned; ``ex`` performs and checks every call."""
        self.ex, self.caps, self.ps = ex, ex.caps, ex.page_size
        self.reqs, self.raw, self.cache = {}, [], []
        self.next_rid = 0

    @property
    def model(self) -> AllocatorModel:
        assert self.ex.model is not None
        return self.ex.model

    @property
    def group_open(self) -> bool:
        return self.model.free_group is not None

    def pool_size(self, num_pages: int, ragged: bool) -> int:
        """A pool of ``num_pages`` pages in tokens (``ragged``: a partial page more); a large pool
        (64 pages or more) of fewer than ``2 * POWER_MIN`` tokens gets ``POWER_MIN + 8`` tokens
        more, so that one allocation of a few hundred tokens (around 256) fits at every page
        size."""
        if num_pages >= 64 and num_pages * self.ps < 2 * POWER_MIN:
            num_pages += -(-(POWER_MIN + 8) // self.ps)
        return num_pages * self.ps + (self.ps - 1 if ragged else 0)

    def draw_num_tokens(self, data: Draws, *, low: int = 1, share: int = 1) -> int:
        """Draw a token count: small and near page boundaries, a few pages, many pages, near
        this call's fair share of the free capacity, just around it (so that shortages,
        partial shortages and merges happen often), or around a power of two that fits
        (``..., 255, 256, 257, ...``; the larger ones first)."""
        ps = self.ps
        room = self.model.available_size() // max(1, share)
        if share > 8:  # a large batch: mostly within the fair share, so most batches fit
            kind = data.bounded(0, 1)
            values = [1, ps - 1, ps] if kind == 0 else []
            span = (low, max(low, room))
        else:
            kind = data.bounded(0, 4)
            values = {
                0: [1, ps - 1, ps, ps + 1, 2 * ps],
                2: [room, room - ps + 1, room + 1, room + ps],
                4: near_powers_of_two(room, low)[:9],
            }.get(kind, [])
            span = (low, max(low, 3 * ps)) if kind in (1, 4) else (3 * ps + 1, 10 * ps)
        if values:
            return max(low, values[data.bounded(0, len(values) - 1)])
        return data.bounded(*span)

    @staticmethod
    def batch_size(data: Draws, limit: int = 64) -> int:
        """Draw a batch size in ``[1, limit]`` as a scheduler produces them: a third each of
        1-3, 4-8 and 9-64 requests."""
        lo, hi = ((1, 3), (4, 8), (9, 64))[data.bounded(0, 2)]
        bs = data.bounded(lo, hi)
        return max(1, min(bs, limit))

    def admit(self, data: Draws, batch_size: int) -> None:
        """New requests arrive (``alloc_extend`` from an empty prefix; token targets, and paged
        ones without ``alloc_extend``: one ``alloc`` of whole pages per request); the batch is
        capped at one request per available page (admission)."""
        bs = max(1, min(batch_size, self.model.available_size() // self.ps))
        seqs = [self.draw_num_tokens(data, share=bs) for _ in range(bs)]
        self.long_prompt(data, seqs)  # maybe one request alone
        bs = len(seqs)
        self.make_room(data, sum(seqs) + len(seqs) * self.ps, check=False)
        if self.uses_extend():
            out = self.ex.call(
                "alloc_extend",
                prefix_lens=[0] * bs,
                seq_lens=seqs,
                last_loc=[-1] * bs,
                extend_num_tokens=sum(seqs),
            )
        else:  # a token target, or a paged one without alloc_extend: whole pages per request
            seqs = [-(-n // self.ps) * self.ps for n in seqs]
            out = self.ex.call("alloc", need_size=sum(seqs))
        if out is not None:
            self.add_rows(self.split(out, seqs))

    def long_prompt(self, data: Draws, seqs: list[int]) -> None:
        """A quarter of the time (when the pool can hold one) the batch ``seqs`` is changed so
        that it takes a size around a power of two of at least ``POWER_MIN`` tokens in all: half
        of those as one request alone (``size.pow2_single``; a token target's single ``alloc``
        is one anyway), else the last request completing the sum (else the first request takes
        that size)."""
        sizes = near_powers_of_two(self.model.available_size(), POWER_MIN - 1)
        if not sizes or data.bounded(0, 3):
            return
        total = data.sample(sizes)
        if len(seqs) > 1 and data.boolean():
            seqs[:] = [total]
            return
        rest = sum(seqs[:-1])
        if rest < total:
            seqs[-1] = total - rest
        else:
            seqs[0] = total

    def pick_requests(self, data: Draws) -> list[Request]:
        """A batch of distinct live requests: all running ones (a scheduler's decode batch) or
        a window of the request ids (wrapping)."""
        rids = sorted(self.reqs)
        bs = len(rids) if data.boolean() else self.batch_size(data, len(rids))
        k = data.bounded(0, len(rids) - 1)
        return [self.reqs[r] for r in (rids[k:] + rids[:k])[:bs]]

    def pieces(self, data: Draws, slots: list[int], start: int) -> list[list[int]]:
        """``slots`` (positions from ``start``) cut into consecutive pieces for separate
        ``free()`` calls. Inside an open group (or in a token allocator) a cut may fall
        mid-page, so one page is named by several calls (``GROUP-6``); outside a group a paged
        allocator is cut at page boundaries only, since each free releases whole pages."""
        n = len(slots)
        if self.group_open or not self.caps.paged:
            cuts = list(range(1, n))
        else:
            cuts = [k for k in range(1, n) if (start + k) % self.ps == 0]
        chosen = data.draw(st.lists(st.sampled_from(cuts), max_size=3, unique=True)) if cuts else []
        bounds = [0, *sorted(chosen), n]
        out = [self.with_repeat(data, slots[a:b]) for a, b in itertools.pairwise(bounds)]
        if self.group_open and self.caps.paged and len(out) > 1 and not data.bounded(0, 3):
            k = data.bounded(1, len(out) - 1)  # a slot an earlier free() named (GROUP-6)
            out[k] = [out[k - 1][-1], *out[k]]
        if data.boolean():  # an empty free is a no-op (FREE-6), also inside a group
            out.insert(data.bounded(0, len(out)), [])
        return out

    def with_repeat(self, data: Draws, slots: list[int]) -> list[int]:
        """``slots`` for one paged ``free()``, a quarter of the time with one of them named
        again (its page is released once: ``FREE-4``): mostly at the far end from where it
        stands (so that other pages lie between the two), else at a drawn place; inside a
        group, half of those name instead a slot an earlier ``free()`` of the group named
        (``GROUP-6``). A token allocator's slots are returned as they are (a slot named twice is
        a double free, ``FREE-3``)."""
        if not self.caps.paged or not slots or data.bounded(0, 3):
            return slots
        named = [s for chunk in self.model.free_group or () for s in chunk]
        use_named = bool(named) and data.boolean()
        pool = named if use_named else slots
        k = data.bounded(0, len(pool) - 1)
        far = len(slots) if use_named or 2 * k < len(slots) else 0
        at = far if data.bounded(0, 2) < 2 else data.bounded(0, len(slots))  # far 2 in 3
        return [*slots[:at], pool[k], *slots[at:]]

    def free_page_ids(self, data: Draws, slots: list[int]) -> None:
        """Release the whole pages ``slots`` lie on by page id (``FREE-8``): in row order or
        permuted (any order is legal); the caller then overwrites its tensor (``ALIAS-2``)."""
        pages = list(dict.fromkeys(s // self.ps for s in slots))
        if data.boolean():
            pages = list(data.draw(st.permutations(pages)))
        clobber = self.caps.ownership or self.group_open
        self.ex.call("free_page_ids", page_ids=pages, clobber=clobber)

    def squeeze(self, left_pages: int) -> None:
        """Take raw pages until only ``left_pages`` remain in the free list (staged stay)."""
        n = len(self.model.free_pages) - left_pages
        if n > 0:
            out = self.ex.call("alloc", need_size=n * self.ps)
            if out:
                self.raw.append(out)

    def page_openers(self) -> list[Request]:
        """Live requests whose next decode step opens a new page (``DECODE-4``)."""
        return [r for r in self.reqs.values() if len(r.row) % self.ps == 0]

    def make_room(self, data: Draws, num_tokens: int, *, check: bool) -> None:
        """Like SGLang's scheduler: evict from the tree cache before allocating (``CAP-*``)."""
        if self.cache and self.caps.capacity_hooks and data.boolean():
            name = "check_decode_capacity" if check else "evict_to_free_tokens"
            entries = [list(e) for e in self.cache]
            del self.cache[: self.ex.call(name, entries=entries, num_tokens=num_tokens)]

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

    def segments(self, data: Draws, req: Request, start: int, end: int) -> list[list[Any]]:
        """Positions ``[start, end)`` of a row cut into touching segments (maybe an empty one)."""
        if self.caps.segments == "shared":
            cuts = list(range(start + 1, end))
        else:
            cuts = [p for p in range(start + 1, end) if p % self.ps == 0]
        mids = [p for p in cuts if p % self.ps == self.ps // 2]  # mid-page cuts (shared mode)
        chosen: list[int] = []
        far = [m for m in mids if m - mids[0] > 2 * self.ps]
        spans = bool(far) and data.boolean()
        if spans:  # a middle segment from mid-page to mid-page
            chosen = [mids[0], far[data.bounded(0, len(far) - 1)]]  # across >= 3 pages
        elif cuts:
            pick = st.sampled_from(cuts)
            if mids:
                pick = st.one_of(pick, st.sampled_from(mids))
            chosen = data.draw(st.lists(pick, max_size=2, unique=True))
        bounds = [start, *sorted(chosen), end]
        segs: list[list[Any]] = [[req.row[a:b], a] for a, b in itertools.pairwise(bounds)]
        if data.boolean():
            i = data.bounded(0, len(segs))
            segs.insert(i, [[], bounds[i]])
        return segs

    def wrap_segment(self, data: Draws, req: Request) -> bool:
        """Maybe drop the first live pages of ``req`` by one ``free_segment`` that starts
        mid-page and ends on a later page at an in-page offset below its start's (``SEG-2``: it
        releases every page its tokens touch, the last one too), outside a group so that the
        census is compared right after it; the row keeps its tokens from the next page on.
        Shared segments, ``ps > 1``, a row of >= 2 live pages before its last, half of the
        time; False when not drawn."""
        ps = self.ps
        last_page_start = (len(req.row) - 1) // ps * ps
        ends = range(req.start + 2 * ps, last_page_start + 1, ps)
        shared = self.caps.segments == "shared" and ps > 1
        if not shared or self.group_open or not ends or data.boolean():
            return False
        new_start = data.choice(ends)
        start = req.start + data.bounded(1, ps - 1)  # mid-page on the first live page
        end = new_start - ps + data.bounded(1, start % ps)  # last token below start's offset
        self.ex.call("free_segment", free_index=req.row[start:end], start_pos=start,
                     clobber=self.caps.ownership)
        req.start = new_start
        return True

    def maintenance_calls(self) -> list[str]:
        calls = ["merge_and_sort_free"] if self.caps.merge else []
        return calls + ["clear"] * self.caps.clear + ["resize"] * self.caps.resize

    def window_reqs(self) -> list[int]:
        return [
            r.rid for r in self.reqs.values() if (len(r.row) - 1) // self.ps * self.ps > r.start
        ]

    def rollback_reqs(self) -> list[int]:
        return [r.rid for r in self.reqs.values() if len(r.row) > r.start + self.ps]

    def check_scheduler_invariants(self) -> None:
        """(``check_invariants`` is Hypothesis's own hook on a state machine.)

        The scheduler's bookkeeping matches the spec: every page the spec calls owned (and not
        deferred by the open group) belongs to exactly one request, raw block or cache entry."""
        held: list[int] = []
        for req in self.reqs.values():
            held += sorted({s // self.ps for s in req.live()})
        for block in self.raw + self.cache:
            held += sorted({s // self.ps for s in block})
        owned = set(self.model.owned_pages()) - set(self.model.deferred_pages())
        if sorted(held) != sorted(owned):
            raise OracleError(
                f"scheduler bookkeeping: holds pages {sorted(held)}, the spec "
                f"says owned {sorted(owned)}\n{self.model.debug_print()}"
            )

    def release_everything(self) -> None:
        """Close the group, free every request, raw block and cache entry; nothing may leak."""
        self.broken = True
        self.check_scheduler_invariants()
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
