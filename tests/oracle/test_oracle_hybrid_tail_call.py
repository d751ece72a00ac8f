"""The hybrid call table's ``alloc_extend_swa_tail`` row (SWA-20): the spec side, the target
side and the repro source give the same slots and pairs."""

from __future__ import annotations

from typing import Any

import torch
from kvpool.impl import SWATokenToKVPoolAllocator
from kvpool.oracle.families.hybrid.calls import HYBRID_CALLS, t
from kvpool.spec import HybridModel


def test_the_tail_row_agrees_on_spec_target_and_source_SWA_20() -> None:
    call = HYBRID_CALLS["alloc_extend_swa_tail"]
    assert call.raise_clause == call.result_clause == "SWA-20"
    assert call.params == ("prefix_lens", "seq_lens", "last_loc", "extend_num_tokens",
                           "swa_tail_len")
    args: dict[str, Any] = {"prefix_lens": [0], "seq_lens": [10], "last_loc": [-1],
                            "extend_num_tokens": 10, "swa_tail_len": 6}
    model = HybridModel(64, 32, 4)
    want = call.spec(model, args)
    target = SWATokenToKVPoolAllocator(64, 32, 4, torch.float16, "cpu", None, False)
    got, inputs = call.target(target, args, "cpu")
    assert inputs == [] and got.tolist() == want == list(range(4, 14))
    assert target.translate_loc_from_full_to_swa(got).tolist() == \
        model.translate_loc_from_full_to_swa(want)
    namespace: dict[str, Any] = {"a": SWATokenToKVPoolAllocator(64, 32, 4, torch.float16, "cpu",
                                                                None, False), "t": t}
    exec("\n".join(call.source(args, "out")), namespace)  # the repro's own lines
    assert namespace["out"].tolist() == want
    assert call.checks is not None
    exec("\n".join(call.checks(args, want, "out")), namespace)  # and its checks pass
