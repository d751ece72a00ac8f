"""The checked mode of kvpool's HiSparse allocator (:mod:`kvpool.impl.hisparse`): each caller
rule of ``HSP-*`` (SPEC.md section 20) tested on host copies of the mapping and the free lists
before the call changes anything; a broken rule raises ContractViolation naming the clause
(``ERR-1``). Also ``check_invariants`` (``HSP-3``) and ``debug_print``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from kvpool.spec.errors import ContractViolation
from kvpool.spec.hisparse_sizing import device_buffer_split
from kvpool.spec.layout import last_loc_aligned


def _ints(x: torch.Tensor) -> list[int]:
    return [int(v) for v in x.reshape(-1).tolist()]


class HiSparseChecks:
    """The rules, as methods of the allocator they check (``self`` is the allocator)."""

    page_size: int
    logical_attn_allocator: Any
    hisparse_attn_allocator: Any
    full_to_hisparse_device_index_mapping: torch.Tensor
    _buffers: set[int]

    # -- host views ----------------------------------------------------------------------------
    def _owned(self, side: Any) -> set[int]:
        free = set(_ints(side.get_all_free_pages()))
        return {p for p in range(1, side.num_pages + 1) if p not in free}

    def _bindings(self) -> dict[int, int]:
        table = _ints(self.full_to_hisparse_device_index_mapping)[:-1]
        return {s: d for s, d in enumerate(table) if d}

    def _held(self, slots: Sequence[int], clause: str) -> None:
        ps = self.page_size
        end = (self.logical_attn_allocator.num_pages + 1) * ps
        owned = self._owned(self.logical_attn_allocator)
        if len(set(slots)) != len(slots):
            raise ContractViolation(clause, f"a slot is named twice in {list(slots)}")
        for s in slots:
            if not ps <= s < end or s // ps not in owned:
                raise ContractViolation(clause, f"logical slot {s} is not held")

    # -- the rules -----------------------------------------------------------------------------
    def _check_locs(self, last_locs: torch.Tensor) -> None:
        end = self.full_to_hisparse_device_index_mapping.numel() - 1
        for x in _ints(last_locs):
            if x != -1 and not 0 <= x < end:
                raise ContractViolation("HSP-10", f"last_loc {x} is outside -1, 0..{end - 1}")

    def _check_rows(self, prefix: list[int], seq: list[int], locs: list[int], clause: str
                    ) -> None:
        ps = self.page_size
        owned = self._owned(self.logical_attn_allocator)
        if not len(prefix) == len(seq) == len(locs):
            raise ContractViolation(clause, "prefix_lens, seq_lens and last_loc differ in length")
        for pre, end, loc in zip(prefix, seq, locs):
            if not 0 <= pre <= end:
                raise ContractViolation(clause, f"prefix {pre} > seq {end}")
            if not last_loc_aligned(pre, loc, ps) or (pre and loc // ps not in owned):
                raise ContractViolation(clause, f"last_loc {loc} does not end a held prefix "
                                                f"of {pre} tokens")

    def _check_extend(self, prefix_lens_cpu: torch.Tensor, seq_lens_cpu: torch.Tensor,
                      last_loc: torch.Tensor, extend_num_tokens: int, *, bind: bool) -> None:
        clause = "HSP-5" if bind else "HSP-6"
        prefix, seq, locs = _ints(prefix_lens_cpu), _ints(seq_lens_cpu), _ints(last_loc)
        self._check_rows(prefix, seq, locs, clause)
        if extend_num_tokens != sum(seq) - sum(prefix):
            raise ContractViolation(clause, f"extend_num_tokens {extend_num_tokens} != "
                                            f"{sum(seq) - sum(prefix)}")
        if bind:
            table = _ints(self.full_to_hisparse_device_index_mapping)
            for pre, loc in zip(prefix, locs):
                if pre % self.page_size and table[loc] <= 0:
                    raise ContractViolation("HSP-5", f"last_loc {loc} (prefix {pre}) has no "
                                                     "device slot")

    def _check_decode(self, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor) -> None:
        seq = _ints(seq_lens_cpu)
        if any(s < 1 for s in seq):
            raise ContractViolation("HSP-6", f"seq_lens {seq}: a decode extends a request >= 1")
        self._check_rows([s - 1 for s in seq], seq, _ints(last_loc), "HSP-6")

    def _check_device_buffer(self, allocated_indices: torch.Tensor, need_size: int) -> None:
        ps = self.page_size
        if need_size < 0 or need_size % ps:
            raise ContractViolation("HSP-7", f"need_size {need_size}: a page multiple >= 0")
        slots = _ints(allocated_indices)
        self._held(slots, "HSP-7")
        mapping = self._bindings()
        bound = [mapping[s] for s in slots if s in mapping]
        for i, dev in enumerate(bound):
            if dev % ps != i % ps or dev // ps != bound[i - i % ps] // ps:
                raise ContractViolation("HSP-7", f"bound device slots {bound} do not fill "
                                                 "whole pages from a page start")
        pages, named = {d // ps for d in bound}, set(slots)
        if any(d // ps in pages and s not in named for s, d in mapping.items()):
            raise ContractViolation("HSP-7", "a slot not named stays bound to a buffer page")
        extra = device_buffer_split(len(bound), need_size, ps)[2]
        if extra > self.hisparse_attn_allocator.available_size():
            free = self.hisparse_attn_allocator.available_size()
            raise ContractViolation("HSP-7", f"{extra} device slots needed, {free} free")

    def _check_buffer_free(self, kept: torch.Tensor) -> None:
        for s in _ints(kept):
            if s // self.page_size not in self._buffers:
                raise ContractViolation("HSP-9", f"device slot {s} is not in a held device buffer")

    def _check_free(self, free_index: torch.Tensor) -> None:
        ps = self.page_size
        slots = _ints(free_index)
        self._held(slots, "HSP-8")
        mapping, named = self._bindings(), set(slots)
        pages = {s // ps for s in slots}
        dev_pages = {mapping[s] // ps for s in slots if s in mapping}
        stray = [s for s, d in mapping.items()
                 if s not in named and (s // ps in pages or d // ps in dev_pages)]
        if stray:
            raise ContractViolation("HSP-8", f"bound slots {stray} share a released page and "
                                             "are not named")

    # -- invariants ----------------------------------------------------------------------------
    def check_invariants(self) -> None:
        """Assert both sides' invariants and ``HSP-3``: bindings on held pages, no device slot
        bound twice, the trailing ``-1``; checked mode: every held device page bound or a
        buffer, never both."""
        ps = self.page_size
        self.logical_attn_allocator.check_invariants()
        self.hisparse_attn_allocator.check_invariants()
        mapping = self._bindings()
        problems = []
        if int(self.full_to_hisparse_device_index_mapping[-1]) != -1:
            problems.append("the trailing -1 is gone")
        devs = list(mapping.values())
        if len(set(devs)) != len(devs):
            problems.append("a device slot is bound to two logical slots")
        logical, device = (self._owned(self.logical_attn_allocator),
                           self._owned(self.hisparse_attn_allocator))
        if any(s // ps not in logical or d // ps not in device for s, d in mapping.items()):
            problems.append("a binding on a page not held")
        bound_pages = {d // ps for d in devs}
        if getattr(self, "checked", False) and (bound_pages & self._buffers
                                                or device != bound_pages | self._buffers):
            problems.append("a held device page is not exactly one of bound or buffer")
        assert not problems, "HSP-3: " + "; ".join(problems) + "\n" + self.debug_print()

    def debug_print(self) -> str:
        """Both sides' state and the bindings."""
        return (f"logical: {self.logical_attn_allocator.debug_print()}\n"
                f"device: {self.hisparse_attn_allocator.debug_print()}\n"
                f"bindings: {self._bindings()} buffers: {sorted(self._buffers)}")
