"""The data plane's parts one at a time (``kvpool.oracle.engine.dataplane``, SPEC.md DATA-1..3),
on hand-made sides and targets (no allocator): the harness's store (its size, growth and
refusals), a side's translation at place 0 and below, the first wrong slot named with its bytes,
a side's cached signatures refreshed after a hand-out, the vectorized liveness at the pool's
edges, a CPU copy that restores nothing, the events counted per call, which targets get
round trips, and the engine hook's one torch thread.
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from kvpool.oracle.engine import dataplane
from kvpool.oracle.engine.dataplane import CheckedBuffer, DataPlane, TensorStore
from kvpool.spec.contract import Divergence
from kvpool.spec.model import AllocatorModel


def _ids(*slots: int) -> torch.Tensor:
    return torch.tensor(slots, dtype=torch.int64)


# -- the harness's store ---------------------------------------------------------------------
def test_an_empty_store_starts_without_rows_and_reads_nothing() -> None:
    store = TensorStore()
    assert store.rows.shape == (0, 2)
    assert store.read(_ids()).shape == (0, 2)
    store.write(_ids(), torch.zeros((0, 2), dtype=torch.int64))
    assert store.rows.shape == (0, 2)  # nothing to fit: no row added


def test_slot_zero_is_a_slot_and_a_negative_one_is_refused_wherever_it_stands() -> None:
    store = TensorStore()
    store.write(_ids(0), torch.tensor([[4, 1]]))
    assert store.read(_ids(0)).tolist() == [[4, 1]]
    for slots in (_ids(-1), _ids(3, -2), _ids(-5, 0)):
        with pytest.raises(IndexError, match="non-negative"):
            store.read(slots)
        with pytest.raises(IndexError, match="non-negative"):
            store.write(slots, torch.zeros((len(slots), 2), dtype=torch.int64))
    assert store.rows.shape == (1, 2)  # a refused call grows nothing


def test_the_store_fits_the_largest_slot_and_keeps_its_rows_when_it_grows() -> None:
    store = TensorStore(3)
    store.write(_ids(1, 2), torch.tensor([[1, 0], [1, 1]]))
    store.write(_ids(9, 4), torch.tensor([[2, 0], [2, 1]]))  # the largest slot is not the last
    assert store.rows.shape == (10, 2)
    assert store.read(_ids(1, 2, 4, 9)).tolist() == [[1, 0], [1, 1], [2, 1], [2, 0]]
    store.write(_ids(5), torch.tensor([[3, 0]]))  # inside: no growth, nothing lost
    assert store.rows.shape == (10, 2)
    assert store.read(_ids(9, 5)).tolist() == [[2, 0], [3, 0]]
    assert store.read(_ids(12)).tolist() == [[0, 0]] and store.rows.shape == (13, 2)


def test_a_store_with_other_than_two_columns_fails_its_invariants() -> None:
    store = TensorStore(4)
    store.check_invariants()
    store.rows = torch.zeros((4, 3), dtype=torch.int64)
    with pytest.raises(AssertionError):
        store.check_invariants()


# -- a side reached through a translation -------------------------------------------------------
def test_place_zero_holds_bytes_and_places_below_it_none() -> None:
    side = CheckedBuffer("swa", TensorStore(4), lambda s: True, translate=lambda t: t - 2)
    side.write([1, 2, 3], torch.tensor([[5, 0], [5, 1], [5, 2]]))
    assert side.read([1, 2, 3]) == [(-1, -1), (5, 1), (5, 2)]


def test_a_new_slot_placed_at_zero_where_a_live_slot_keeps_its_bytes_breaks_DATA_2() -> None:
    places = {3: 0, 4: 7, 5: 0}
    side = CheckedBuffer("swa", TensorStore(), lambda s: True,
                         translate=lambda x: torch.tensor([places[int(s)] for s in x.tolist()]))
    plane = DataPlane(object(), [side])
    plane.after(1, "alloc", [3, 4], Counter())
    with pytest.raises(Divergence, match=r"\[DATA-2\] slot 5 .* at 0, where live slot 3 "):
        plane.after(2, "alloc", [5], Counter())


# -- DATA-1: the first wrong slot, with its bytes --------------------------------------------------
def test_the_first_wrong_slot_is_named_with_the_bytes_it_holds() -> None:
    store = TensorStore()
    plane = DataPlane(object(), [CheckedBuffer("kv", store, lambda s: True)])
    plane.after(1, "alloc", [3, 4, 5], Counter())
    store.write(_ids(4, 5), torch.tensor([[9, 8], [7, 6]]))
    with pytest.raises(Divergence, match=r"\[DATA-1\] now, kv side: live slot 4 holds \(9, 8\), "
                                         r"written as \(request 1, position 1\)"):
        plane.check("now")


def test_a_slot_handed_out_after_a_check_is_checked_too() -> None:
    """The side's signatures are read once per check and refreshed at every hand-out."""
    store = TensorStore()
    plane = DataPlane(object(), [CheckedBuffer("kv", store, lambda s: True)])
    plane.after(1, "alloc", [3], Counter())
    plane.after(2, "alloc", [4], Counter())
    store.write(_ids(4), torch.tensor([[9, 9]]))
    with pytest.raises(Divergence, match=r"\[DATA-1\] .*live slot 4 holds \(9, 9\)"):
        plane.check("after a write into the newer slot")


# -- the spec model's liveness, per slot and vectorized ----------------------------------------
def _model() -> AllocatorModel:
    """A pool of 4 pages of 4 slots: pages 1 and 4 held, 2 and 3 free."""
    model = AllocatorModel(16, page_size=4)
    slots = model.alloc(16)
    assert slots is not None
    model.free([s for s in slots if s // 4 in (2, 3)])
    assert sorted(model.get_all_free_pages()) == [2, 3]
    return model


def test_liveness_at_the_pools_edges_per_slot_and_vectorized() -> None:
    model = _model()
    slots = [0, 3, 4, 7, 8, 12, 16, 19, 20, 23, 999]
    want = [False, False, True, True, False, False, True, True, False, False, False]
    assert [dataplane.live_slot(model, s) for s in slots] == want
    assert dataplane.live_slots_mask(model, _ids(*slots)).tolist() == want


# -- DATA-3: the round trip --------------------------------------------------------------------
class _Cache:
    """A KV cache of the target's own, its rows read by the side's store; ``load`` says what
    ``load_cpu_copy`` does: ``"copy"`` restores, ``"none"`` leaves the slots as they are,
    ``"missing"`` raises NotImplementedError."""

    def __init__(self, load: str = "copy") -> None:
        self.rows, self.load, self.copies = torch.zeros((16, 2), dtype=torch.int64), load, 0

    def write(self, slots: torch.Tensor, signatures: torch.Tensor) -> None:
        self.rows[slots] = signatures

    def read(self, slots: torch.Tensor) -> torch.Tensor:
        return self.rows[slots].clone()

    def get_cpu_copy(self, indices: torch.Tensor) -> torch.Tensor:
        self.copies += 1
        return self.rows[indices].clone()

    def load_cpu_copy(self, copy: torch.Tensor, indices: torch.Tensor) -> None:
        if self.load == "missing":
            raise NotImplementedError
        if self.load == "copy":
            self.rows[indices] = copy


def _owning(cache: _Cache) -> Any:
    return SimpleNamespace(_kvcache=cache, get_cpu_copy=cache.get_cpu_copy,
                           load_cpu_copy=cache.load_cpu_copy)


def test_a_load_cpu_copy_that_restores_nothing_breaks_DATA_3() -> None:
    cache = _Cache("none")
    plane = DataPlane(_owning(cache), [CheckedBuffer("kv", cache, lambda s: True)])
    with pytest.raises(Divergence, match=r"\[DATA-3\] get_cpu_copy/load_cpu_copy of alloc's "
                                         r"slots, kv side: live slot 3 holds \(-7, -7\)"):
        plane.after(1, "alloc", [3, 4], Counter())


def test_a_load_cpu_copy_not_implemented_breaks_DATA_3() -> None:
    """Only ``get_cpu_copy`` may be missing (no round trips then); a copy taken that cannot
    be loaded back is a broken retract-and-resume."""
    cache = _Cache("missing")
    plane = DataPlane(_owning(cache), [CheckedBuffer("kv", cache, lambda s: True)])
    with pytest.raises(Divergence, match=r"\[DATA-3\] load_cpu_copy of alloc's slots is not "
                                         r"implemented"):
        plane.after(1, "alloc", [3], Counter())


def test_a_missing_get_cpu_copy_is_asked_for_once() -> None:
    cache = _Cache()
    asked: list[int] = []

    def absent(indices: torch.Tensor) -> Any:
        asked.append(len(indices))
        raise NotImplementedError

    target = _owning(cache)
    target.get_cpu_copy = absent
    plane = DataPlane(target, [CheckedBuffer("kv", cache, lambda s: True)])
    plane.after(1, "alloc", [3], Counter())
    plane.after(2, "alloc", [4, 5], Counter())
    assert asked == [1] and not plane.round_trips


def test_each_call_counts_one_hand_out_check_and_round_trip() -> None:
    cache = _Cache()
    plane = DataPlane(_owning(cache), [CheckedBuffer("kv", cache, lambda s: True)])
    events: Counter[str] = Counter()
    plane.after(1, "alloc", [3, 4], events)
    assert events == Counter({"data.hand_out": 1, "data.check": 1, "data.round_trip": 1})
    plane.after(2, "free", None, events)
    assert events == Counter({"data.hand_out": 1, "data.check": 2, "data.round_trip": 1})
    assert cache.copies == 1


def test_a_target_without_a_kv_cache_attribute_gets_no_harness_cache() -> None:
    """``get_cpu_copy`` on the target alone (no ``_kvcache``): nothing to copy through."""
    target = SimpleNamespace(get_cpu_copy=lambda i: None, load_cpu_copy=lambda c, i: None)
    plane = DataPlane(target, [CheckedBuffer("kv", TensorStore(), lambda s: True)])
    assert not plane.round_trips and not hasattr(target, "_kvcache")
    with_none = SimpleNamespace(_kvcache=None, get_cpu_copy=lambda i: None)
    plane = DataPlane(with_none, [CheckedBuffer("kv", TensorStore(), lambda s: True)])
    assert plane.round_trips and isinstance(with_none._kvcache, dataplane.HarnessKVCache)


def test_the_planes_invariants_check_every_sides_signatures() -> None:
    side = CheckedBuffer("kv", TensorStore(), lambda s: True)
    plane = DataPlane(object(), [side])
    plane.after(1, "alloc", [3], Counter())
    plane.check_invariants()
    side.kv.expected[-1] = (1, 1)
    with pytest.raises(AssertionError):
        plane.check_invariants()


# -- the engine's hook ---------------------------------------------------------------------------
class _ThreadsSeen:
    """A store that records how many threads torch runs on at each write."""

    def __init__(self) -> None:
        self.inner = TensorStore()
        self.threads: list[int] = []

    def write(self, slots: torch.Tensor, signatures: torch.Tensor) -> None:
        self.threads.append(torch.get_num_threads())
        self.inner.write(slots, signatures)

    def read(self, slots: torch.Tensor) -> torch.Tensor:
        rows: torch.Tensor = self.inner.read(slots)
        return rows


def test_the_engines_hook_runs_torch_on_one_thread_and_restores_the_count() -> None:
    store = _ThreadsSeen()
    engine = SimpleNamespace(plane=None, target=object(), events=Counter(),
                             calls={"alloc": SimpleNamespace(kind="alloc"),
                                    "free": SimpleNamespace(kind="free")},
                             _data_sides=lambda: [CheckedBuffer("kv", store, lambda s: True)])
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        dataplane.after_call(engine, 1, "alloc", [3, 4])
        assert store.threads == [1] and torch.get_num_threads() == 3
        plane = engine.plane
        dataplane.after_call(engine, 2, "free", [5])  # not an allocation: nothing handed out
        assert engine.plane is plane and sorted(plane.sides[0].kv.expected) == [3, 4]
    finally:
        torch.set_num_threads(before)
