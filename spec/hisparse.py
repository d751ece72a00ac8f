"""SGLang's HiSparse allocator pair (``HSP-*``, SPEC.md section 20): a logical pool
``host_to_device_ratio`` times larger than a device-buffer pool, and the full -> device
mapping that binds logical slots to device slots.

:class:`HiSparseModel` is the reference model, standard library only: two
:class:`~kvpool.spec.model.AllocatorModel` (paged, SGLang's exact order) and the mapping as a
dict ``logical slot -> device slot`` (absent: 0, unbound). Lists of ints stand for SGLang's
int64 tensors. A prefill (``alloc_extend``) binds each new logical slot to a device slot; a
decode (``alloc_decode``, ``alloc_logical_only``) takes logical slots only;
``alloc_device_buffer`` unbinds a request's slots and turns their device slots into a buffer the
caller holds (``buffers``: device pages) until ``free_hisparse_indices``; ``free`` releases
logical pages and the device pages their bound slots lie on::

    size 8, r 2, ps 1:  alloc(2) -> [1, 2], mapping {1: 1, 2: 2}
    alloc_device_buffer([1, 2], 4) -> [1, 2, 3, 4]  (mapping {}; device pages 1..4 a buffer)
    free([1, 2]) frees logical 1, 2; free_hisparse_indices([1, 2, 3, 4]) the buffer

Caller errors raise :class:`~kvpool.spec.errors.ContractViolation` naming the clause, before
anything changes (``ERR-1``). The arithmetic is :mod:`kvpool.spec.hisparse_sizing`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import hisparse_sizing as sizing
from .errors import ContractViolation
from .layout import last_loc_aligned, num_new_pages
from .model import AllocatorModel
from .rules import OWNED


def check_ratio(size: int, page_size: int, ratio: int) -> None:
    """Reject a pool the constructor cannot build (``HSP-1``): ``size >= 0``,
    ``page_size >= 1``, ``host_to_device_ratio >= 1`` (ints)."""
    for name, value, low in (("size", size, 0), ("page_size", page_size, 1),
                             ("host_to_device_ratio", ratio, 1)):
        if type(value) is not int or value < low:
            raise ContractViolation("HSP-1", f"{name} {value!r}: an int >= {low}")


class HiSparseModel:
    """The HiSparse pair (see the module docstring). ``rule`` is the clause that decided the
    last call's effect (the oracle reports a difference there under it).

    inv: set(self.mapping.values()).isdisjoint({s for p in self.buffers for s in self._page(p)})
    inv: len(set(self.mapping.values())) == len(self.mapping)
    """

    def __init__(self, size: int, page_size: int = 1, *, ratio: int = 2,
                 need_sort: bool = False) -> None:
        """Both sides empty: logical pages ``1..size * ratio // ps``, device pages
        ``1..size // ps``, every mapping entry 0 but the trailing ``-1`` (``HSP-1``)."""
        check_ratio(size, page_size, ratio)
        self.size_hisparse, self.page_size, self.ratio = size, page_size, ratio
        self.size_full = sizing.logical_size(size, ratio)
        self.logical = AllocatorModel(self.size_full, page_size, paged=True, need_sort=need_sort)
        self.device = AllocatorModel(size, page_size, paged=True, need_sort=need_sort)
        self.mapping: dict[int, int] = {}
        self.buffers: set[int] = set()  # device pages held by the caller as a device buffer
        self.rule = "HSP-1"

    # -- queries ---------------------------------------------------------------------------
    def _page(self, page: int) -> range:
        return range(page * self.page_size, (page + 1) * self.page_size)

    def available_size(self) -> int:
        """The smaller side's free tokens (``HSP-2``)."""
        return sizing.capacity(self.logical.available_size(), self.device.available_size())

    def mapping_list(self) -> list[int]:
        """The whole mapping as SGLang's tensor holds it (``HSP-3``): one entry per logical
        slot id, 0 where unbound, then ``-1``."""
        out = [0] * sizing.mapping_len(self.size_hisparse, self.ratio, self.page_size)
        out[-1] = -1
        for slot, dev in self.mapping.items():
            out[slot] = dev
        return out

    def translate(self, slots: Sequence[int]) -> list[int]:
        """``mapping[slots]``: the device slot of each (0 unbound, ``-1`` for ``-1``)."""
        table = self.mapping_list()
        return [table[s] for s in slots]

    def get_last_loc_compressed(self, last_locs: Sequence[int]) -> list[int]:
        """The identity at compress ratio 1 (``HSP-10``)."""
        return [sizing.compressed_last_loc(x, 1) for x in last_locs]

    def get_last_loc_hisparse_device(self, last_locs: Sequence[int]) -> list[int]:
        """``mapping[last_locs]`` (``HSP-10``); ``-1`` stays ``-1``. Raises ContractViolation
        (``HSP-10``) for a location that indexes no mapping entry."""
        end = sizing.mapping_len(self.size_hisparse, self.ratio, self.page_size) - 1
        for x in last_locs:
            if x != -1 and not 0 <= x < end:
                raise ContractViolation("HSP-10", f"last_loc {x} is outside -1, 0..{end - 1}")
        self.rule = "HSP-10"
        return self.translate(last_locs)

    # -- allocation ------------------------------------------------------------------------
    def alloc(self, need_size: int) -> list[int] | None:
        """Page size 1 only: ``need_size`` logical slots, then as many device slots, bound
        pairwise (``HSP-4``). Logical short: None. Device short: None, the logical slots freed
        again (their pages prepended, or staged under ``need_sort``). Raises ContractViolation
        (``HSP-4``) at page size > 1 or for a negative count."""
        if self.page_size != 1:
            raise ContractViolation("HSP-4", "alloc is for page size 1; use alloc_extend")
        if type(need_size) is not int or need_size < 0:
            raise ContractViolation("HSP-4", f"need_size {need_size!r}: an int >= 0")
        self.rule = "HSP-4"
        logical = self.logical.alloc(need_size)
        if logical is None:
            return None
        device = self.device.alloc(need_size)
        if device is None:
            self.logical.free(logical)
            return None
        self.mapping.update((s, d) for s, d in zip(logical, device) if s)
        return logical

    def _device_last_loc(self, prefix_lens: Sequence[int], last_loc: Sequence[int]) -> list[int]:
        """Each request's device ``last_loc``: ``mapping[last_loc]``; an unaligned prefix's must
        be bound (``HSP-5``)."""
        out = []
        for pre, loc in zip(prefix_lens, last_loc):
            dev = self.translate([loc])[0] if -1 <= loc < len(self.mapping_list()) - 1 else 0
            if pre % self.page_size and (dev <= 0 or not last_loc_aligned(pre, dev, self.page_size)):
                raise ContractViolation("HSP-5", f"last_loc {loc} (prefix {pre}) has no device "
                                                 "slot: an unaligned prefix's last slot is bound")
            out.append(dev)
        return out

    def alloc_extend(self, prefix_lens: Sequence[int], seq_lens: Sequence[int],
                     last_loc: Sequence[int], extend_num_tokens: int | None = None
                     ) -> list[int] | None:
        """Prefill (``HSP-5``): None, nothing changed, when either side has fewer free pages
        than the batch's new pages; else the logical side's ``alloc_extend``, then the device
        side's with each ``last_loc`` translated through the mapping, the new slots bound in
        order. Raises ContractViolation (``HSP-5``) for a batch the logical side rejects or an
        unaligned prefix whose last slot is unbound."""
        try:
            self.logical.copy().alloc_extend(prefix_lens, seq_lens, last_loc, extend_num_tokens)
        except ContractViolation as err:
            raise ContractViolation("HSP-5", err.detail) from None
        dev_loc = self._device_last_loc(prefix_lens, last_loc)
        self.rule = "HSP-5"
        need = sum(num_new_pages(p, s, self.page_size) for p, s in zip(prefix_lens, seq_lens))
        ps = self.page_size
        if need > self.logical.available_size() // ps or need > self.device.available_size() // ps:
            return None
        logical = self.logical.alloc_extend(prefix_lens, seq_lens, last_loc, extend_num_tokens)
        assert logical is not None
        # an aligned prefix's device last_loc is never read: laid out as a fresh row
        rows = [(p, s, d) if p % ps else (0, s - p, -1)
                for p, s, d in zip(prefix_lens, seq_lens, dev_loc)]
        device = self.device.alloc_extend([r[0] for r in rows], [r[1] for r in rows],
                                          [r[2] for r in rows])
        assert device is not None
        self.mapping.update(zip(logical, device))
        return logical

    def alloc_decode(self, seq_lens: Sequence[int], last_loc: Sequence[int]) -> list[int] | None:
        """Logical slots only, unbound (``HSP-6``): the logical side's ``alloc_decode``."""
        try:
            self.logical.copy().alloc_decode(seq_lens, last_loc)
        except ContractViolation as err:
            raise ContractViolation("HSP-6", err.detail) from None
        self.rule = "HSP-6"
        return self.logical.alloc_decode(seq_lens, last_loc)

    def alloc_logical_only(self, prefix_lens: Sequence[int], seq_lens: Sequence[int],
                           last_loc: Sequence[int], extend_num_tokens: int | None = None
                           ) -> list[int] | None:
        """Logical slots only, unbound (``HSP-6``): the logical side's ``alloc_extend``."""
        try:
            self.logical.copy().alloc_extend(prefix_lens, seq_lens, last_loc, extend_num_tokens)
        except ContractViolation as err:
            raise ContractViolation("HSP-6", err.detail) from None
        self.rule = "HSP-6"
        return self.logical.alloc_extend(prefix_lens, seq_lens, last_loc, extend_num_tokens)

    # -- device buffers and frees ---------------------------------------------------------
    def _owned_logical(self, slots: Sequence[int], clause: str) -> None:
        end = (self.logical.num_pages + 1) * self.page_size
        if len(set(slots)) != len(slots):
            raise ContractViolation(clause, f"a slot is named twice in {list(slots)}")
        for s in slots:
            if type(s) is not int or not self.page_size <= s < end:
                raise ContractViolation(clause, f"slot {s!r} is outside {self.page_size}..{end - 1}")
            if self.logical.status_of(s // self.page_size) != OWNED:
                raise ContractViolation(clause, f"logical slot {s} is not held (its page is "
                                                f"{self.logical.status_of(s // self.page_size)})")

    def alloc_device_buffer(self, allocated_indices: Sequence[int], need_size: int) -> list[int]:
        """A request's device buffer of ``need_size`` slots (``HSP-7``): the device slots bound
        to ``allocated_indices`` (in order, unbound ones skipped) are unbound; with at least
        ``need_size`` of them the first ``need_size`` are the buffer and the pages of the rest
        go back to the device side (``free``); with fewer, the last one's page is padded with
        its remaining slots and whole pages are taken from the device side. The buffer's pages
        are the caller's until ``free_hisparse_indices``.

        Raises ContractViolation (``HSP-7``) when ``need_size`` is not a non-negative page
        multiple, a slot is not held, the bound device slots do not fill whole pages from a
        page start (one page per ``page_size`` in order), a device page they lie on is also
        bound to a slot not named, or the device side lacks the pages."""
        ps = self.page_size
        if type(need_size) is not int or need_size < 0 or need_size % ps:
            raise ContractViolation("HSP-7", f"need_size {need_size!r}: a page multiple >= 0")
        self._owned_logical(allocated_indices, "HSP-7")
        bound = [self.mapping[s] for s in allocated_indices if s in self.mapping]
        for i, dev in enumerate(bound):
            if dev % ps != i % ps or dev // ps != bound[i - i % ps] // ps:
                raise ContractViolation("HSP-7", f"bound device slots {bound} do not fill "
                                                 "whole pages from a page start")
        pages = {d // ps for d in bound}
        named = set(allocated_indices)
        stray = [s for s, d in self.mapping.items() if d // ps in pages and s not in named]
        if stray:
            raise ContractViolation("HSP-7", f"logical slots {stray} stay bound to the device "
                                             "pages of the buffer")
        surplus, pad, extra = sizing.device_buffer_split(len(bound), need_size, ps)
        if extra // ps > self.device.available_size() // ps:
            raise ContractViolation("HSP-7", f"{extra // ps} device pages needed, "
                                             f"{self.device.available_size() // ps} free")
        self.rule = "HSP-7"
        for s in allocated_indices:
            self.mapping.pop(s, None)
        if surplus:
            buffer, rest = bound[:need_size], bound[need_size:]
            self.device.free(rest)
        else:
            buffer = bound + [bound[-1] + 1 + k for k in range(pad)] if pad else bound
            more = self.device.alloc(extra)
            assert more is not None
            buffer = buffer + more
        self.buffers |= {d // ps for d in buffer}
        return buffer

    def free_hisparse_indices(self, buffer_indices: Sequence[int]) -> None:
        """Release the device pages of ``buffer_indices`` (``HSP-9``); slots below
        ``page_size`` (the padding page) are skipped. Raises ContractViolation (``HSP-9``) for a
        slot >= ``page_size`` that is not on a device-buffer page the caller holds."""
        ps = self.page_size
        kept = [s for s in buffer_indices if s >= ps]
        for s in kept:
            if s // ps not in self.buffers:
                raise ContractViolation("HSP-9", f"device slot {s} is not in a held device buffer")
        self.rule = "HSP-9"
        if kept:
            self.device.free(kept)
            self.buffers -= {s // ps for s in kept}

    def free(self, free_index: Sequence[int]) -> None:
        """Release the logical pages of ``free_index`` and the device pages of its bound slots,
        unbinding them (``HSP-8``); empty: nothing. Raises ContractViolation (``HSP-8``) for a
        slot not held, named twice, or a bound slot on a released page (logical or device) that
        ``free_index`` does not name (it would stay bound to a freed page)."""
        if not free_index:
            self.rule = "HSP-8"
            return
        self._owned_logical(free_index, "HSP-8")
        ps = self.page_size
        pages = {s // ps for s in free_index}
        named = set(free_index)
        dev_pages = {self.mapping[s] // ps for s in free_index if s in self.mapping}
        stray = [s for s, d in self.mapping.items()
                 if s not in named and (s // ps in pages or d // ps in dev_pages)]
        if stray:
            raise ContractViolation("HSP-8", f"bound slots {stray} share a released page and "
                                             "are not named")
        self.rule = "HSP-8"
        bound = [self.mapping.pop(s) for s in free_index if s in self.mapping]
        self.logical.free(list(free_index))
        if bound:
            self.device.free(bound)

    def free_group_begin(self) -> None:
        """No deferral: frees inside a group are immediate (``HSP-11``)."""
        self.rule = "HSP-11"

    def free_group_end(self) -> None:
        """Nothing to release (``HSP-11``)."""
        self.rule = "HSP-11"

    def clear(self) -> None:
        """Both sides whole, the mapping all 0 but its ``-1``, no buffers (``HSP-11``)."""
        self.logical.clear()
        self.device.clear()
        self.mapping.clear()
        self.buffers.clear()
        self.rule = "HSP-11"

    def check_invariants(self) -> None:
        """Assert ``HSP-3``: every bound logical slot is held, its device slot on an owned
        device page, no device slot bound twice; every owned device page is a buffer page or
        holds a bound slot, never both."""
        ps = self.page_size
        self.logical.check_invariants()
        self.device.check_invariants()
        problems = []
        devs = list(self.mapping.values())
        if len(set(devs)) != len(devs):
            problems.append("a device slot is bound to two logical slots")
        for s, d in self.mapping.items():
            if self.logical.status_of(s // ps) != OWNED or self.device.status_of(d // ps) != OWNED:
                problems.append(f"binding {s} -> {d} on a page not held")
        bound_pages = {d // ps for d in devs}
        if bound_pages & self.buffers:
            problems.append(f"device pages {sorted(bound_pages & self.buffers)} bound and buffer")
        if set(self.device.owned_pages()) != bound_pages | self.buffers:
            problems.append("an owned device page is neither bound nor a buffer")
        assert not problems, "HSP-3: " + "; ".join(problems)
