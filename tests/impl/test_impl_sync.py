"""No host-device sync in the hot paths, and no operation touches more than the pages it moves.

Checked by construction on CPU: a TorchDispatchMode sees every aten op that ``alloc``,
``alloc_extend``, ``alloc_decode``, ``free_segment(s)`` (and the token ``free``) dispatch. It
tracks which tensors are host data (the ``*_cpu`` arguments and what is computed from them
alone) and fails on any op that moves device data to the host (``_local_scalar_dense`` behind
``item`` / ``int`` / ``bool``, ``nonzero``, ``masked_select``, ``unique``, a ``repeat_interleave``
without ``output_size``), as does ``Tensor.tolist`` on device data. It also fails on any non-view
op that reads or writes a tensor of pool size (O(pages moved), not O(pool)), and counts the
device ops.

These guards see torch ops only, so they run on the pure-torch backend (``TorchOps``, the CUDA
path) forced on CPU by the ``torch_ops`` fixture; the default CPU backend (numpy on the same
buffers) dispatches no torch op in these paths and has its results checked against the torch
backend in ``test_impl_backend.py``.

Op-count bounds (per call, unchecked, ``need_sort`` off): alloc <= 6, free_segment <= 8,
free_segments <= 8 per segment, alloc_decode <= 16, alloc_extend <= 40 (independent of the
batch size and of the pool). The CUDA variant runs the same calls under
``torch.cuda.set_sync_debug_mode("error")``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from kvpool.impl import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator
from kvpool.impl.backend import TorchOps
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

aten = torch.ops.aten
SYNCING = {aten._local_scalar_dense.default, aten.nonzero.default, aten.masked_select.default,
           aten._unique2.default, aten.unique_dim.default, aten.unique_consecutive.default,
           aten.item.default}
NUM_PAGES = 100_000


class HotPathGuard(TorchDispatchMode):
    """Fails on device-to-host reads and on pool-sized work; counts the ops dispatched."""

    def __init__(self, host: list[torch.Tensor], pool_numel: int) -> None:
        super().__init__()
        self.keep = list(host)  # keeps ids alive, so an id is never reused by another tensor
        self.host = {id(t) for t in host}
        self.pool_numel = pool_numel
        self.ops: list[str] = []

    def is_host(self, tensors: list[torch.Tensor]) -> bool:
        return bool(tensors) and all(id(t) in self.host for t in tensors)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        inputs = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        host = self.is_host(inputs)
        if func in SYNCING and not host:
            raise AssertionError(f"host-device sync: {func} on device data")
        if func is aten.repeat_interleave.Tensor and kwargs.get("output_size") is None:
            raise AssertionError("repeat_interleave without output_size syncs")
        out = func(*args, **kwargs)
        outputs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        if not func.is_view:
            big = [t.numel() for t in inputs + outputs if t.numel() >= self.pool_numel]
            assert not big, f"{func} touches a pool-sized tensor ({big}): O(pool) work"
        if host:
            self.keep += outputs
            self.host.update(id(o) for o in outputs)
        if not host:
            self.ops.append(str(func))  # device ops only; host arithmetic is not counted
        return out


@contextmanager
def hot_path(host: list[torch.Tensor], pool_numel: int,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[HotPathGuard]:
    guard = HotPathGuard(host, pool_numel)
    tolist = torch.Tensor.tolist

    def guarded_tolist(self: torch.Tensor) -> Any:
        if id(self) not in guard.host:
            raise AssertionError("tolist() on device data")
        return tolist(self)

    with monkeypatch.context() as patch:
        patch.setattr(torch.Tensor, "tolist", guarded_tolist)
        with guard:
            yield guard


def _t(values: list[int], device: str = "cpu") -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64, device=device)


def _paged_calls(alloc: PagedTokenToKVPoolAllocator, device: str,
                 ) -> list[tuple[str, int, list[torch.Tensor], Callable[[], Any]]]:
    """(name, op bound, host tensors, call) for each hot path, on a pool with rows in use."""
    ps = alloc.page_size
    bs = 64
    row = alloc.alloc((4 + bs // 2) * ps)
    assert row is not None
    pre = [0] * (bs // 2) + [ps + 1] * (bs // 2)
    seq = [3 * ps + 2] * bs
    prefix_cpu, seq_cpu = _t(pre), _t(seq)
    prefix_dev, seq_dev = _t(pre, device), _t(seq, device)  # distinct device tensors
    # continuing request j: position ps (its last) on its own page row[(4 + j) * ps], offset 0
    loc = _t([-1] * (bs // 2) + [int(row[(4 + j) * ps]) for j in range(bs // 2)], device)
    dec_cpu, dec_dev = _t([ps + 1] * bs), _t([ps + 1] * bs, device)
    dec_loc = _t([int(row[0]) + (ps - 1)] * bs, device)
    segment = row[ps:4 * ps]
    return [
        ("alloc", 6, [], lambda: alloc.alloc(2 * ps)),
        ("alloc_extend", 40, [prefix_cpu, seq_cpu],
         lambda: alloc.alloc_extend(prefix_dev, prefix_cpu, seq_dev, seq_cpu, loc,
                                    sum(seq) - sum(pre))),
        ("alloc_decode", 16, [dec_cpu],
         lambda: alloc.alloc_decode(dec_dev, dec_cpu, dec_loc)),
        ("free_segments", 16, [], lambda: alloc.free_segments(
            [(segment[:ps + 1], ps), (segment[ps + 1:], 2 * ps + 1)])),
        ("free_segment", 8, [], lambda: alloc.free_segment(row[:ps], start_pos=0)),
    ]


@pytest.mark.parametrize("ps", [1, 16])
def test_hot_path_calls_are_valid(ps: int) -> None:
    """The calls used below pass checked mode (so the bounds are about valid work)."""
    alloc = PagedTokenToKVPoolAllocator(1024 * ps, ps, torch.float16, "cpu", None, False,
                                        checked=True)
    for _, _, _, call in _paged_calls(alloc, "cpu"):
        call()
    alloc.check_invariants()


@pytest.mark.usefixtures("torch_ops")
@pytest.mark.parametrize("need_sort", [False, True])
@pytest.mark.parametrize("ps", [1, 16])
def test_paged_hot_paths_are_sync_free_and_pool_independent(
        ps: int, need_sort: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    alloc = PagedTokenToKVPoolAllocator(NUM_PAGES * ps, ps, torch.float16, "cpu", None, need_sort)
    assert type(alloc._ops) is TorchOps
    for name, bound, host, call in _paged_calls(alloc, "cpu"):
        with hot_path(host, NUM_PAGES // 2, monkeypatch) as guard:
            out = call()
        assert len(guard.ops) <= bound, f"{name}: {len(guard.ops)} ops {guard.ops}"
        if name.startswith("alloc"):
            assert out is not None
    alloc.check_invariants()


@pytest.mark.usefixtures("torch_ops")
@pytest.mark.parametrize("need_sort", [False, True])
def test_token_hot_paths_are_sync_free_and_pool_independent(
        need_sort: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    alloc = TokenToKVPoolAllocator(NUM_PAGES, torch.float16, "cpu", None, need_sort)
    assert type(alloc._ops) is TorchOps
    calls: list[tuple[int, Callable[[], Any]]] = []
    out = alloc.alloc(NUM_PAGES - 30)  # frees wrap around the end of the ring
    assert out is not None
    calls = [(6, lambda: alloc.free(out[:10])), (6, lambda: alloc.alloc(8)),
             (16, lambda: alloc.free_segments([(out[10:20], 10), (out[20:30], 20)])),
             (8, lambda: alloc.free_segment(out[30:40], start_pos=30))]
    for bound, call in calls:
        with hot_path([], NUM_PAGES // 2, monkeypatch) as guard:
            call()
        assert len(guard.ops) <= bound, guard.ops
    alloc.check_invariants()


def test_guard_catches_a_sync_and_pool_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard itself works: an ``item`` on device data and a pool-sized op both fail."""
    pool = torch.arange(NUM_PAGES)
    with pytest.raises(AssertionError, match="sync"), hot_path([], 10, monkeypatch):
        int(pool[3])
    with pytest.raises(AssertionError, match="pool-sized"), hot_path([], 10, monkeypatch):
        pool.sum()
    with pytest.raises(AssertionError, match="tolist"), hot_path([], 10, monkeypatch):
        pool[:2].tolist()
    with pytest.raises(AssertionError, match="output_size"), hot_path([], 10, monkeypatch):
        torch.repeat_interleave(pool[:2], pool[:2])
    with pytest.raises(AssertionError, match="sync"), hot_path([], 10, monkeypatch):
        pool[:5].nonzero()
    with pytest.raises(AssertionError, match="sync"), hot_path([], 10, monkeypatch):
        bool(pool[1])
    host = torch.tensor([1, 2])
    with hot_path([host], 10, monkeypatch):
        assert int(host.sum()) == 3  # host data may be read


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.filterwarnings("ignore:Synchronization debug mode is a prototype:UserWarning")
@pytest.mark.parametrize("ps", [1, 16])
def test_cuda_hot_paths_do_not_sync(ps: int) -> None:
    """On CUDA, the hot paths run under ``set_sync_debug_mode("error")``."""
    alloc = PagedTokenToKVPoolAllocator(1024 * ps, ps, torch.float16, "cuda", None, False)
    calls = _paged_calls(alloc, "cuda")
    host = [(name, call) for name, _, _, call in calls]
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _, call in host:
            call()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    alloc.check_invariants()


@pytest.mark.parametrize("backend", ["torch", "default"])
@pytest.mark.parametrize("need_sort", [False, True])
def test_shortage_reads_nothing_and_changes_nothing(
        need_sort: bool, backend: str, monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest) -> None:
    """EXTEND-6 / DECODE-6 (SGLang bug B1): a short pool answers None from the host counts
    before any device op runs, so nothing is read out of bounds and nothing changes (on the
    torch backend and on the default CPU one)."""
    if backend == "torch":
        request.getfixturevalue("torch_ops")
    ps = 4
    alloc = PagedTokenToKVPoolAllocator(4 * ps, ps, torch.float16, "cpu", None, need_sort)
    row = alloc.alloc(3 * ps)
    assert row is not None
    alloc.merge_and_sort_free()
    before = (alloc.get_all_free_pages().tolist(), alloc.available_size())
    pre_cpu, seq_cpu, dec_cpu = _t([0, 0]), _t([ps, ps + 1]), _t([ps + 1, 1])
    pre, seq, dec = _t([0, 0]), _t([ps, ps + 1]), _t([ps + 1, 1])
    loc, dec_loc = _t([-1, -1]), _t([int(row[ps - 1]), -1])
    with hot_path([pre_cpu, seq_cpu, dec_cpu], 10**9, monkeypatch) as guard:
        assert alloc.alloc_extend(pre, pre_cpu, seq, seq_cpu, loc, 2 * ps + 1) is None
        assert alloc.alloc_decode(dec, dec_cpu, dec_loc) is None
        assert alloc.alloc(2 * ps) is None
    assert guard.ops == []
    assert (alloc.get_all_free_pages().tolist(), alloc.available_size()) == before
