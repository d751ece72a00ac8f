"""Reach: the default run builds every input shape the contract gives meaning to.

Each shape is a coverage event the gate requires (a slot named twice in one paged ``free()``,
a slot named again inside a group, allocations around powers of two >= 256, segments starting
mid-page on 1, 2 and >= 3 pages); a broken allocator that only that shape exposes is caught at
the default budget of one configuration (``DEFAULT_EXAMPLES``), under one pinned clause; and
kvpool's own allocators pass while reaching the events.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from broken_allocators import Broken
from broken_causes import symptom_note
from broken_reach import REACH_BROKEN
from kvpool.oracle.engine.capabilities import PAGED, TOKEN, capabilities_of
from kvpool.oracle.engine.runner import DEFAULT_EXAMPLES, DEFAULT_STEPS, run_config
from kvpool.oracle.engine.target import Config, Target
from kvpool.oracle.engine.trace import TraceStep
from kvpool.oracle.families.single import coverage
from kvpool.oracle.families.single.scheduler import near_powers_of_two
from kvpool.oracle.families.single.targets import kvpool_paged
from kvpool.spec import AllocatorModel

REACH_EVENTS = (
    "free.repeat_slot",
    "group.repeat_slot",
    "size.pow2_single",
    "size.pow2_batch",
    "seg.unaligned_1",
    "seg.unaligned_2",
    "seg.unaligned_3",
    "seg.single_wrap",
    "input.int32",
    "input.strided",
)
TOKEN_REACH_EVENTS = ("size.pow2_single", "input.int32", "input.strided")


def _events(model: AllocatorModel, call: str, **args: object) -> list[str]:
    before = coverage.snapshot(model)
    result = getattr(model, call)(**args)
    return coverage.events_of(TraceStep(call, dict(args)), before, model, result)


def test_the_gate_requires_every_reach_event_of_a_full_paged_target() -> None:
    """A paged target with shared segments must reach all of them (at ps > 1); a token target
    the single power-of-two allocation and the slot forms; a target that accepts no other slot
    form is not sent them."""
    assert set(REACH_EVENTS) <= set(coverage.required(PAGED, 4, False))
    assert set(coverage.required(TOKEN, 1, False)) & set(REACH_EVENTS) == set(TOKEN_REACH_EVENTS)
    assert not {"input.int32", "input.strided"} & set(
        coverage.required(PAGED.replace(slot_forms=()), 4, False)
    )


def test_repeat_events_free_4_group_6() -> None:
    """FREE-4: a slot named twice releases its page once; GROUP-6: a slot named again by a
    later free() of the group is released once at the end."""
    m = AllocatorModel(64, 4, paged=True)
    row = m.alloc(16)
    assert row is not None
    assert "free.repeat_slot" in _events(m, "free", free_index=[*row[:8], row[1]])
    assert m.available_size() == 56
    m.free_group_begin()
    assert "group.repeat_slot" not in _events(m, "free", free_index=row[8:10])
    assert "group.repeat_slot" in _events(m, "free", free_index=[row[9], *row[10:]])
    m.free_group_end()
    assert m.available_size() == 64


def test_power_of_two_sizes_alloc_4_extend_4() -> None:
    """Sizes around 2**k for 2**k >= 256 only; one request is ``single``, a batch ``batch``."""
    assert [n for n in range(200, 600) if coverage.near_power_of_two(n)] == [
        255,
        256,
        257,
        511,
        512,
        513,
    ]
    assert near_powers_of_two(300, 100) == [257, 256, 255, 129, 128, 127]
    m = AllocatorModel(1024, 1, paged=False)
    assert "size.pow2_single" in _events(m, "alloc", need_size=257)
    m = AllocatorModel(2048, 4, paged=True)
    assert "size.pow2_single" in _events(
        m, "alloc_extend", prefix_lens=[0], seq_lens=[256], last_loc=[-1], extend_num_tokens=256
    )
    found = _events(
        m,
        "alloc_extend",
        prefix_lens=[0, 0],
        seq_lens=[200, 55],
        last_loc=[-1, -1],
        extend_num_tokens=255,
    )
    assert "size.pow2_batch" in found and "size.pow2_single" not in found


def test_unaligned_segment_page_counts_seg_2() -> None:
    """A segment starting mid-page, touching 1, 2 and 3 pages."""
    m = AllocatorModel(128, 4, paged=True)
    row = m.alloc(64)
    assert row is not None
    assert "seg.unaligned_1" in _events(m, "free_segments", segments=[(row[2:4], 2)])
    assert "seg.unaligned_2" in _events(m, "free_segments", segments=[(row[6:9], 6)])
    found = _events(m, "free_segments", segments=[(row[12:16], 12), (row[18:27], 18)])
    assert "seg.unaligned_3" in found and "seg.unaligned_2" not in found


def test_single_segment_whose_stride_misses_its_last_page_seg_2() -> None:
    """``free_segment`` from mid-page to a later page's offset below its start's (positions
    2..5 at ps=4: a stride from its first slot misses page 1), outside a group only."""
    m = AllocatorModel(128, 4, paged=True)
    row = m.alloc(64)
    assert row is not None
    assert "seg.single_wrap" in _events(m, "free_segment", free_index=row[2:6], start_pos=2)
    assert "seg.single_wrap" not in _events(m, "free_segment", free_index=row[10:16],
                                            start_pos=10)  # ends at offset 3 >= 2
    m.free_group_begin()
    assert "seg.single_wrap" not in _events(m, "free_segment", free_index=row[18:22],
                                            start_pos=18)


def _target(b: Broken) -> Target:
    return Target(b.factory, capabilities_of(b.factory), b.path)


@pytest.mark.parametrize(
    ("event", "broken"), REACH_BROKEN, ids=[b.cls.__name__ for _, b in REACH_BROKEN]
)
def test_default_budget_catches_a_bug_only_a_reach_shape_exposes(
    event: str, broken: Broken
) -> None:
    """One configuration at the default examples and steps finds the bug, under one clause
    (shrinking off: finding it is what the default budget must do). Without the repeated
    slots and the long prompts, ``FreeDedupAdjacent`` and ``AllocWrapsAt256`` pass 1000
    examples."""
    assert event in coverage.required(capabilities_of(broken.factory), broken.page_size, False)
    config = Config(broken.page_size, broken.need_sort, "cpu", broken.order)
    result = run_config(
        _target(broken),
        config,
        max_examples=DEFAULT_EXAMPLES,
        step_count=DEFAULT_STEPS,
        shrink_seconds=0,
    )
    assert result.error is None, result.error
    assert result.failure is not None, f"{broken.cls.__name__} passed the default budget"
    assert result.failure.clause == broken.clauses[0], (
        symptom_note(broken) + result.failure.report())


@pytest.mark.parametrize(
    ("target", "page_size", "events"),
    [
        ("kvpool.oracle.families.single.targets:kvpool_token", 1, TOKEN_REACH_EVENTS),
        ("kvpool.oracle.families.single.targets:kvpool_paged", 4, REACH_EVENTS),
    ],
    ids=["token-ps1", "paged-ps4"],
)
def test_kvpool_passes_the_gate_with_the_reach_events(
    target: str, page_size: int, events: tuple[str, ...], tmp_path: Path
) -> None:
    """``python -m kvpool.oracle TARGET --page-sizes PS --require-coverage`` (default examples,
    both need_sort values) exits 0 on kvpool's allocators: the gate requires the reach events
    there and every one was reached."""
    from kvpool.oracle.entry.cli import run_main

    report = tmp_path / "run.json"
    argv = [target, "--page-sizes", str(page_size), "--require-coverage", "--json", str(report)]
    assert run_main([*argv, "--trace-dir", str(tmp_path)]) == 0
    data = json.loads(report.read_text())
    assert data["coverage_missing"][target] == []
    for name in events:
        assert sum(row["coverage"].get(name, 0) for row in data["configurations"]), name


def _size_classes(page_sizes: tuple[int, ...]) -> set[str]:
    return {"1" if ps == 1 else "small" if ps < 16 else ">=16" for ps in page_sizes}


def test_every_family_runs_every_page_size_class_by_default() -> None:
    """Page size 1, a small one and one >= 16: kvpool's single-pool and hybrid targets, SGLang's
    hybrid one, and an undeclared hybrid factory (its defaults); a pure sliding-window target
    runs page size 1 only (SWA-21: SGLang's class asserts it)."""
    from kvpool.oracle.families.hybrid.machine import FAMILY
    from kvpool.oracle.families.hybrid.targets import HYBRID_TARGETS

    every = {"1", "small", ">=16"}
    assert _size_classes(capabilities_of(kvpool_paged).page_sizes) == every
    for factory in HYBRID_TARGETS.values():
        caps = FAMILY.target(factory).caps
        assert _size_classes(caps.page_sizes) == ({"1"} if caps.pure_swa else every), factory
    undeclared = FAMILY.target(lambda **kwargs: None).caps
    assert _size_classes(undeclared.page_sizes) == every
    assert undeclared.source_of("page_sizes") == "default"


def test_slot_forms_cycle_only_through_the_declared_ones() -> None:
    """``choose_form``: int64, then each declared form (and both together), by call count; a
    target declaring none (an undeclared one's default) and a call without slot tensors get
    none."""
    from kvpool.oracle.engine.callforms import choose_form

    def forms(accepted: tuple[str, ...], args: dict[str, object]) -> list[object]:
        out = []
        for n in range(4):
            a = dict(args)
            choose_form(a, accepted, n)
            out.append(a.get("form"))
        return out

    assert forms(("int32", "strided"), {"free_index": [4]}) == [
        None, "int32", "strided", "int32+strided",
    ]  # fmt: skip
    assert forms(("strided",), {"last_loc": [-1]}) == [None, "strided", None, "strided"]
    assert forms((), {"free_index": [4]}) == [None] * 4
    assert forms(("int32",), {"need_size": 4}) == [None] * 4
    assert capabilities_of(lambda **kwargs: None).slot_forms == ()


@pytest.mark.parametrize("form", [None, "int32", "strided", "int32+strided"])
def test_a_slot_tensor_form_and_its_repro_source_agree(form: str | None) -> None:
    """The tensor a target gets and the repro's expression for it: same values, dtype and
    strides (a strided view of every other element)."""
    import torch
    from kvpool.oracle.engine.callforms import tensor, tensor_source

    x = tensor([5, 6, 9], "cpu", form)
    namespace = {"t": lambda v: torch.tensor(v, dtype=torch.int64), "torch": torch}
    y = eval(tensor_source([5, 6, 9], form), namespace)
    assert x.tolist() == y.tolist() == [5, 6, 9]
    assert x.dtype == y.dtype == (torch.int32 if form and "int32" in form else torch.int64)
    assert x.stride() == y.stride() == ((2,) if form and "strided" in form else (1,))


def test_result_dtypes_are_sglangs() -> None:
    """Allocations hand out int64; a translation returns its input's dtype (LIFE-3)."""
    import torch
    from kvpool.oracle.engine.callforms import result_dtype_error

    as32 = torch.tensor([4], dtype=torch.int32)
    as64 = torch.tensor([4])
    translate = "translate_kv_indices_for_transfer"
    assert result_dtype_error("alloc", {"need_size": 1}, as64) is None
    assert result_dtype_error("alloc_decode", {}, as32) == (
        "DECODE-5",
        "alloc_decode returned a torch.int32 tensor; SGLang returns torch.int64",
    )
    assert result_dtype_error(translate, {"form": "int32+strided"}, as32) is None
    error = result_dtype_error(translate, {"form": "int32"}, as64)
    assert error is not None and error[0] == "LIFE-3"
    assert result_dtype_error(translate, {}, as64) is None
    assert result_dtype_error("free", {}, None) is None


def test_hybrid_run_names_a_slot_twice_in_one_free_at_page_size_4() -> None:
    """The hybrid family's ``free.repeat_slot`` (SWA-13): required at ``ps > 1`` only (at
    ``ps = 1`` a slot named twice is a double free, SWA-11), reached and passed by kvpool's
    hybrid allocator."""
    from kvpool.oracle.families.hybrid.coverage import EVENTS
    from kvpool.oracle.families.hybrid.runner import hybrid_target
    from kvpool.oracle.families.hybrid.targets import FULL

    needs = EVENTS["free.repeat_slot"].needs
    assert needs(FULL, 4, False) and not needs(FULL, 1, False)
    result = run_config(hybrid_target("kvpool-swa"), Config(4, False), max_examples=30)
    assert result.ok, result.failure.report() if result.failure else result.error
    assert result.coverage["free.repeat_slot"] > 0


def test_hybrid_default_budget_catches_a_page_freed_twice_by_one_free() -> None:
    """``HybridFreeDedupAdjacent`` releases a repeated slot's SWA page twice: caught within the
    hybrid family's default examples (60), under SWA-13 (shrinking off, as above)."""
    from broken_reach import HYBRID_REACH_BROKEN
    from kvpool.oracle.families.hybrid.runner import run_hybrid

    (broken,) = HYBRID_REACH_BROKEN
    failure = run_hybrid(broken.factory(), max_examples=60, shrink_seconds=0).failure
    assert failure is not None, f"{broken.cls.__name__} passed the default budget"
    assert failure.clause == broken.clauses[0], failure.report()
