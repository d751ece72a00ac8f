"""The HiSparse scheduler model: requests are prefilled (``alloc_extend``, page size 1 also
``alloc``) with their slots bound to device slots, continued in chunks, moved to decode
(``alloc_device_buffer``: the bound device slots become the request's device buffer), decoded
(``alloc_decode`` / ``alloc_logical_only``: logical slots only), and finished (``free`` of the
row, sometimes its tail from a page boundary first, then ``free_hisparse_indices`` of the
buffer, now and then with the padding page named); the location helpers are read, frees run
inside no-op free groups, the pair is cleared now and then, and (checked targets) a call breaks
a caller rule (:mod:`.badcalls`). Declares the family's ``FAMILY``."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from kvpool.spec.hisparse_sizing import device_buffer_split

from ...engine.draws import Draws
from ...engine.examples import record_example
from ...engine.families import Family
from ...engine.machines import FamilyMachine, bind
from ...engine.steps import ActionMachine, action
from ...engine.target import Config, Target
from .badcalls import BadCalls
from .coverage import HISPARSE
from .executor import HiSparseExecutor
from .targets import HiSparseCapabilities


@dataclass
class Request:
    """One request: its logical row (position order) and its device buffer (None: none)."""

    row: list[int] = field(default_factory=list)
    buffer: list[int] | None = None


class HiSparseMachine(FamilyMachine, BadCalls, ActionMachine):
    """Scheduler model over one HiSparse configuration (bound by :func:`hisparse_machine_for`);
    each entry of ``rows`` is one :class:`Request`."""

    executor_class = HiSparseExecutor
    ex: HiSparseExecutor
    caps: HiSparseCapabilities
    rows: list[Request]

    def __init__(self) -> None:
        super().__init__()
        self.ready = False

    def start(self, data: Draws) -> None:
        """A fresh pair of 1-8 device pages, a ratio of the target's."""
        ratio = data.choice(list(self.caps.ratios))
        self.ex.create(self.ps * data.integer(1, 8), ratio)
        self.ready = True
        if ratio == 1:
            self.ex.note("ratio.one")
        if self.ex.need_sort:
            self.ex.note("need_sort")

    def _request(self, data: Draws, ok: object = None) -> Request | None:
        rows = [r for r in self.rows if ok is None or ok(r)]  # type: ignore[operator]
        return rows[data.integer(0, len(rows) - 1)] if rows else None

    def _bound(self, r: Request) -> list[int]:
        m = self.ex.model
        assert m is not None
        return [s for s in r.row if s in m.mapping]

    def _continues(self, r: Request) -> bool:
        """``alloc_extend`` may continue ``r``: aligned, or its last slot bound."""
        m = self.ex.model
        assert m is not None
        return bool(r.row) and (len(r.row) % self.ps == 0 or r.row[-1] in m.mapping)

    @action()
    def arrive(self, data: Draws) -> None:
        """1-3 fresh requests prefilled at once (``alloc_extend``)."""
        m = self.ex.model
        assert m is not None
        seqs = [data.integer(1, 3 * self.ps + 2) for _ in range(data.integer(1, 3))]
        if data.boolean(0.2):  # more than the device side holds
            seqs[0] = m.device.available_size() + 1
        out = self.ex.call("alloc_extend", prefix_lens=[0] * len(seqs), seq_lens=seqs,
                           last_loc=[-1] * len(seqs))
        if out is None:
            self.ex.note("extend.short")
            return
        self.ex.note("extend.new")
        for n in seqs:
            self.rows.append(Request(out[:n]))
            out = out[n:]
        if m.device.available_size() < m.logical.available_size():
            self.ex.note("capacity.device")

    @action(lambda self: self.ps == 1)
    def arrive_tokens(self, data: Draws) -> None:
        """Page size 1: a request of 1-6 tokens, or more than the device side holds
        (``alloc``)."""
        m = self.ex.model
        assert m is not None
        over = data.boolean(0.3)
        need = m.device.available_size() + 1 if over else data.integer(1, 6)
        rollback = need <= m.logical.available_size() and need > m.device.available_size()
        out = self.ex.call("alloc", need_size=need)
        if out is None:
            self.ex.note("alloc.rollback" if rollback else "alloc.short")
            return
        self.ex.note("alloc.ok")
        self.rows.append(Request(out))

    @action(lambda self: any(self._continues(r) for r in self.rows))
    def chunk(self, data: Draws) -> None:
        """The next chunk of a request (``alloc_extend`` from its prefix)."""
        r = self._request(data, self._continues)
        assert r is not None
        pre = len(r.row)
        out = self.ex.call("alloc_extend", prefix_lens=[pre],
                           seq_lens=[pre + data.integer(1, 2 * self.ps)], last_loc=[r.row[-1]])
        if out is None:
            self.ex.note("extend.short")
            return
        self.ex.note("extend.continue" if pre % self.ps else "extend.new")
        r.row += out

    @action(lambda self: any(r.buffer is None for r in self.rows))
    def start_decode(self, data: Draws) -> None:
        """A request's device buffer (``alloc_device_buffer``) of 0 to a few pages past its
        bound slots, within what the device side has."""
        m = self.ex.model
        assert m is not None
        r = self._request(data, lambda r: r.buffer is None)
        assert r is not None
        bound = len(self._bound(r))
        need = self.ps * data.integer(0, -(-bound // self.ps) + 2)
        surplus, pad, extra = device_buffer_split(bound, need, self.ps)
        if extra > m.device.available_size():
            need = bound // self.ps * self.ps
            surplus, pad, extra = device_buffer_split(bound, need, self.ps)
        r.buffer = self.ex.call("alloc_device_buffer", slots=list(r.row), need_size=need)
        self.ex.note("buffer.reuse" if surplus else "buffer.grow" if extra else "buffer.exact")
        if pad:
            self.ex.note("buffer.pad")

    @action(lambda self: any(r.row for r in self.rows))
    def decode(self, data: Draws) -> None:
        """1-3 requests decode a token (``alloc_decode``), or one takes 1-3 logical slots
        (``alloc_logical_only``, speculative tokens)."""
        live = [r for r in self.rows if r.row]
        if (self.ps > 1 or self.caps.decode_ps1) and data.boolean():
            picked = [live[i] for i in sorted({data.integer(0, len(live) - 1)
                                               for _ in range(data.integer(1, 3))})]
            out = self.ex.call("alloc_decode", seq_lens=[len(r.row) + 1 for r in picked],
                               last_loc=[r.row[-1] for r in picked])
            self.ex.note("logical.short" if out is None else "decode.ok")
            for r, s in zip(picked, out or []):
                r.row.append(s)
            return
        r = live[data.integer(0, len(live) - 1)]
        pre = len(r.row)
        out = self.ex.call("alloc_logical_only", prefix_lens=[pre],
                           seq_lens=[pre + data.integer(1, 3)], last_loc=[r.row[-1]])
        self.ex.note("logical.short" if out is None else "logical_only.ok")
        r.row += out or []

    def _finish(self, data: Draws, r: Request) -> None:
        ps = self.ps
        if ps > 1 and len(r.row) > ps and data.boolean(0.3):
            cut = ps * data.integer(1, (len(r.row) - 1) // ps)
            self.ex.call("free", slots=r.row[cut:])
            self.ex.note("finish.tail")
            r.row = r.row[:cut]
        if r.row:
            bound = bool(self._bound(r))
            self.ex.call("free", slots=r.row[::-1] if data.boolean() else r.row)
            self.ex.note("finish")
            if bound:
                self.ex.note("finish.bound")
        if r.buffer is not None:
            sink = data.boolean(0.3)
            self.ex.call("free_hisparse_indices", slots=[0, *r.buffer] if sink else r.buffer)
            self.ex.note("buffer.sink" if sink else "buffer.free")
        self.rows.remove(r)

    @action(lambda self: self.rows, rank=0)
    def finish(self, data: Draws) -> None:
        """A request frees its row (maybe its tail first) and its device buffer."""
        r = self._request(data)
        assert r is not None
        self._finish(data, r)

    @action(lambda self: self.caps.groups and self.rows, rank=2)
    def finish_in_group(self, data: Draws) -> None:
        """A request finishes inside ``free_group_begin`` / ``free_group_end`` (immediate)."""
        r = self._request(data)
        assert r is not None
        self.ex.call("free_group_begin")
        self._finish(data, r)
        self.ex.call("free_group_end")
        self.ex.note("group")

    @action(rank=2)
    def translate(self, data: Draws) -> None:
        """The device and compressed ``last_loc`` of a few requests and of ``-1``."""
        locs = [*[r.row[-1] for r in self.rows if r.row][:3], -1]
        self.ex.call("get_last_loc_hisparse_device", last_loc=locs)
        self.ex.call("get_last_loc_compressed", last_loc=locs)

    @action(lambda self: self.caps.clear, rank=3)
    def clear(self, data: Draws) -> None:
        """``clear()``: both sides whole, the mapping empty."""
        self.ex.call("clear")
        self.rows = []

    def teardown(self) -> None:
        """Free every request and buffer (the pair must be whole again); record the example."""
        try:
            m = self.ex.model
            if m is not None and not self.ex.failed:
                for r in list(self.rows):
                    if r.row:
                        self.ex.call("free", slots=r.row)
                    if r.buffer:
                        self.ex.call("free_hisparse_indices", slots=r.buffer)
                self.rows = []
                assert not m.mapping and m.available_size() == min(
                    m.logical.num_pages, m.device.num_pages) * self.ps
        finally:
            record_example(type(self), self.ex, sys.exc_info()[1])


def hisparse_machine_for(target: Target, config: Config) -> type[FamilyMachine]:
    """A machine class bound to one HiSparse configuration (the DSV4 variant's own scheduler
    model, :mod:`.dsv4`, where the target declares ``dsv4``)."""
    if getattr(target.caps, "dsv4", False):
        from .dsv4 import HiSparseDSV4Machine

        return bind(HiSparseDSV4Machine,
                    f"HiSparseDSV4_ps{config.page_size}_ns{int(config.need_sort)}", target,
                    config)
    return bind(HiSparseMachine, f"HiSparse_ps{config.page_size}_ns{int(config.need_sort)}",
                target, config)


FAMILY = Family("hisparse", HiSparseExecutor, hisparse_machine_for, HISPARSE,
                HiSparseCapabilities, "kvpool_hisparse_capabilities")
