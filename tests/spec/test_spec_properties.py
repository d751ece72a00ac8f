"""Random valid call sequences keep the reference model's invariants and its own contract.

A small scheduler drives ``AllocatorModel``: requests arrive (``alloc`` or ``alloc_extend`` from
an empty prefix), grow (``alloc_extend``), decode (``alloc_decode``), drop out-of-window pages and
roll back trailing pages (``free_segment``), finish (``free``, ``free_full``, ``free_segments``
split at random, with shared boundary pages), inside or outside free groups; plus merges,
``clear`` and ``resize``. After every step (``INV-1..4``, ``MODEL-3``):

- ``check_invariants()`` holds and the owned pages are exactly the live requests' pages plus
  the open group's deferred pages (nothing leaks, nothing is owned twice);
- every allocation passes the contract's acceptance check (``accept_*``) on a copy of the
  pre-state, and the adopted copy has the model's free multiset (``check_census``);
- a shadow model that only ever adopts the model's results (and makes the same frees) has the
  model's free census: frees release exactly the pages the contract names (``FREE-4``, ``SEG-2``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from kvpool.spec import (
    AllocatorModel,
    ResizeConfig,
    accept_alloc,
    accept_decode,
    accept_extend,
    check_census,
)


@dataclass
class Request:
    """A request's kv row: ``row[p]`` is the slot of position p; positions before ``start`` (a
    page multiple) were released already."""

    row: list[int]
    start: int = 0


KINDS = [(False, 1)] + [(True, ps) for ps in (1, 2, 4, 16)]  # (paged, page size)


@st.composite
def configs(draw: st.DrawFn) -> tuple[bool, int, int, bool]:
    is_paged, ps = draw(st.sampled_from(KINDS))
    num_pages = draw(st.integers(1, 6 if ps == 16 else 14))
    size = num_pages * ps + draw(st.integers(0, ps - 1))
    return is_paged, size, ps, draw(st.booleans())


class SpecMachine(RuleBasedStateMachine):
    model: AllocatorModel
    shadow: AllocatorModel

    @initialize(config=configs())
    def setup(self, config: tuple[bool, int, int, bool]) -> None:
        is_paged, size, ps, need_sort = config
        self.model = AllocatorModel(size, ps, paged=is_paged, need_sort=need_sort)
        self.shadow = self.model.copy()
        self.ps = ps
        self.requests: list[Request] = []

    # -- helpers -----------------------------------------------------------------------------
    def _both(self, action: Callable[[AllocatorModel], None]) -> None:
        action(self.model)
        action(self.shadow)

    def _accepted(self, accept: Callable[[AllocatorModel], None]) -> None:
        """The model's result passes ``accept`` on the pre-state copy ``self.pre`` and on the
        shadow; both then hold the model's free multiset."""
        for adopter in (self.pre, self.shadow):
            accept(adopter)
            check_census(adopter, self.model.get_all_free_pages(), self.model.available_size())

    def _draw_requests(self, data: st.DataObject, max_count: int) -> list[Request]:
        if not self.requests:
            return []
        picked = data.draw(st.lists(st.sampled_from(range(len(self.requests))), unique=True,
                                    max_size=max_count))
        return [self.requests[i] for i in picked]

    # -- allocation ----------------------------------------------------------------------------
    @rule(data=st.data())
    def alloc(self, data: st.DataObject) -> None:
        """ALLOC-3/4: a page multiple, whole free pages or None iff short."""
        num_pages = data.draw(st.integers(1, max(2, self.model.num_pages // 2)))
        self.pre = self.model.copy()
        result = self.model.alloc(num_pages * self.ps)
        self._accepted(lambda m: accept_alloc(m, num_pages * self.ps, result))
        if result:
            self.requests.append(Request(list(result)))

    @precondition(lambda self: self.model.paged)
    @rule(data=st.data())
    def extend(self, data: st.DataObject) -> None:
        """EXTEND-*: grow some live requests and start new ones in one batch."""
        ps = self.ps
        grown = self._draw_requests(data, 3)
        new = data.draw(st.integers(0, 2))
        batch: list[tuple[Request | None, int, int, int]] = []
        for req in grown:
            pre = len(req.row)
            batch.append((req, pre, pre + data.draw(st.integers(0, ps + 1)), req.row[-1]))
        batch += [(None, 0, data.draw(st.integers(1, 2 * ps + 1)), -1) for _ in range(new)]
        batch = data.draw(st.permutations(batch))
        prefix = [b[1] for b in batch]
        seq = [b[2] for b in batch]
        last = [b[3] for b in batch]
        num_tokens = sum(seq) - sum(prefix) if data.draw(st.booleans()) else None
        self.pre = self.model.copy()
        result = self.model.alloc_extend(prefix, seq, last, num_tokens)
        self._accepted(lambda m: accept_extend(m, prefix, seq, last, result))
        if result is None:
            return
        k = 0
        for entry, pre, end, _ in batch:
            part = result[k:k + end - pre]
            k += end - pre
            if entry is not None:
                entry.row += part
            elif part:
                self.requests.append(Request(part))

    @precondition(lambda self: self.model.paged)
    @rule(data=st.data())
    def decode(self, data: st.DataObject) -> None:
        """DECODE-*: one token for some live requests and some new ones."""
        batch: list[Request | None] = [*self._draw_requests(data, 4)]
        batch += [None] * data.draw(st.integers(0, 2))
        batch = data.draw(st.permutations(batch))
        seq = [1 if entry is None else len(entry.row) + 1 for entry in batch]
        last = [-1 if entry is None else entry.row[-1] for entry in batch]
        self.pre = self.model.copy()
        result = self.model.alloc_decode(seq, last)
        self._accepted(lambda m: accept_decode(m, seq, last, result))
        if result is None:
            return
        for entry, slot in zip(batch, result):
            if entry is None:
                self.requests.append(Request([slot]))
            else:
                entry.row.append(slot)

    # -- release -------------------------------------------------------------------------------
    @precondition(lambda self: self.requests)
    @rule(data=st.data(), how=st.sampled_from(["free", "free_full", "segment", "segments"]))
    def finish(self, data: st.DataObject, how: str) -> None:
        """FREE-4 / SEG-2..6: a request's live row released whole, or split into ascending
        touching segments (shared boundary pages, empty segments)."""
        req = self.requests.pop(data.draw(st.integers(0, len(self.requests) - 1)))
        live = req.row[req.start:]
        if how in ("free", "free_full"):
            order = data.draw(st.permutations(live))
            self._both(lambda m: getattr(m, how)(order))
        elif how == "segment":
            self._both(lambda m: m.free_segment(live, start_pos=req.start))
        else:
            cuts = sorted(data.draw(st.lists(st.integers(req.start, len(req.row)), max_size=4)))
            bounds = [req.start, *cuts, len(req.row)]
            segments = [(req.row[a:b], a) for a, b in pairwise(bounds)]
            self._both(lambda m: m.free_segments(segments))

    @precondition(lambda self: self.requests and self.model.free_group is not None)
    @rule(data=st.data())
    def finish_in_two_frees(self, data: st.DataObject) -> None:
        """GROUP-6: inside a group, two free() calls may name one page."""
        req = self.requests.pop(data.draw(st.integers(0, len(self.requests) - 1)))
        cut = data.draw(st.integers(req.start, len(req.row)))
        self._both(lambda m: m.free(req.row[req.start:cut]))
        self._both(lambda m: m.free(req.row[cut:]))

    @precondition(lambda self: any(len(r.row) - r.start > self.ps for r in self.requests))
    @rule(data=st.data(), rollback=st.booleans())
    def drop_pages(self, data: st.DataObject, rollback: bool) -> None:
        """SEG-2: drop whole out-of-window pages at the front, or roll back whole trailing pages;
        the request keeps at least its last position's page."""
        ps = self.ps
        req = data.draw(st.sampled_from(self.requests))
        last_full = (len(req.row) - 1) // ps * ps  # page start of the last position
        cut_points = list(range(req.start + ps, last_full + 1, ps))
        if not cut_points:
            return
        cut = data.draw(st.sampled_from(cut_points))
        if rollback:
            tail = req.row[cut:]
            self._both(lambda m: m.free_segment(tail, start_pos=cut))
            del req.row[cut:]
        else:
            head = req.row[req.start:cut]
            self._both(lambda m: m.free_segment(head, start_pos=req.start))
            req.start = cut

    @precondition(lambda self: self.model.free_group is None)
    @rule()
    def group_begin(self) -> None:
        self._both(lambda m: m.free_group_begin())

    @precondition(lambda self: self.model.free_group is not None)
    @rule(twice=st.booleans())
    def group_end(self, twice: bool) -> None:
        """GROUP-4 release; GROUP-2: a second end is a no-op."""
        self._both(lambda m: m.free_group_end())
        if twice:
            free_pages = self.model.get_all_free_pages()
            self._both(lambda m: m.free_group_end())
            assert self.model.get_all_free_pages() == free_pages

    @precondition(lambda self: self.model.staged)
    @rule()
    def merge(self) -> None:
        """SORT-3: the free list is sorted after a merge, nothing staged."""
        self._both(lambda m: m.merge_and_sort_free())
        assert not self.model.staged
        assert self.model.free_pages == sorted(self.model.free_pages)

    @precondition(lambda self: self.requests)
    @rule(data=st.data())
    def clear_or_resize(self, data: st.DataObject) -> None:
        """LIFE-1, LIFE-2: everything free again, ascending (rarely: most draws do nothing)."""
        choice = data.draw(st.sampled_from(["keep", "keep", "keep", "clear", "resize"]))
        if choice == "keep":
            return
        size = self.model.size
        if choice == "resize":
            size = data.draw(st.integers(0, 14)) * self.ps + data.draw(st.integers(0, self.ps - 1))
            self._both(lambda m: m.resize(ResizeConfig(size)))
        else:
            self._both(lambda m: m.clear())
        self.requests = []
        assert self.model.get_all_free_pages() == list(range(1, size // self.ps + 1))

    # -- invariants ----------------------------------------------------------------------------
    @invariant()
    def consistent(self) -> None:
        self.model.check_invariants()
        self.shadow.check_invariants()
        check_census(self.shadow, self.model.get_all_free_pages(), self.model.available_size())
        per_request = [{s // self.ps for s in req.row[req.start:]} for req in self.requests]
        live = set().union(*per_request)
        assert len(live) == sum(map(len, per_request)), "two live requests share a page"
        assert sorted(live | set(self.model.deferred_pages())) == self.model.owned_pages()
        assert self.model.available_size() == len(self.model.get_all_free_pages()) * self.ps


SpecMachine.TestCase.settings = settings(stateful_step_count=40)
TestSpecMachine = SpecMachine.TestCase
TestSpecMachine.__doc__ = (
    "INV-1..4, MODEL-3, ALLOC-3/4, EXTEND-4..7, DECODE-4..7, FREE-4, SEG-2..6, GROUP-2/4/6, SORT-3"
)
