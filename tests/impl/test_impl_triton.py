"""The Triton layout kernels (``kvpool.impl.triton_ops``) equal the numpy and torch backends.

Random batches (valid ones, plus decode batches with fewer pages than openings, which every
backend clamps alike) go through ``TritonOps``, ``NumpyOps`` and ``TorchOps``; the results must
be equal number for number. Without a GPU the kernels run under Triton's interpreter
(``TRITON_INTERPRET=1``, set here before the kernels are defined) on CPU tensors; with one,
on the device. Needs the optional ``triton`` extra (CI installs it).
ci profile: about 10 s.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")
triton_ops = pytest.importorskip("kvpool.impl.triton_ops", reason="the triton extra")

from kvpool.impl.backend import TorchOps  # noqa: E402
from kvpool.impl.numpy_ops import NumpyOps  # noqa: E402

PAGE_SIZES = st.sampled_from([1, 2, 16, 64])
FEW = settings(max_examples=25, deadline=None)


def _on(values: list[int], dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype, device=DEVICE)


@FEW
@given(ps=PAGE_SIZES, data=st.data(), dtype=st.sampled_from([torch.int64, torch.int32]))
def test_extend_kernel_equals_numpy_and_torch_EXTEND_5(ps: int, data: Any,
                                                      dtype: torch.dtype) -> None:
    """EXTEND-5/7: one kernel launch gives the backends' slots for any valid batch."""
    pre = data.draw(st.lists(st.integers(0, 6 * ps), min_size=1, max_size=9))
    ext = data.draw(st.lists(st.integers(0, 5 * ps), min_size=len(pre), max_size=len(pre)))
    seq = [p + e for p, e in zip(pre, ext, strict=True)]
    last = [-1 if p == 0 else (9_000 + i) * ps + (p - 1) % ps for i, p in enumerate(pre)]
    host, ref = NumpyOps(ps, "cpu"), TorchOps(ps, "cpu")
    cpu = [torch.tensor(v) for v in (pre, seq, last)]
    num_pages = ref.extend_new_pages(cpu[0], cpu[1])
    pages = np.random.default_rng(num_pages).permutation(num_pages).astype(np.int64) + 1
    tokens = sum(ext)
    want = ref.extend_slots(*cpu, torch.from_numpy(pages), tokens).tolist()
    assert host.extend_slots(*cpu, pages, tokens).tolist() == want
    kernel = triton_ops.TritonOps(ps, DEVICE)
    got = kernel.extend_slots(*(_on(v, dtype) for v in (pre, seq, last)),
                              torch.from_numpy(pages).to(DEVICE), tokens)
    assert got.dtype == torch.int64 and got.cpu().tolist() == want


@FEW
@given(ps=PAGE_SIZES, data=st.data(), dtype=st.sampled_from([torch.int64, torch.int32]))
def test_decode_kernel_equals_numpy_and_torch_DECODE_5(ps: int, data: Any,
                                                      dtype: torch.dtype) -> None:
    """DECODE-4/5: the same opening ranks and slots, clamped alike when pages run short."""
    seq = data.draw(st.lists(st.integers(1, 5 * ps), min_size=1, max_size=70))
    last = data.draw(st.lists(st.integers(0, 10**6), min_size=len(seq), max_size=len(seq)))
    num_pages = data.draw(st.integers(0, len(seq) + 2))
    pages = np.arange(500, 500 + num_pages, dtype=np.int64)
    cpu = [torch.tensor(v) for v in (seq, last)]
    want = TorchOps(ps, "cpu").decode_slots(*cpu, torch.from_numpy(pages)).tolist()
    assert NumpyOps(ps, "cpu").decode_slots(*cpu, pages).tolist() == want
    got = triton_ops.TritonOps(ps, DEVICE).decode_slots(
        *(_on(v, dtype) for v in (seq, last)), torch.from_numpy(pages).to(DEVICE))
    assert got.dtype == torch.int64 and got.cpu().tolist() == want


def test_extend_kernel_stays_in_bounds_on_inconsistent_batches() -> None:
    """Fewer pages or tokens than the batch needs: no store past the result, pages clamped."""
    kernel = triton_ops.TritonOps(4, DEVICE)
    pre, seq, last = _on([0, 0]), _on([8, 8]), _on([-1, -1])
    out = kernel.extend_slots(pre, seq, last, _on([5]), 5)  # needs 4 pages and 16 tokens
    assert out.cpu().tolist() == [20, 21, 22, 23, 20]
    assert kernel.extend_slots(pre, seq, last, _on([]), 0).numel() == 0
