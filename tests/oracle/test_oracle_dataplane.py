"""The oracle's data plane (``kvpool.oracle.engine.dataplane``, SPEC.md DATA-1..3): signatures
written into the KV bytes of every slot handed out, read back after every call.

Pinned here: the plane is off unless asked for (and then costs the engine nothing); with it on,
kvpool's and SGLang's allocators of both families stay conformant and every check runs; a window
release ends the SWA side's liveness only; and broken allocators the census cannot see are
caught by the plane and pass without it: a hybrid translation that maps two full slots of one
allocation to one SWA slot (DATA-2), a ``load_cpu_copy`` that restores to other slots (DATA-3,
single and hybrid); DATA-2 on a slot handed out while live or placed where a live slot keeps its
bytes, and a broken hybrid allocator of ``broken_hybrid.BROKEN_HYBRID_DATA`` (a translation
memo not forgotten at free: its cause DATA-2, shown at the hand-out by a fixed sequence; a run
with the plane on meets it first as SWA-16); a DATA failure's trace replays with the plane.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
import torch
from broken_causes import symptom_note
from broken_hybrid import BROKEN_HYBRID_DATA, BrokenHybrid
from kvpool.oracle.engine import dataplane
from kvpool.oracle.engine.dataplane import CheckedBuffer, DataPlane, TensorStore
from kvpool.oracle.engine.families import family
from kvpool.oracle.engine.replay import replay
from kvpool.oracle.engine.report import OracleFailure
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config
from kvpool.oracle.engine.trace import Trace
from kvpool.oracle.families.hybrid.executor import HybridExecutor
from kvpool.oracle.families.hybrid.runner import run_hybrid
from kvpool.oracle.families.hybrid.targets import kvpool_swa
from kvpool.oracle.families.single.executor import Executor
from kvpool.oracle.families.single.targets import kvpool_paged, kvpool_token
from kvpool.oracle.peers.availability import raise_if_child_missing, require_installed
from kvpool.oracle.peers.peer_import import load_sglang_allocators
from kvpool.spec.contract import Divergence
from kvpool.spec.dataplane import KVSignatures

SINGLE, HYBRID = family("single"), family("hybrid")


@pytest.fixture
def plane_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(dataplane.ENV, "1")


# -- broken allocators: each breaks only the bytes' contract, never the census --------------------
def _flip_load(cls: type) -> type:
    class RestoresReversed(cls):  # type: ignore[misc]
        """DATA-3: ``load_cpu_copy`` restores the copy to the slots in reverse order."""

        def load_cpu_copy(self, kv_cache_cpu: Any, indices: torch.Tensor, *a: Any,
                          **k: Any) -> Any:
            return super().load_cpu_copy(kv_cache_cpu, indices.flip(0), *a, **k)

    return RestoresReversed


def token_restores_reversed(*, size: int, page_size: int = 1, need_sort: bool,
                            device: str = "cpu") -> Any:
    base = kvpool_token(size=size, page_size=page_size, need_sort=need_sort, device=device)
    base.__class__ = _flip_load(type(base))
    return base


def swa_restores_reversed(**kwargs: Any) -> Any:
    base = kvpool_swa(**kwargs)
    base.__class__ = _flip_load(type(base))
    return base


def swa_folded_translation(**kwargs: Any) -> Any:
    """DATA-2: ``translate_loc_from_full_to_swa`` folds SWA slots pairwise (2k and 2k+1 read
    as 2k+1): two full slots handed out together put their SWA bytes in one SWA slot; the
    mapping tensor is intact."""
    base = kvpool_swa(**kwargs)
    cls = type(base)

    class Folded(cls):  # type: ignore[misc, valid-type]
        def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
            out = super().translate_loc_from_full_to_swa(kv_indices)
            return torch.where(out > 0, out | 1, out)

    base.__class__ = Folded
    return base


def _hybrid(factory: Any, ps: int = 1) -> HybridExecutor:
    target = HYBRID.target(factory, kvpool_swa.kvpool_hybrid_capabilities)
    ex = HybridExecutor(target, Config(ps, False))
    ex.create(32, 16)
    return ex


def _single(factory: Any, caps_of: Any = kvpool_token, ps: int = 1) -> Executor:
    ex = Executor(SINGLE.target(factory, caps_of.kvpool_capabilities), Config(ps, False))
    ex.create(32)
    return ex


def _target_of(ex: Any) -> Any:
    fam = HYBRID if isinstance(ex, HybridExecutor) else SINGLE
    return fam.target(ex.factory, ex.caps)


# -- off by default -----------------------------------------------------------------------------
def test_the_plane_is_off_unless_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(dataplane.ENV, raising=False)
    ex = _single(token_restores_reversed)  # broken only in its bytes: passes with the plane off
    ex.call("alloc", need_size=4)
    assert ex.plane is None and not ex.data_plane and not ex.trace.data_plane
    monkeypatch.setenv(dataplane.ENV, "0")
    assert not dataplane.requested()


# -- conformant targets with the plane on ----------------------------------------------------------
@pytest.mark.parametrize("path", ["kvpool.oracle.families.single.targets:kvpool_token",
                                  "kvpool.oracle.families.single.targets:kvpool_paged",
                                  "kvpool.oracle.families.single.targets:sglang_paged"])
def test_single_pool_targets_keep_their_bytes(plane_on: None, path: str) -> None:
    from kvpool.oracle.families.single.targets import load_target

    if "sglang" in path:
        load_sglang_allocators()  # PeerNotInstalled without SGLang: skipped outside CI
    target = load_target(path)
    ps = 1 if path.endswith("token") else 4
    result = run_config(target, Config(ps, False), max_examples=15, shrink_seconds=0)
    assert result.ok, (result.error, result.failure and result.failure.detail)
    # DATA-1 checked after every call, DATA-2 at every hand-out, DATA-3 through get_cpu_copy
    assert result.coverage["data.check"] >= result.calls // 2
    assert result.coverage["data.hand_out"] > 0 and result.coverage["data.round_trip"] > 0


@pytest.mark.parametrize("alias", ["kvpool-swa", "sglang-swa"])
@pytest.mark.parametrize("ps", [1, 4])
def test_hybrid_targets_keep_both_sides_bytes(plane_on: None, alias: str, ps: int) -> None:
    if alias.startswith("sglang"):
        load_sglang_allocators()  # PeerNotInstalled without SGLang: skipped outside CI
    target = HYBRID.target(HYBRID.factory(alias))
    result = run_config(target, Config(ps, False), max_examples=10, step_count=30,
                        shrink_seconds=0)
    assert result.ok, (result.error, result.failure and result.failure.detail)
    assert result.coverage["data.check"] > 0 and result.coverage["data.round_trip"] > 0


_RUNTIME_FIRST = """
import json, os, sys
from kvpool.oracle.engine import dataplane
from kvpool.oracle.peers.availability import exit_if_missing
os.environ[dataplane.ENV] = "1"
try:
    from kvpool.oracle.peers.peer_import import load_sglang_runtime
    load_sglang_runtime()
except ImportError as err:
    exit_if_missing(err)
    raise
from kvpool.oracle.engine.families import family
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config
hybrid = family("hybrid")
result = run_config(hybrid.target(hybrid.factory("sglang-swa")), Config(4, False),
                    max_examples=5, step_count=20, shrink_seconds=0)
print(json.dumps([result.ok, result.coverage["data.round_trip"]]))
"""


def test_sglang_swa_round_trips_after_sglangs_runtime_loaded() -> None:
    """With SGLang's runtime imported first, the stand-in SWA pool derives from SGLang's real
    ``BaseSWAKVPool`` (whose CPU copy raises NotImplementedError): the data plane must still
    copy through its own stores, as in a process that never loaded the runtime."""
    require_installed("sglang")
    proc = subprocess.run([sys.executable, "-c", _RUNTIME_FIRST], capture_output=True,
                          text=True, timeout=600, check=False)
    raise_if_child_missing(proc.returncode, proc.stderr)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ok, round_trips = json.loads(proc.stdout.strip().splitlines()[-1])
    assert ok and round_trips > 0


def test_a_window_release_ends_the_swa_sides_liveness_only(plane_on: None) -> None:
    ex = _hybrid(kvpool_swa)
    first = ex.call("alloc", need_size=3)
    assert ex.plane is not None
    full, swa = ex.plane.sides
    ex.call("free_swa", free_index=first[:2])
    assert sorted(full.kv.expected) == sorted(first)  # the full side still holds its bytes
    assert sorted(swa.kv.expected) == first[2:]
    ex.call("alloc", need_size=12)  # reuses the released SWA slots: no DATA-2, full side intact
    assert full.kv.expected[first[0]] == (1, 0)
    ex.call("free", free_index=first[2:])
    ex.call("free_full", free_index=first[:2])
    assert not set(first) & set(full.kv.expected)


# -- broken allocators the census cannot see --------------------------------------------------
def test_a_translation_folding_two_new_slots_breaks_DATA_2(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two slots of one allocation put their SWA bytes in one place: caught at the hand-out
    (DATA-2), before a read could show one of them overwritten (DATA-1)."""
    monkeypatch.delenv(dataplane.ENV, raising=False)
    ex = _hybrid(swa_folded_translation)
    ex.call("alloc", need_size=4)  # the census (mapping tensor, free lists) is right
    monkeypatch.setenv(dataplane.ENV, "1")
    ex = _hybrid(swa_folded_translation)
    with pytest.raises(OracleFailure) as err:
        ex.call("alloc", need_size=4)
    assert err.value.failure.clause == "DATA-2"
    assert "puts its bytes at 3, where slot 2 of the same allocation" in err.value.failure.detail


@pytest.mark.parametrize("broken", BROKEN_HYBRID_DATA,
                         ids=[b.cls.__name__ for b in BROKEN_HYBRID_DATA])
def test_broken_allocators_the_census_cannot_see_fail_the_default_run(
        plane_on: None, broken: BrokenHybrid) -> None:
    """A full slot handed out again translated to the SWA slot it had before: the default
    hybrid budget with the plane on fails, under whichever check meets the stale translation
    first: the plane at the hand-out, where the stale place is a live slot's (DATA-2), or a
    translation the scheduler model asks for (SWA-16)."""
    result = run_hybrid(broken.factory(), max_examples=60, shrink_seconds=4)
    assert result.failure is not None, result.summary()
    assert result.failure.clause in (broken.cause, broken.clauses[0]), (
        symptom_note(broken) + result.failure.report())
    assert result.failure.trace.num_calls() <= 8, result.failure.report()


def test_a_stale_translation_at_a_hand_out_breaks_DATA_2(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A full slot handed out again whose memoized SWA slot another live slot holds now: no
    census shows it (plane off, the calls pass); with the plane on, the hand-out is DATA-2."""
    [memo] = BROKEN_HYBRID_DATA

    def calls(ex: HybridExecutor) -> None:
        a = ex.call("alloc", need_size=16)  # full 1..16 <-> SWA 1..16, translated (memoized)
        ex.call("free", free_index=a[:8])
        ex.call("alloc", need_size=8)  # full 17..24 <-> SWA 1..8: live
        ex.call("free", free_index=a[8:])
        c = ex.call("alloc", need_size=8)  # full 25..32 <-> SWA 9..16
        ex.call("free_swa", free_index=c)
        ex.call("alloc", need_size=8)  # full 1..8 again, <-> SWA 9..16; the memo says 1..8

    monkeypatch.delenv(dataplane.ENV, raising=False)
    calls(_hybrid(memo.factory()))
    monkeypatch.setenv(dataplane.ENV, "1")
    with pytest.raises(OracleFailure) as err:
        calls(_hybrid(memo.factory()))
    assert err.value.failure.clause == "DATA-2"
    assert "puts its bytes at 1, where live slot 17" in err.value.failure.detail


def test_a_slot_placed_where_a_live_slot_keeps_its_bytes_breaks_DATA_2() -> None:
    """On a side reached through a translation, a new slot whose place is an earlier live
    slot's is refused at the hand-out, whatever the slot ids."""
    store, places = TensorStore(), {3: 30, 4: 40, 5: 30}
    side = CheckedBuffer("swa", store, lambda s: True,
                         translate=lambda x: torch.tensor([places[int(s)] for s in x.tolist()]))
    plane = DataPlane(object(), [side])
    plane.after(1, "alloc", [3, 4], Counter())
    want = r"\[DATA-2\] slot 5 .* at 30, where live slot 3 \(request 1, position 0\)"
    with pytest.raises(Divergence, match=want):
        plane.after(2, "alloc", [5], Counter())


@pytest.mark.parametrize("factory,make", [
    (token_restores_reversed, lambda f: _single(f)),
    (swa_restores_reversed, lambda f: _hybrid(f)),
])
def test_a_load_cpu_copy_to_other_slots_breaks_DATA_3(
        monkeypatch: pytest.MonkeyPatch, factory: Any, make: Any) -> None:
    monkeypatch.delenv(dataplane.ENV, raising=False)
    make(factory).call("alloc", need_size=4)
    monkeypatch.setenv(dataplane.ENV, "1")
    ex = make(factory)
    with pytest.raises(OracleFailure) as err:
        ex.call("alloc", need_size=4)
    failure = err.value.failure
    assert failure.clause == "DATA-3" and "load_cpu_copy" in failure.detail
    assert failure.trace.data_plane
    # the trace replays with the plane on, even where the environment leaves it off
    monkeypatch.delenv(dataplane.ENV)
    again = replay(Trace.from_json(failure.trace.to_json()), _target_of(ex))
    assert again is not None and again.clause == "DATA-3"


def test_the_run_finds_a_restore_to_other_slots(plane_on: None) -> None:
    target = SINGLE.target(token_restores_reversed, kvpool_token.kvpool_capabilities)
    result = run_config(target, Config(1, False), max_examples=20, shrink_seconds=2)
    assert result.failure is not None and result.failure.clause == "DATA-3"


# -- the plane's own rules ------------------------------------------------------------------------
def test_a_live_slot_handed_out_again_breaks_DATA_2() -> None:
    store, live = TensorStore(), {3, 4}
    plane = DataPlane(object(), [CheckedBuffer("kv", store, lambda s: s in live)])
    events: Counter[str] = Counter()
    plane.after(1, "alloc", [3, 4], events)
    with pytest.raises(Divergence, match=r"\[DATA-2\] slot 4 handed out to request 2 while "
                                         r"still live \(request 1, position 1\)"):
        plane.after(2, "alloc", [4], events)
    assert plane.sides[0].kv.expected == {3: (1, 0), 4: (1, 1)}  # nothing recorded
    live.discard(4)
    plane.after(3, "alloc", [], events)  # slot 4 freed: its bytes may change now
    store.write(torch.tensor([4]), torch.tensor([[9, 9]]))
    plane.check("after a write into a freed slot")
    store.write(torch.tensor([3]), torch.tensor([[9, 9]]))
    with pytest.raises(Divergence, match=r"\[DATA-1\] .*live slot 3 holds \(9, 9\)"):
        plane.check("after a write into a live slot")


def test_a_slot_translated_to_no_index_reads_as_no_bytes() -> None:
    side = CheckedBuffer("swa", TensorStore(4), lambda s: True, translate=lambda t: t - 2)
    side.write([1, 3], torch.tensor([[5, 0], [5, 1]]))
    assert side.read([1, 3]) == [(-1, -1), (5, 1)]
    kv = KVSignatures()
    kv.hand_out([1, 3], request=5)
    with pytest.raises(Divergence, match="DATA-1"):
        kv.check_read([1, 3], side.read([1, 3]), "now")


def test_the_store_grows_and_refuses_negative_slots() -> None:
    store = TensorStore(2)
    store.write(torch.tensor([7]), torch.tensor([[1, 2]]))
    assert store.rows.shape == (8, 2) and store.read(torch.tensor([7])).tolist() == [[1, 2]]
    with pytest.raises(IndexError):
        store.read(torch.tensor([-1]))
    store.check_invariants()


def test_a_paged_allocators_partial_page_slots_join_their_request(plane_on: None) -> None:
    ex = _single(kvpool_paged, kvpool_paged, ps=4)
    first = ex.call("alloc_extend", prefix_lens=[0], seq_lens=[3], last_loc=[-1],
                    extend_num_tokens=3)
    more = ex.call("alloc_extend", prefix_lens=[3], seq_lens=[6], last_loc=[first[-1]],
                   extend_num_tokens=3)
    assert ex.plane is not None
    kv = ex.plane.sides[0].kv
    assert kv.expected[more[0]] == (2, 0) and kv.expected[first[0]] == (1, 0)


# -- the options that turn it on ----------------------------------------------------------------
token_restores_reversed.kvpool_capabilities = kvpool_token.kvpool_capabilities  # type: ignore[attr-defined]


@pytest.mark.parametrize("option", [[], ["--data-plane"]])
def test_the_command_lines_option(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                  capsys: pytest.CaptureFixture[str], option: list[str]) -> None:
    from kvpool.oracle.entry.cli import main

    monkeypatch.setenv(dataplane.ENV, "0")  # restored after the test
    code = main([*option, "--examples", "20", "--page-sizes", "1", "--need-sort", "false",
                 "--trace-dir", str(tmp_path), "test_oracle_dataplane:token_restores_reversed"])
    out = capsys.readouterr().out
    if option:
        assert code != 0 and "FAIL DATA-3" in out
    else:
        assert code == 0 and "FAIL DATA" not in out


def test_the_pytest_plugins_option(tmp_path: Any) -> None:
    """``pytest --kvpool-target ... --kvpool-data-plane`` runs the items with the plane on."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    here = str(Path(__file__).parent)
    env = {k: v for k, v in os.environ.items() if k != dataplane.ENV}
    env["PYTHONPATH"] = os.pathsep.join([here, env.get("PYTHONPATH", "")])
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--kvpool-target",
            "test_oracle_dataplane:token_restores_reversed", "--kvpool-examples", "20",
            "--kvpool-page-sizes", "1", "--kvpool-need-sort", "false",
            "--kvpool-trace-dir", str(tmp_path), "-k", "kvpool_conformance"]
    run = subprocess.run([*args, "--kvpool-data-plane"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=240, check=False)
    # (without the option the same items pass: test_the_command_lines_option's run)
    assert run.returncode == 1 and "DATA-3" in run.stdout, run.stdout + run.stderr


class _Rows:
    """A KV cache of the target's own whose rows a store reads (not a TensorStore)."""

    def __init__(self, flip: bool = False) -> None:
        self.rows, self.flip = torch.zeros((16, 2), dtype=torch.int64), flip

    def write(self, slots: torch.Tensor, signatures: torch.Tensor) -> None:
        self.rows[slots] = signatures

    def read(self, slots: torch.Tensor) -> torch.Tensor:
        return self.rows[slots].clone()

    def get_cpu_copy(self, indices: torch.Tensor) -> torch.Tensor:
        return self.rows[indices].clone()

    def load_cpu_copy(self, copy: torch.Tensor, indices: torch.Tensor) -> None:
        self.rows[indices.flip(0) if self.flip else indices] = copy


def _owning_target(cache: Any) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(_kvcache=cache, get_cpu_copy=cache.get_cpu_copy,
                           load_cpu_copy=cache.load_cpu_copy)


@pytest.mark.parametrize("flip", [False, True])
def test_a_targets_own_kv_cache_round_trips_where_the_stores_read_it(flip: bool) -> None:
    cache = _Rows(flip)
    plane = DataPlane(_owning_target(cache), [CheckedBuffer("kv", cache, lambda s: True)])
    assert plane.round_trips and cache is plane.target._kvcache  # its own cache, kept
    events: Counter[str] = Counter()
    if flip:
        with pytest.raises(Divergence, match=r"\[DATA-3\] get_cpu_copy/load_cpu_copy of alloc"):
            plane.after(1, "alloc", [3, 4, 5], events)
    else:
        plane.after(1, "alloc", [3, 4, 5], events)
        assert events["data.round_trip"] == 1
    # harness stores beside a real cache: the cache does not hold their bytes, no round trips
    sides = [CheckedBuffer("kv", TensorStore(), bool)]
    assert not DataPlane(_owning_target(_Rows()), sides).round_trips


def test_a_round_trip_that_raises_is_DATA_3_and_one_not_implemented_stops_them() -> None:
    cache = _Rows()
    target = _owning_target(cache)
    plane = DataPlane(target, [CheckedBuffer("kv", cache, lambda s: True)])
    target.load_cpu_copy = lambda c, i: (_ for _ in ()).throw(RuntimeError("device lost"))
    with pytest.raises(Divergence, match=r"\[DATA-3\] load_cpu_copy of alloc's slots raised "
                                         r"RuntimeError: device lost"):
        plane.after(1, "alloc", [3], Counter())

    def absent(indices: torch.Tensor) -> Any:
        raise NotImplementedError

    target.get_cpu_copy = absent
    plane = DataPlane(target, [CheckedBuffer("kv", cache, lambda s: True)])
    plane.after(2, "alloc", [6], Counter())
    assert not plane.round_trips


def test_the_vectorized_release_agrees_with_the_per_slot_one(plane_on: None) -> None:
    from kvpool.oracle.engine.dataplane import live_slot, live_slots_mask

    ex = _single(kvpool_paged, kvpool_paged, ps=4)
    a = ex.call("alloc", need_size=8)
    b = ex.call("alloc", need_size=4)
    ex.call("free", free_index=a[:4])
    assert ex.model is not None
    slots = torch.tensor([0, *a, *b, 40, 999])
    mask = live_slots_mask(ex.model, slots).tolist()
    assert mask == [live_slot(ex.model, int(s)) for s in slots]
    assert ex.plane is not None and sorted(ex.plane.sides[0].kv.expected) == sorted(a[4:] + b)


def test_a_data_failures_repro_replays_the_bytes(plane_on: None, tmp_path: Any) -> None:
    """The pytest repro of a DATA failure ends by replaying its trace with the plane on: it
    fails on the broken allocator and passes on a correct one."""
    import importlib
    import sys

    from kvpool.oracle.engine.repro import to_pytest

    ex = _single(token_restores_reversed)
    with pytest.raises(OracleFailure) as err:
        ex.call("alloc", need_size=4)
    trace = err.value.failure.trace
    assert any("replay_with_plane" in line for line in trace.final_asserts)
    for name, factory in (("broken", "token_restores_reversed"), ("good", "kvpool_token")):
        source = to_pytest(trace, f"test_oracle_dataplane:{factory}")
        if factory == "kvpool_token":
            source = source.replace("from test_oracle_dataplane import kvpool_token",
                                    "from kvpool.oracle.families.single.targets import "
                                    "kvpool_token")
        (tmp_path / f"repro_{name}.py").write_text(source)
    sys.path.insert(0, str(tmp_path))
    try:
        broken = importlib.import_module("repro_broken")
        with pytest.raises(AssertionError, match="DATA-3"):
            broken.test_kvpool_repro()
        importlib.import_module("repro_good").test_kvpool_repro()
    finally:
        sys.path.remove(str(tmp_path))
