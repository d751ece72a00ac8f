"""Broken allocators for checks that per-clause coverage added: each breaks one clause only.

``translate_kv_indices_for_transfer`` answers wrong (``LIFE-3``), ``free_full`` keeps a page
(``FREE-4``), ``verify_byte_accounting`` reports a problem in a healthy state (``CAP-3``), and
three caller errors are accepted instead of rejected: a segment off its row layout (``SEG-1``),
two requests of an extend continuing one partial page (``EXTEND-8``), ``alloc_decode`` with
lists of different lengths (``DECODE-1``). ``tests/oracle/test_oracle_broken.py`` runs them.
"""

from __future__ import annotations

from typing import Any

import torch
from broken_allocators import Broken, factory_of
from kvpool.oracle.engine.capabilities import PAGED
from kvpool.spec import ContractViolation
from spec_torch import SpecTorchAllocator


class TranslateShifted(SpecTorchAllocator):
    """LIFE-3: ``translate_kv_indices_for_transfer`` moves every index one page up."""

    def translate_kv_indices_for_transfer(self, kv_indices: torch.Tensor) -> torch.Tensor:
        return super().translate_kv_indices_for_transfer(kv_indices) + self.page_size


class FreeFullKeepsLastPage(SpecTorchAllocator):
    """``free_full`` of several pages leaves the last one owned: reported under FREE-4, the page
    rule ``free_full`` shares with ``free`` (FREE-7); ``broken_rule.FreeFullRaises`` is the
    FREE-7 case."""

    def free_full(self, free_index: torch.Tensor) -> None:
        pages = sorted({int(s) // self.page_size for s in free_index.tolist()})
        if len(pages) >= 2:
            free_index = free_index[free_index // self.page_size != pages[-1]]
        super().free(free_index)


class ByteAccountingFalseAlarm(SpecTorchAllocator):
    """CAP-3: ``verify_byte_accounting()`` reports a problem whenever a page is staged."""

    def verify_byte_accounting(self) -> list[str]:
        return ["staged pages not counted"] if self.model.staged else []


def _rejects(clauses: tuple[str, ...]) -> Any:
    """A method wrapper that returns None where the spec raises one of ``clauses``."""

    def wrap(method: Any) -> Any:
        def run(self: SpecTorchAllocator, *args: Any) -> Any:
            try:
                return method(self, *args)
            except ContractViolation as err:
                if err.clause in clauses:
                    return None
                raise

        return run

    return wrap


class SegmentLayoutUnchecked(SpecTorchAllocator):
    """SEG-1: a segment whose slots do not follow the row layout from ``start_pos`` is
    released as a plain ``free`` of its slots."""

    def free_segments(self, segments: Any) -> None:
        try:
            super().free_segments(segments)
        except ContractViolation as err:
            if err.clause != "SEG-1":
                raise
            self.model.free([int(s) for idx, _ in segments for s in idx.tolist()])


class SharedPartialPageUnchecked(SpecTorchAllocator):
    """EXTEND-8: two requests of an extend continuing one partial page get None, not an error
    (the decode case: ``broken_rule.DecodeSharedPageAccepted``)."""

    alloc_extend = _rejects(("EXTEND-8",))(SpecTorchAllocator.alloc_extend)


class DecodeLengthsUnchecked(SpecTorchAllocator):
    """DECODE-1: ``alloc_decode`` with lists of different lengths returns None."""

    alloc_decode = _rejects(("DECODE-1",))(SpecTorchAllocator.alloc_decode)


BROKEN_CLAUSES: tuple[Broken, ...] = (
    Broken(TranslateShifted, ("LIFE-3",), module="broken_clauses"),
    Broken(FreeFullKeepsLastPage, ("FREE-4",), module="broken_clauses"),
    Broken(ByteAccountingFalseAlarm, ("CAP-3",), need_sort=True, module="broken_clauses"),
    Broken(SegmentLayoutUnchecked, ("SEG-1",), module="broken_clauses"),
    Broken(SharedPartialPageUnchecked, ("EXTEND-8",), module="broken_clauses"),
    Broken(DecodeLengthsUnchecked, ("DECODE-1",), module="broken_clauses"),
)
for _b in BROKEN_CLAUSES:  # importable factories
    globals().setdefault(_b.name, factory_of(_b.cls, PAGED))
