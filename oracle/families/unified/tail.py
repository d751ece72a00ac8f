"""``alloc_extend_swa_tail``: a decode node's prealloc on the unified composite (``UNI-8``).

SGLang 0.5.23's ``UnifiedSWATokenToKVPoolAllocator.alloc_extend_swa_tail(prefix_lens,
prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc, extend_num_tokens, swa_tail_len)`` grows one
request as ``alloc_extend`` does, but binds an SWA page only to the new pages that hold its last
``swa_tail_len`` positions; the other new pages read as the sink on the SWA side, as a
released page does. Its spec is
:meth:`kvpool.spec.unified.UnifiedSWAModel.alloc_extend_swa_tail` (one request per call, as
SGLang asserts).
"""

from __future__ import annotations

from typing import Any

from ...engine import callforms as forms
from ...engine.call import Call
from ...engine.callforms import Args

__all__ = ["TAIL_CALL"]


def _target(x: Any, a: Args, dev: str) -> tuple[Any, list[Any]]:
    pre, seq = a["prefix_lens"], a["seq_lens"]
    return forms.no_inputs(x.alloc_extend_swa_tail(
        forms.tensor(pre, dev), forms.tensor(pre, "cpu"), forms.tensor(seq, dev),
        forms.tensor(seq, "cpu"), forms.tensor(a["last_loc"], dev, forms.form_of(a)),
        a["extend_num_tokens"], a["swa_tail_len"]))


def _source(a: Args, var: str) -> list[str]:
    pre, seq = forms.tensor_source(a["prefix_lens"]), forms.tensor_source(a["seq_lens"])
    last_loc = forms.tensor_source(a["last_loc"], forms.form_of(a))
    return [f"{var} = a.alloc_extend_swa_tail({pre}, {pre}.cpu(), {seq}, {seq}.cpu(), "
            f"{last_loc}, {a['extend_num_tokens']}, {a['swa_tail_len']})"]


TAIL_CALL = Call(
    "alloc_extend_swa_tail", "alloc",
    ("prefix_lens", "seq_lens", "last_loc", "extend_num_tokens", "swa_tail_len"),
    spec=lambda m, a: m.alloc_extend_swa_tail(a["prefix_lens"][0], a["seq_lens"][0],
                                              a["last_loc"][0], a["swa_tail_len"]),
    target=_target, source=_source, raise_clause="UNI-8", order_clause="UNI-8",
    result_clause="UNI-8", checks=forms.slots_checks, slot_args=("last_loc",))
