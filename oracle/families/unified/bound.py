"""Judging a unified target whose allocations the two-member model does not fix: the tri-pool.

SGLang's tri-pool (``UnifiedMambaSWATokenToKVPoolAllocator``: mamba state grows up from the
sink, SWA floats in the middle, full grows down) shares its buffer with a mamba sub-pool that
:class:`kvpool.spec.unified.UnifiedSWAModel` does not model. Its full + SWA part is judged
with the model's tables and a *bound* on capacity (``capacity_exact=False``):

- the geometry is the target's (buffer size, entry bytes, first allocatable pages: the
  reserved floor includes the mamba state row, ``UNI-2``), read once at ``create`` from its
  introspection snapshot (:class:`~kvpool.spec.unified_state.UnifiedState`);
- an allocation the target refuses is taken as refused (the model is rolled back: the mamba
  side may hold the bytes); one it grants must fit the model too (``UNI-7``: the full and SWA
  pages alone fit the bytes) and hand out the model's virtual ids (``UNI-8``);
- the capacity views are judged exactly on the float chain instead (``UNI-14``,
  :mod:`.float_views`); placement is judged by what must hold (the SWA float's physical pages
  are not the model's grow-up ones).
"""

from __future__ import annotations

import copy
from typing import Any

from kvpool.spec.contract import Divergence
from kvpool.spec.unified import UnifiedSWAModel
from kvpool.spec.unified_state import UnifiedState
from kvpool.spec.wording import counted


def model_of(state: UnifiedState, page_size: int, lazy: bool,
             cap_tokens: int) -> UnifiedSWAModel:
    """A model with the geometry of the snapshot ``state`` (the buffer's bytes, its full and SWA
    sub-pools' bytes a token and first pages)."""
    full, swa = state.sides["full"], state.sides["swa"]
    model = UnifiedSWAModel(state.total_bytes, page_size, full.page_bytes // page_size,
                            swa.page_bytes // page_size, lazy=lazy, full_max_tokens=cap_tokens,
                            swa_max_tokens=cap_tokens)
    model.full.min_page, model.swa.min_page = full.min_page, swa.min_page
    model.clear()
    return model


class Bounded:
    """One allocation judged as a bound: ``before()`` snapshots the model, ``after(got, want)``
    rolls it back when the target refused, and raises when the target granted what the model
    cannot fit (``UNI-7``) or refused what its ``available_size()`` covered (``promised``,
    ``UNI-14``)."""

    def __init__(self, model: UnifiedSWAModel, promised: int | None = None) -> None:
        self.model = model
        self.promised = promised  # the target's available_size() covering this allocation
        self.saved: dict[str, Any] = {}

    def before(self) -> None:
        self.saved = copy.deepcopy(vars(self.model))

    def after(self, call: str, got: Any, want: Any) -> bool:
        """True when the target refused and the model was rolled back."""
        if got is None:
            if self.promised is not None:
                raise Divergence("UNI-14", f"{call} was refused within the "
                                           f"{counted(self.promised, 'token')} available_size() "
                                           "reported")
            vars(self.model).update(self.saved)
            return want is not None
        if want is None:
            raise Divergence("UNI-7", f"{call} handed out {got!r}: the full and SWA pages alone "
                                      "do not fit the buffer's bytes")
        return False
