"""SGLang's DeepSeek V4 HiSparse allocator (``DeepSeekV4HiSparseTokenToKVPoolAllocator``): the
HiSparse pair of :mod:`kvpool.spec.hisparse` over a hybrid full + SWA logical side, with the
device side holding *compressed* (C4) tokens.

:class:`HiSparseDSV4Model` is the reference model, standard library only: the logical side is a
:class:`~kvpool.spec.hybrid.HybridModel` (SGLang's ``SWATokenToKVPoolAllocator``), the device
side an :class:`~kvpool.spec.model.AllocatorModel` of page size ``hisparse_page_size`` (the C4
pool's), and the mapping binds compressed ids to device slots. Every fourth position of a row is
compressed: full slot ``f`` has compressed id ``f // 4`` when ``(f + 1) % 4 == 0``, none
otherwise (``hisparse_sizing.compressed_last_loc`` is the last complete one of a prefix). The
logical page size is a multiple of 4, so a row's compressed ids follow its positions.

What differs from the plain pair: capacity counts a device slot as 4 tokens
(``min(logical, 4 * device)``, and ``full_available_size`` likewise); a prefill binds the
compressed ids of its new slots to a device extend of ``seq // 4 - prefix // 4`` tokens; a free
frees the device slots of the compressed ids among its slots; ``free_swa`` / ``free_full`` are
the logical side's (no device page moves); a free group defers ``free`` and ``free_full`` to its
end; ``alloc_device_buffer`` takes compressed ids and moves the newest bound slot to the
buffer's last page before cutting (only pages wholly outside the buffer go back).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import hisparse_sizing as sizing
from .errors import ContractViolation
from .hybrid import HybridModel
from .layout import num_new_pages
from .model import AllocatorModel

COMPRESS_RATIO = 4


def compressed_ids(slots: Sequence[int]) -> list[int]:
    """The compressed ids of ``slots``, in order: ``f // 4`` for each ``f`` with
    ``(f + 1) % 4 == 0`` (SGLang's ``translate_loc_from_full_to_compressed``)."""
    return [f // COMPRESS_RATIO for f in slots if (f + 1) % COMPRESS_RATIO == 0]


class HiSparseDSV4Model:
    """The DeepSeek V4 HiSparse pair (see the module docstring)."""

    def __init__(self, size: int, size_swa: int, page_size: int, *, size_hisparse: int,
                 hisparse_page_size: int, c4_logical_size: int, need_sort: bool = False) -> None:
        """Both sides empty and the compressed mapping all 0 but its trailing ``-1``. Raises
        ContractViolation (``HSP-12``) for a logical page size that is not a multiple of 4."""
        if page_size % COMPRESS_RATIO or hisparse_page_size < 1:
            raise ContractViolation("HSP-12", f"page size {page_size}: a multiple of 4")
        self.page_size, self.hisparse_page_size = page_size, hisparse_page_size
        self.c4_logical_size = c4_logical_size
        self.logical = HybridModel(size, size_swa, page_size, need_sort=need_sort)
        self.device = AllocatorModel(size_hisparse, hisparse_page_size, paged=True,
                                     need_sort=need_sort)
        self.mapping: dict[int, int] = {}  # compressed id -> device slot
        self.group: list[list[int]] | None = None  # deferred free() inputs
        self.full_group: list[list[int]] = []  # deferred free_full() inputs
        self.rule = "HSP-12"  # the clause that decided the last call (the oracle's attribution)

    def check_invariants(self) -> None:
        """Both logical sides' and the device side's invariants; every bound device slot is
        distinct, held and past the padding page (``HSP-12``)."""
        self.logical.check_invariants()
        self.device.check_invariants()
        bound = list(self.mapping.values())
        assert len(set(bound)) == len(bound), f"HSP-12: a device slot bound twice: {bound}"
        assert all(d >= self.hisparse_page_size for d in bound), f"HSP-12: {bound}"

    # -- queries ---------------------------------------------------------------------------
    def _device_tokens(self) -> int:
        return self.device.available_size() * COMPRESS_RATIO

    def available_size(self) -> int:
        """``min(logical, 4 * device)``: a device slot holds one compressed token of four
        (``HSP-13``)."""
        return sizing.capacity(self.logical.available_size(), self._device_tokens())

    def full_available_size(self) -> int:
        """``min(full side, 4 * device)`` (``HSP-13``)."""
        return sizing.capacity(self.logical.full_available_size(), self._device_tokens())

    def swa_available_size(self) -> int:
        """The SWA side's free tokens."""
        return self.logical.swa_available_size()

    def mapping_list(self) -> list[int]:
        """The compressed mapping as SGLang's tensor: ``c4_logical_size + hps`` entries, 0 where
        unbound, then ``-1``."""
        out = [0] * (self.c4_logical_size + self.hisparse_page_size) + [-1]
        for c, dev in self.mapping.items():
            out[c] = dev
        return out

    def get_last_loc_compressed(self, last_locs: Sequence[int]) -> list[int]:
        """``(loc - 3) // 4``: the last complete compressed block; ``-1`` stays ``-1``."""
        return [sizing.compressed_last_loc(x, COMPRESS_RATIO) for x in last_locs]

    def get_last_loc_hisparse_device(self, last_locs: Sequence[int]) -> list[int]:
        """``mapping[get_last_loc_compressed(last_locs)]``."""
        table = self.mapping_list()
        return [table[c] for c in self.get_last_loc_compressed(last_locs)]

    # -- allocation ------------------------------------------------------------------------
    def alloc_extend(self, prefix_lens: Sequence[int], seq_lens: Sequence[int],
                     last_loc: Sequence[int]) -> list[int] | None:
        """A prefill: None when the logical side lacks the new pages (``min`` of full and SWA)
        or the device side lacks ``Σ new pages of (prefix // 4, seq // 4)`` at its page size;
        else the logical extend, then the device extend of the compressed positions from the
        device slot of each prefix's last complete block, the new compressed ids bound in
        order."""
        self.rule = "HSP-14"
        ps, hps, c = self.page_size, self.hisparse_page_size, COMPRESS_RATIO
        logical_pages = sum(num_new_pages(p, s, ps) for p, s in zip(prefix_lens, seq_lens))
        device_pages = sum(num_new_pages(p // c, s // c, hps)
                           for p, s in zip(prefix_lens, seq_lens))
        if logical_pages > self.logical.available_size() // ps:
            return None
        if device_pages > self.device.available_size() // hps:
            return None
        dev_loc = self.get_last_loc_hisparse_device(last_loc)
        logical = self.logical.alloc_extend(prefix_lens, seq_lens, last_loc)
        assert logical is not None
        rows = [(p // c, s // c, d) if (p // c) % hps else (0, s // c - p // c, -1)
                for p, s, d in zip(prefix_lens, seq_lens, dev_loc)]
        device = self.device.alloc_extend([r[0] for r in rows], [r[1] for r in rows],
                                          [r[2] for r in rows])
        assert device is not None
        self.mapping.update(zip(compressed_ids(logical), device))
        return logical

    def alloc_decode(self, seq_lens: Sequence[int], last_loc: Sequence[int]) -> list[int] | None:
        """The logical side's decode; no compressed id is bound."""
        self.rule = "HSP-14"
        return self.logical.alloc_decode(seq_lens, last_loc)

    def alloc_device_buffer(self, compressed: Sequence[int], need_size: int) -> list[int]:
        """The buffer of ``need_size`` device slots from the slots bound to ``compressed`` (in
        order, unbound skipped; all unbound after): the newest bound slot swapped into position
        ``need_size - hps`` when more are bound than that plus one; then the first
        ``need_size`` with the pages wholly outside them freed, or, when fewer are bound, the
        last one's page padded and whole pages added. Raises ContractViolation (``HSP-16``) for
        a size that is not a positive page multiple (SGLang's swap then indexes outside the
        bound slots) or too few free device pages."""
        self.rule = "HSP-16"
        hps = self.hisparse_page_size
        if need_size < hps or need_size % hps:  # the swap reads position need_size - hps
            raise ContractViolation("HSP-16", f"need_size {need_size}: a page multiple >= "
                                             f"{hps}")
        bound = [self.mapping[x] for x in compressed if x in self.mapping]
        _, pad, extra = sizing.device_buffer_split(len(bound), need_size, hps)
        if len(bound) < need_size and extra // hps > self.device.available_size() // hps:
            raise ContractViolation("HSP-16", "too few free device pages")
        for x in compressed:
            self.mapping.pop(x, None)
        dbs = need_size - hps
        if len(bound) > dbs + 1:
            bound[dbs], bound[-1] = bound[-1], bound[dbs]
        if len(bound) >= need_size:
            buffer, surplus = bound[:need_size], bound[need_size:]
            kept = {d // hps for d in buffer}
            pure = sorted({d // hps for d in surplus} - kept)
            if pure:
                self.device.free([p * hps for p in pure])
            return buffer
        padded = bound + [bound[-1] + 1 + k for k in range(pad)] if pad else bound
        more = self.device.alloc(extra)
        assert more is not None
        return padded + more

    # -- release ---------------------------------------------------------------------------
    def free_hisparse_indices(self, buffer_indices: Sequence[int]) -> None:
        """Free the device pages of ``buffer_indices`` at or above ``hps``."""
        self.rule = "HSP-15"
        kept = [s for s in buffer_indices if s >= self.hisparse_page_size]
        if kept:
            self.device.free(kept)

    def _free_now(self, free_index: list[int]) -> None:
        self.logical.free(free_index)
        ids = compressed_ids(free_index)
        bound = [self.mapping.pop(c) for c in ids if c in self.mapping]
        self.free_hisparse_indices([d for d in bound if d > 0])

    def free(self, free_index: Sequence[int]) -> None:
        """Both logical sides, then the device slots of the compressed ids among the slots
        (unbound); inside a free group, at its end."""
        self.rule = "HSP-15"
        if not free_index:
            return
        if self.group is not None:
            self.group.append(list(free_index))
            return
        self._free_now(list(free_index))

    def free_full(self, free_index: Sequence[int]) -> None:
        """The logical full side alone (no device page moves); inside a group, at its end."""
        self.rule = "HSP-15"
        if not free_index:
            return
        if self.group is not None:
            self.full_group.append(list(free_index))
            return
        self.logical.free_full(list(free_index))

    def free_swa(self, free_index: Sequence[int]) -> None:
        """The logical SWA side alone."""
        self.rule = "HSP-15"
        self.logical.free_swa(list(free_index))

    def free_group_begin(self) -> None:
        """Defer ``free`` and ``free_full`` until ``free_group_end``."""
        self.rule = "HSP-15"
        if self.group is not None:
            raise ContractViolation("HSP-15", "free groups cannot be nested")
        self.group, self.full_group = [], []

    def free_group_end(self) -> None:
        """The deferred ``free`` inputs as one free, then the ``free_full`` inputs as one."""
        self.rule = "HSP-15"
        pending, self.group = self.group or [], None
        if pending:
            self._free_now([s for part in pending for s in part])
        full, self.full_group = self.full_group, []
        if full:
            self.free_full([s for part in full for s in part])

    def clear(self) -> None:
        """Both sides whole, the mapping all 0 but its ``-1``, no group."""
        self.rule = "HSP-12"
        self.logical.clear()
        self.device.clear()
        self.mapping.clear()
        self.group, self.full_group = None, []
