"""The DeepSeek V4 variant of the HiSparse family (a target declaring ``dsv4``,
``HSP-12..16``): its census, and the scheduler model that drives it.

Requests are prefilled and continued in chunks (``alloc_extend``: the logical hybrid side and
the compressed device side, one device slot per four positions), decoded (``alloc_decode``:
logical slots only), moved to decode (``alloc_device_buffer`` of the compressed ids of the
row: the bound device slots become the buffer), their window slides (``free_swa`` of whole
leading pages), and they finish: ``free`` of the row, or ``free_swa`` of what is left then
``free_full`` (the logical full side alone, once the buffer took the device slots), then
``free_hisparse_indices`` of the buffer; frees run in free groups now and then (``free`` and
``free_full`` deferred), the location helpers are read and the pair is cleared now and then.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from kvpool.spec.hisparse_dsv4 import HiSparseDSV4Model, compressed_ids

from ...engine.draws import Draws
from ...engine.examples import record_example
from ...engine.machines import FamilyMachine
from ...engine.steps import ActionMachine, action
from .dsv4_census import dsv4_sizes
from .executor import HiSparseExecutor
from .targets import HiSparseCapabilities


@dataclass
class Row:
    """One request: its logical row, how many leading slots slid out of the window (their SWA
    side freed) and its device buffer (None: none yet)."""

    row: list[int] = field(default_factory=list)
    slid: int = 0
    buffer: list[int] | None = None


class HiSparseDSV4Machine(FamilyMachine, ActionMachine):
    """Scheduler model over one DSV4 configuration (see the module docstring)."""

    executor_class = HiSparseExecutor
    ex: HiSparseExecutor
    caps: HiSparseCapabilities
    rows: list[Row]

    def __init__(self) -> None:
        super().__init__()
        self.ready = False

    @property
    def m(self) -> HiSparseDSV4Model:
        model = self.ex.model
        assert isinstance(model, HiSparseDSV4Model)
        return model

    def start(self, data: Draws) -> None:
        """A fresh pair: 2-8 full pages, 1-8 SWA pages, 1-6 device pages of 1 or 2 slots."""
        hps = data.choice([1, 2])
        self.ex.create_dsv4(dsv4_sizes(self.ps, hps, data.integer(2, 8), data.integer(1, 8),
                                       data.integer(1, 6)))
        self.ready = True
        self.ex.note(f"dsv4.hps{hps}")

    def _request(self, data: Draws, ok: Any = None) -> Row | None:
        rows = [r for r in self.rows if ok is None or ok(r)]
        return rows[data.integer(0, len(rows) - 1)] if rows else None

    def _bound(self, r: Row) -> int:
        return sum(1 for c in compressed_ids(r.row) if c in self.m.mapping)

    @action()
    def arrive(self, data: Draws) -> None:
        """1-2 fresh requests prefilled at once (``alloc_extend``)."""
        seqs = [data.integer(1, 4 * self.ps) for _ in range(data.integer(1, 2))]
        out = self.ex.call("alloc_extend", prefix_lens=[0] * len(seqs), seq_lens=seqs,
                           last_loc=[-1] * len(seqs))
        if out is None:
            self.ex.note("dsv4.extend.short")
            return
        self.ex.note("dsv4.extend")
        for n in seqs:
            self.rows.append(Row(out[:n]))
            out = out[n:]
        if 4 * self.m.device.available_size() < self.m.logical.available_size():
            self.ex.note("dsv4.capacity.device")

    @action(lambda self: any(r.buffer is None and not r.slid and r.row for r in self.rows))
    def chunk(self, data: Draws) -> None:
        """The next chunk of a request not yet in decode (``alloc_extend`` from its prefix)."""
        r = self._request(data, lambda r: r.buffer is None and not r.slid and r.row)
        assert r is not None
        pre = len(r.row)
        out = self.ex.call("alloc_extend", prefix_lens=[pre],
                           seq_lens=[pre + data.integer(1, 2 * self.ps)], last_loc=[r.row[-1]])
        self.ex.note("dsv4.extend.short" if out is None else "dsv4.extend.chunk")
        r.row += out or []

    @action(lambda self: any(r.row and not r.slid for r in self.rows))
    def decode(self, data: Draws) -> None:
        """A request decodes a token (``alloc_decode``: nothing is bound)."""
        r = self._request(data, lambda r: r.row and not r.slid)
        assert r is not None
        if not self.caps.atomic_decode and self.m.logical.available_size() < self.ps:
            return  # a side would keep the page it took (SGL-HSP-DSV4-DECODE-LEAK)
        out = self.ex.call("alloc_decode", seq_lens=[len(r.row) + 1], last_loc=[r.row[-1]])
        if out is not None:
            self.ex.note("dsv4.decode")
        r.row += out or []

    @action(lambda self: any(r.buffer is None for r in self.rows))
    def start_decode(self, data: Draws) -> None:
        """A request's device buffer of 1-3 device pages from its compressed ids; when the
        device side cannot grow it, exactly its bound slots rounded down (at least a page)."""
        r = self._request(data, lambda r: r.buffer is None)
        assert r is not None
        hps, bound = self.m.hisparse_page_size, self._bound(r)
        need = hps * data.integer(1, 3)
        if bound < need and need - bound > self.m.device.available_size() - hps:
            need = max(hps, bound // hps * hps)
            if bound < need and need - bound > self.m.device.available_size() - hps:
                return
        r.buffer = self.ex.call("alloc_device_buffer", slots=compressed_ids(r.row),
                                need_size=need)
        self.ex.note("dsv4.buffer.reuse" if bound > need else "dsv4.buffer.grow"
                     if bound < need else "dsv4.buffer.exact")

    @action(lambda self: any(r.buffer is not None and len(r.row) - r.slid > self.ps
                             for r in self.rows))
    def slide(self, data: Draws) -> None:
        """A decoding request's window slides: ``free_swa`` of its next whole leading pages."""
        r = self._request(data, lambda r: r.buffer is not None and len(r.row) - r.slid > self.ps)
        assert r is not None
        end = r.slid + self.ps * data.integer(1, (len(r.row) - r.slid - 1) // self.ps)
        self.ex.call("free_swa", slots=r.row[r.slid:end])
        r.slid = end
        self.ex.note("dsv4.free_swa")

    def _finish(self, r: Row) -> None:
        if r.row and r.slid:  # the window slid: what is left of the SWA side, then the full
            if r.slid < len(r.row):
                self.ex.call("free_swa", slots=r.row[r.slid:])
            self.ex.call("free_full", slots=r.row)
            self.ex.note("dsv4.free_full")
        elif r.row:
            bound = self._bound(r)
            self.ex.call("free", slots=r.row)
            self.ex.note("dsv4.free.bound" if bound else "dsv4.free")
        if r.buffer is not None:
            self.ex.call("free_hisparse_indices", slots=r.buffer)
            self.ex.note("dsv4.buffer.free")
        self.rows.remove(r)

    @action(lambda self: self.rows, rank=0)
    def finish(self, data: Draws) -> None:
        """A request frees its row and its device buffer (see the module docstring)."""
        r = self._request(data)
        assert r is not None
        self._finish(r)

    @action(lambda self: self.rows, rank=2)
    def finish_in_group(self, data: Draws) -> None:
        """1-2 requests finish inside one free group (``free`` / ``free_full`` deferred)."""
        self.ex.call("free_group_begin")
        for _ in range(data.integer(1, 2)):
            r = self._request(data)
            if r is not None:
                self._finish(r)
        self.ex.call("free_group_end")
        self.ex.note("dsv4.group")

    @action(rank=2)
    def translate(self, data: Draws) -> None:
        """The compressed and device ``last_loc`` of a few requests and of ``-1``."""
        locs = [*[r.row[-1] for r in self.rows if r.row][:3], -1]
        self.ex.call("get_last_loc_compressed", last_loc=locs)
        self.ex.call("get_last_loc_hisparse_device", last_loc=locs)

    @action(rank=3)
    def clear(self, data: Draws) -> None:
        """``clear()`` now and then: every side whole, the mapping all 0 but its ``-1``."""
        if not data.boolean(0.15):
            return
        self.ex.call("clear")
        self.rows = []

    def teardown(self) -> None:
        """Finish every request (the pair must be whole again); record the example."""
        try:
            if self.ex.model is not None and not self.ex.failed:
                for r in list(self.rows):
                    self._finish(r)
                m = self.m
                assert not m.mapping and m.device.available_size() == m.device.num_pages * \
                    m.hisparse_page_size
        finally:
            record_example(type(self), self.ex, sys.exc_info()[1])


__all__ = ["HiSparseDSV4Machine", "Row"]
