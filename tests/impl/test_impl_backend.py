"""The CPU backends (numpy; compiled loops where built) equal the torch one, number for number.

``NumpyOps`` and ``NativeOps`` must return what ``TorchOps`` (the CUDA path,
:mod:`kvpool.impl.layout`) returns for the same inputs: fresh int64 tensors, for int32 or int64
inputs, contiguous or strided, and also for inconsistent unchecked inputs (more opening
requests than new pages: both clamp).
Whole allocators are compared too: the case table and seeded soaks on the torch and numpy
backends forced on CPU (the default CPU runs are in ``test_impl_cases.py`` /
``test_impl_differential.py``).
ci profile: about 5 s.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from cases import run_case
from host_backends import HOST_OPS
from hypothesis import given
from hypothesis import strategies as st
from impl_adapter import free_list
from impl_scheduler import Driver, RandomChooser, choose_config
from kvpool.impl import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator
from kvpool.impl.backend import TorchOps
from kvpool.impl.backend_choice import ops_for
from kvpool.impl.native_ops import NativeOps, native_available
from kvpool.impl.numpy_ops import NumpyOps
from kvpool.spec import AllocatorModel, ContractViolation
from test_impl_cases import PARAMS, _runner

PAGE_SIZES = st.sampled_from([1, 2, 3, 16, 64])


def _as_input(values: list[int], dtype: torch.dtype, strided: bool) -> torch.Tensor:
    """``values`` as a CPU tensor of ``dtype``, a stride-2 view when ``strided``."""
    if not strided:
        return torch.tensor(values, dtype=dtype)
    doubled = torch.tensor([v for v in values for _ in (0, 1)], dtype=dtype)
    return doubled[::2]


def _same(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == torch.int64 and want.dtype == torch.int64
    assert got.tolist() == want.tolist()


INPUT_FORMS = st.tuples(st.sampled_from([torch.int64, torch.int32]), st.booleans())


@pytest.mark.parametrize("host_cls", HOST_OPS)
@given(ps=PAGE_SIZES, data=st.data(), form=INPUT_FORMS)
def test_decode_slots_and_count_agree(host_cls: type[NumpyOps], ps: int, data: Any,
                                      form: tuple[Any, bool]) -> None:
    """DECODE-4/5: the same opening count and slots; clamped alike when pages run short."""
    seq = data.draw(st.lists(st.integers(-3 * ps, 5 * ps), max_size=40))
    last = data.draw(st.lists(st.integers(-1, 10**6), min_size=len(seq), max_size=len(seq)))
    num_pages = data.draw(st.integers(0, len(seq) + 2))
    pages = np.arange(1000, 1000 + num_pages, dtype=np.int64)
    host, ref = host_cls(ps, "cpu"), TorchOps(ps, "cpu")
    seq_t, last_t = _as_input(seq, *form), _as_input(last, *form)
    assert host.decode_new_pages(seq_t) == ref.decode_new_pages(seq_t)
    _same(host.decode_slots(seq_t, last_t, pages),
          ref.decode_slots(seq_t, last_t, torch.from_numpy(pages)))


@pytest.mark.parametrize("ops", [NumpyOps, TorchOps])
def test_decode_slots_clamp_when_pages_run_short_DECODE_4(ops: type[TorchOps]) -> None:
    """More opening requests than pages passed (an inconsistent unchecked call): the r-th
    opener takes ``new_pages[min(r, num_pages - 1)]``; the others continue ``last_loc + 1``.
    Pinned here because a random draw reaches it only for some seeds."""
    ps = 4
    seq = torch.tensor([1, 6, 5, 9, 13])  # openers: requests 0, 2, 3, 4 ((seq - 1) % 4 == 0)
    last = torch.tensor([-1, 20, 15, 31, 47])
    backend = ops(ps, "cpu")
    for pages, want in (([100], [400, 21, 400, 400, 400]),
                        ([100, 7], [400, 21, 28, 28, 28]),
                        ([100, 7, 9, 11], [400, 21, 28, 36, 44]),
                        ([], [0, 21, 16, 32, 48])):
        new_pages: Any = np.array(pages, dtype=np.int64)
        if ops is TorchOps:
            new_pages = torch.from_numpy(new_pages)
        assert backend.decode_new_pages(seq) == 4
        _same(backend.decode_slots(seq, last, new_pages), torch.tensor(want))


@pytest.mark.parametrize("host_cls", HOST_OPS)
@given(ps=PAGE_SIZES, data=st.data(), form=INPUT_FORMS)
def test_extend_slots_and_count_agree(host_cls: type[NumpyOps], ps: int, data: Any,
                                      form: tuple[Any, bool]) -> None:
    """EXTEND-4/5: the same page count and three-part layout for any valid batch."""
    pre = data.draw(st.lists(st.integers(0, 4 * ps), max_size=12))
    ext = data.draw(st.lists(st.integers(0, 3 * ps), min_size=len(pre), max_size=len(pre)))
    seq = [p + e for p, e in zip(pre, ext, strict=True)]
    last = [-1 if p == 0 else 50 * ps + (p - 1) % ps for p in pre]
    host, ref = host_cls(ps, "cpu"), TorchOps(ps, "cpu")
    pre_t, seq_t, last_t = (_as_input(v, *form) for v in (pre, seq, last))
    num_pages = ref.extend_new_pages(pre_t, seq_t)
    assert host.extend_new_pages(pre_t, seq_t) == num_pages
    pages = np.arange(7, 7 + num_pages, dtype=np.int64)[::-1].copy()
    _same(host.extend_slots(pre_t, seq_t, last_t, pages, sum(ext)),
          ref.extend_slots(pre_t, seq_t, last_t, torch.from_numpy(pages), sum(ext)))


@pytest.mark.parametrize("host_cls", HOST_OPS)
@given(ps=PAGE_SIZES, slots=st.lists(st.integers(0, 5000), max_size=60), form=INPUT_FORMS)
def test_distinct_pages_and_slots_of_pages_agree(host_cls: type[NumpyOps], ps: int,
                                                 slots: list[int],
                                                 form: tuple[Any, bool]) -> None:
    """FREE-4/5 (sorted distinct pages) and ALLOC-4 (page-major slots)."""
    host, ref = host_cls(ps, "cpu"), TorchOps(ps, "cpu")
    slots_t = _as_input(slots, *form)
    distinct = host.distinct_pages(slots_t)  # numpy form: what the free lists store
    assert isinstance(distinct, np.ndarray)
    _same(torch.from_numpy(distinct), ref.distinct_pages(slots_t))
    pages = np.array(slots, dtype=np.int64)
    _same(host.slots_of_pages(pages), ref.slots_of_pages(torch.from_numpy(pages)))


@pytest.mark.parametrize("ops", [NumpyOps, TorchOps])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_distinct_pages_of_a_2d_slot_tensor_FREE_4(ops: type[TorchOps], dtype: torch.dtype) -> None:
    """``free`` may get a 2-D slot tensor: its pages are those of the flattened slots."""
    backend = ops(4, "cpu")
    slots = torch.tensor([[9, 4, 30], [5, 8, 31]], dtype=dtype)
    for form in (slots, slots.t()):  # contiguous, strided
        assert torch.as_tensor(backend.distinct_pages(form)).tolist() == [1, 2, 7]


@pytest.mark.parametrize("paged", [False, True])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_free_of_a_2d_slot_tensor_on_allocators_FREE_4(paged: bool, dtype: torch.dtype) -> None:
    """The same release as the flattened 1-D slots, on the CPU's default backend (int32: the
    two-step path, which the compiled pass hands such tensors to)."""
    ps = 4 if paged else 1
    flat_alloc = (PagedTokenToKVPoolAllocator(32, 4, torch.float16, "cpu", None, False) if paged
                  else TokenToKVPoolAllocator(8, torch.float16, "cpu", None, False))
    grid_alloc = (PagedTokenToKVPoolAllocator(32, 4, torch.float16, "cpu", None, False) if paged
                  else TokenToKVPoolAllocator(8, torch.float16, "cpu", None, False))
    got = flat_alloc.alloc(6 * ps)
    assert got is not None and grid_alloc.alloc(6 * ps) is not None
    flat_alloc.free(got[: 4 * ps])
    grid_alloc.free(got[: 4 * ps].reshape(2, -1).to(dtype))
    assert free_list(grid_alloc) == free_list(flat_alloc)
    grid_alloc.check_invariants()


@pytest.mark.parametrize("ps", [1, 4, 16])
@pytest.mark.parametrize("batch_size", [1, 3, 4, 5, 7])
def test_same_tensor_as_device_and_host_lengths_EXTEND_4_DECODE_4(ps: int,
                                                                   batch_size: int) -> None:
    """On the CPU a caller may pass one tensor as both ``seq_lens`` and ``seq_lens_cpu`` (and
    ``prefix_lens``): the backend reuses what it read for the page count; the slots must be the
    spec model's, for batches on both sides of the few-requests threshold."""
    alloc = PagedTokenToKVPoolAllocator(64 * ps, ps, torch.float16, "cpu", None, False)
    model = AllocatorModel(size=64 * ps, page_size=ps, paged=True)
    seq = [1 + (3 * i + 2) % (2 * ps + 1) for i in range(batch_size)]
    pre = [0] * batch_size
    pre_t, seq_t = torch.tensor(pre), torch.tensor(seq)
    got = alloc.alloc_extend(pre_t, pre_t, seq_t, seq_t, torch.full((batch_size,), -1),
                             sum(seq))
    want = model.alloc_extend(pre, seq, [-1] * batch_size)
    assert got is not None and got.tolist() == want
    ends = [sum(seq[: i + 1]) - 1 for i in range(batch_size)]
    last = [want[e] for e in ends]
    for _ in range(2 * ps + 1):  # decode steps: some open pages, some continue
        seq = [s + 1 for s in seq]
        seq_t = torch.tensor(seq)
        got = alloc.alloc_decode(seq_t, seq_t, torch.tensor(last))
        want = model.alloc_decode(seq, last)
        assert got is not None and got.tolist() == want
        last = want
    pre = seq
    seq = [p + 1 + i % 3 for i, p in enumerate(pre)]
    pre_t, seq_t = torch.tensor(pre), torch.tensor(seq)
    got = alloc.alloc_extend(pre_t, pre_t, seq_t, seq_t, torch.tensor(last),
                             sum(seq) - sum(pre))
    want = model.alloc_extend(pre, seq, last)
    assert got is not None and got.tolist() == want
    alloc.check_invariants()


@pytest.mark.parametrize("host_cls", HOST_OPS)
def test_decode_slots_whatever_was_counted_before_DECODE_4(host_cls: type[NumpyOps]) -> None:
    """``decode_slots`` reuses the openings ``decode_new_pages`` found only for that very
    tensor: called alone, after counting another tensor, or after counting this one, it gives
    the torch backend's slots."""
    ps = 4
    seq_a, seq_b = torch.tensor([5, 6, 9, 2]), torch.tensor([6, 5, 7, 13])
    last = torch.tensor([15, 20, 31, 40])
    pages = np.array([7, 3], dtype=np.int64)
    ref = TorchOps(ps, "cpu")
    for counted in (None, seq_a, seq_b):
        host = host_cls(ps, "cpu")
        if counted is not None:
            host.decode_new_pages(counted)
        _same(host.decode_slots(seq_b, last, pages),
              ref.decode_slots(seq_b, last, torch.from_numpy(pages)))


def _outcome(call: Any, *args: Any) -> Any:
    """``call(*args)``'s slots as a list, or the type of the error it raised."""
    try:
        return call(*args).tolist()
    except Exception as error:  # compared between the backends, not swallowed
        return type(error)


@pytest.mark.parametrize("host_cls", HOST_OPS)
@pytest.mark.parametrize("batch_size", [4, 7])  # both sides of the few-requests threshold
def test_extend_slots_whatever_was_counted_before_EXTEND_4(host_cls: type[NumpyOps],
                                                           batch_size: int) -> None:
    """``extend_slots`` reuses the host lengths ``extend_new_pages`` read only for those very
    tensors. When ``prefix_lens_cpu`` or ``seq_lens_cpu`` is another tensor with other values
    (an unchecked EXTEND-1 misuse; here with the same page and token totals), the layout comes
    from the device tensors, as in SGLang and the torch backend. When one tensor is passed as
    both ``prefix_lens`` and ``seq_lens`` the device extends no longer sum to the token count:
    the host backends refuse it (``EXTEND-1``) where the torch form raises its own error."""
    ps, tail = 4, batch_size - 4
    pre = torch.tensor([1, 3, 0, 0] + [0] * tail)
    seq = torch.tensor([8, 8, 4, 2] + [1] * tail)
    other_pre = torch.tensor([3, 1, 0, 0] + [0] * tail)  # same totals, another layout
    other_seq = torch.tensor([8, 8, 2, 4] + [1] * tail)
    last = torch.tensor([40, 62, -1, -1] + [-1] * tail)
    pages = np.array([9, 5, 7, 3] + [11 + i for i in range(tail)], dtype=np.int64)
    tokens = int((seq - pre).sum())
    ref = TorchOps(ps, "cpu")
    for counted, device in ((None, (pre, seq)), ((pre, seq), (pre, seq)),
                            ((other_pre, seq), (pre, seq)), ((pre, other_seq), (pre, seq)),
                            ((other_pre, seq), (seq, seq))):
        host = host_cls(ps, "cpu")
        if counted is not None:
            assert host.extend_new_pages(*counted) == len(pages)
        got = _outcome(host.extend_slots, *device, last, pages.copy(), tokens)
        want = _outcome(ref.extend_slots, *device, last, torch.from_numpy(pages.copy()), tokens)
        if int((device[1] - device[0]).sum()) != tokens:  # the host refuses what torch trusts
            want = ContractViolation
        assert got == want, (counted, device)


def test_backend_choice_on_cuda_follows_KVPOOL_TRITON(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA takes the Triton backend when it imports and ``KVPOOL_TRITON`` is not 0; any other
    non-CPU device the torch one (a stand-in module plays ``kvpool.impl.triton_ops``)."""
    import sys
    import types

    from kvpool.impl import backend_choice

    class StandIn(TorchOps):
        def __init__(self, page_size: int, device: Any) -> None:  # no CUDA tensors here
            self.page_size = page_size

    class FakeTorchOps(StandIn):
        pass

    class FakeTritonOps(StandIn):
        pass

    fake = types.ModuleType("kvpool.impl.triton_ops")
    fake.TritonOps = FakeTritonOps  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "kvpool.impl.triton_ops", fake)
    monkeypatch.setattr(backend_choice, "TorchOps", FakeTorchOps)
    monkeypatch.delenv("KVPOOL_TRITON", raising=False)
    assert type(ops_for(16, "cuda")) is FakeTritonOps
    assert type(ops_for(16, "meta")) is FakeTorchOps
    monkeypatch.setenv("KVPOOL_TRITON", "0")
    assert type(ops_for(16, "cuda")) is FakeTorchOps
    monkeypatch.setenv("KVPOOL_TRITON", "1")
    assert type(ops_for(16, "cuda")) is FakeTritonOps
    assert type(ops_for(16, "meta")) is FakeTorchOps


@pytest.mark.parametrize("host_cls", HOST_OPS)
def test_results_are_fresh_arrays_ALIAS_1(host_cls: type[NumpyOps]) -> None:
    """Results never share memory with the inputs or the pages handed in."""
    host = host_cls(4, "cpu")
    pages = np.arange(3, 6, dtype=np.int64)
    seq, last = torch.tensor([5, 6, 9]), torch.tensor([15, 16, 20])
    for out in (host.slots_of_pages(pages), host.decode_slots(seq, last, pages),
                torch.from_numpy(host.distinct_pages(last)),
                host_cls(1, "cpu").slots_of_pages(pages),
                host.extend_slots(seq[:1] * 0, seq[:1] - 1, last[:1], pages[:1], 4)):
        out.fill_(-7)
    assert pages.tolist() == [3, 4, 5] and last.tolist() == [15, 16, 20]


def test_backend_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU gets the compiled backend where it is built and ``KVPOOL_NATIVE`` is not 0, else the
    numpy one; other devices the torch one (decided at construction)."""
    host = NativeOps if native_available() else NumpyOps
    for setting, want in ((None, host), ("1", host), ("0", NumpyOps)):
        if setting is None:
            monkeypatch.delenv("KVPOOL_NATIVE", raising=False)
        else:
            monkeypatch.setenv("KVPOOL_NATIVE", setting)
        assert type(ops_for(16, "cpu")) is want
        assert type(ops_for(16, torch.device("cpu"))) is want
        assert type(ops_for(16, "meta")) is TorchOps
        paged = PagedTokenToKVPoolAllocator(64, 16, torch.float16, "cpu", None, False)
        token = TokenToKVPoolAllocator(64, torch.float16, "cpu", None, True)
        assert type(paged._ops) is want and type(token._ops) is want


def test_mixed_input_forms_on_allocators() -> None:
    """int32 and strided inputs give the same results as int64 ones (results int64)."""
    results = []
    for dtype, strided in ((torch.int64, False), (torch.int32, True)):
        alloc = PagedTokenToKVPoolAllocator(64 * 4, 4, torch.float16, "cpu", None, False)
        row = alloc.alloc(8)
        assert row is not None
        last = int(row[5])
        out_e = alloc.alloc_extend(*(_as_input(v, dtype, strided) for v in
                                     ([0, 6], [0, 6], [5, 9], [5, 9], [-1, last])), 8)
        out_d = alloc.alloc_decode(*(_as_input(v, dtype, strided) for v in
                                     ([6, 10], [6, 10], [int(out_e[4]), int(out_e[7])])))
        assert out_e is not None and out_d is not None
        alloc.free(_as_input(out_e.tolist(), dtype, strided))
        results.append((out_e.dtype, out_e.tolist(), out_d.dtype, out_d.tolist(),
                        alloc.get_all_free_pages().tolist()))
        alloc.check_invariants()
    assert results[0] == results[1]
    assert results[0][0] == results[0][2] == torch.int64


FORCED = pytest.mark.parametrize("forced", [TorchOps, NumpyOps])


def _force(forced: type[TorchOps], request: pytest.FixtureRequest) -> None:
    """Allocators built from here on use ``forced`` on the CPU (the conftest fixtures)."""
    request.getfixturevalue("numpy_ops" if forced is NumpyOps else "torch_ops")


@FORCED
@pytest.mark.parametrize(("case", "checked"), PARAMS)
def test_impl_case_forced_backend(forced: type[TorchOps], case: Any, checked: bool,
                                  request: pytest.FixtureRequest) -> None:
    """The case table on the torch backend forced on CPU (the CUDA code path) and on the numpy
    one (an install without the compiled backend)."""
    _force(forced, request)
    make, call = _runner("cpu", checked)
    alloc = make(case)
    assert type(alloc._ops) is forced
    run_case(case, make, call, free_list, ContractViolation)


@FORCED
@pytest.mark.parametrize("seed", range(10))
def test_forced_backend_matches_model_seeded_soak(forced: type[TorchOps], seed: int,
                                                  request: pytest.FixtureRequest) -> None:
    """Random sequences of 60 calls on the torch or numpy backend forced equal the model."""
    _force(forced, request)
    choose = RandomChooser(seed)
    Driver(choose, **choose_config(choose)).run(60)
