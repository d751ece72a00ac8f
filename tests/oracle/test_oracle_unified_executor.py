"""The unified executor on kvpool's own unified pools (no SGLang): a factory that cannot build
the allocator, a buffer the spec rejects, and a model whose invariants break are the harness's
errors, not a target's divergence; create is the trace's first step and replays, a target built
again tracks its own page copies, only the declared compaction modes are probed, unplantable
probes are counted; a census blind to a probe (UNI-13 at create) or reporting a healthy state
(UNI-13 after a call), an eager row off the spec's page with or without a page copy of the call
(UNI-6 / UNI-4, either side), and a tri-pool prealloc refused within the float chain's room
(UNI-14) fail with their repro's assertions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from broken_unified_kvpool import BrokenKvpool, GroupDropsLastFree, LostMove, TransferPastTop
from broken_unified_tri_kvpool import BrokenTriKvpool
from kvpool.impl.unified_swa import UnifiedSWAAllocator
from kvpool.impl.unified_tri import UnifiedMambaSWAAllocator
from kvpool.oracle.engine.families import family
from kvpool.oracle.engine.report import OracleError, OracleFailure
from kvpool.oracle.engine.target import Config
from kvpool.oracle.families.unified.executor import UnifiedExecutor
from kvpool.oracle.families.unified.kvpool_target import kvpool_unified, kvpool_unified_tri
from kvpool.oracle.families.unified.probes import IMPORT as PLANT_IMPORT

CAPS = getattr(kvpool_unified, "kvpool_unified_capabilities")  # noqa: B009
UNIFIED = family("unified")


def _executor(factory: Any) -> UnifiedExecutor:
    return UnifiedExecutor(UNIFIED.target(factory, CAPS), Config(4, False))


def _failing(**kwargs: Any) -> Any:
    raise RuntimeError("no buffer here")


def test_a_factory_that_fails_is_an_oracle_error() -> None:
    with pytest.raises(OracleError, match="the factory failed: RuntimeError: no buffer here"):
        _executor(_failing).create(1 << 16, False)


def test_a_buffer_the_spec_rejects_is_an_oracle_error() -> None:
    with pytest.raises(OracleError, match=r"create\(-1\) is invalid under the spec"):
        _executor(lambda **kw: kvpool_unified(**{**kw, "total_bytes": 1 << 16})).create(-1, False)


def test_a_model_whose_invariants_break_is_an_oracle_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ex = _executor(kvpool_unified)
    ex.create(1 << 16, False)

    def broken() -> None:
        raise AssertionError("UNI-1: planted")

    assert ex.model is not None
    monkeypatch.setattr(ex.model, "check_invariants", broken)
    with pytest.raises(OracleError, match="the spec's invariants broke: UNI-1: planted"):
        ex.call("alloc", need_size=4)


def test_a_call_the_spec_rejects_is_an_oracle_error() -> None:
    ex = _executor(kvpool_unified)
    ex.create(1 << 16, False)
    with pytest.raises(OracleError, match="is invalid under the spec"):
        ex.call("free", free_index=[5])  # never handed out: the scheduler model's mistake


# -- construction: the trace's first step, a replayed create, the declared modes, the probes ------
def _pool(cls: type) -> Any:
    return BrokenKvpool(cls, ("UNI-13",)).factory()


def test_create_is_the_traces_first_step_and_a_replayed_one_builds_afresh() -> None:
    ex = _executor(kvpool_unified)
    ex.create(1 << 16, False)
    assert [s.call for s in ex.trace.steps] == ["create"]
    assert ex.trace.steps[0].args == {"total_bytes": 1 << 16, "page_size": 4, "lazy": False}
    assert ex.events["probe.census"] == 1 and ex.events["cap.byte_accounting"] == 1
    again = _executor(kvpool_unified)
    again.create_from({"total_bytes": 1 << 16, "lazy": True})
    assert again.model is not None and again.model.lazy and again.target is not None


def test_a_target_built_again_tracks_its_own_page_copies() -> None:
    """A second ``create`` on one executor: the page copies of the new target's compaction
    explain its moves (UNI-6), as on a fresh executor."""
    ex = _executor(kvpool_unified)
    for _ in range(2):
        ex.create(1 << 16, False)
        a = ex.call("alloc", need_size=4)
        ex.call("alloc", need_size=4)
        ex.call("free", free_index=a)  # eager compaction moves the later page, on each side
        assert ex.model is not None and len(ex.model.full.moves) == 1
    assert ex.events["compaction.move"] == 4 and ex.events["probe.census"] == 2


def test_only_the_declared_compaction_modes_are_probed() -> None:
    def eager_only(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu",
                   need_sort: bool = False) -> Any:
        if lazy:
            raise RuntimeError("eager compaction only")
        return kvpool_unified(total_bytes=total_bytes, page_size=page_size, lazy=lazy,
                              device=device)

    ex = UnifiedExecutor(UNIFIED.target(eager_only, CAPS.replace(compaction=("eager",))),
                         Config(4, False))
    ex.create(1 << 16, False)
    assert ex.events["probe.census"] == 1 and ex.events["probe.unplanted"] == 0


class _NoPlant(UnifiedSWAAllocator):  # type: ignore[misc]
    """A pool the census probes cannot plant a fault in (no ``unified_plant`` hook)."""

    unified_plant = None


def test_probes_the_target_cannot_plant_are_counted() -> None:
    ex = _executor(_pool(_NoPlant))
    ex.create(1 << 16, False)
    # stale_v2p_full, stale_v2p_swa, frontier_cross, in both compaction modes
    assert ex.events["probe.unplanted"] == 6 and ex.events["probe.census"] == 1


class _CensusBlind(UnifiedSWAAllocator):  # type: ignore[misc]
    """A census that never reports anything (UNI-13)."""

    def verify_byte_accounting(self) -> list[str]:
        return []


def test_a_census_blind_to_a_probe_is_UNI_13_at_create_with_the_probe_as_repro() -> None:
    ex = _executor(_pool(_CensusBlind))
    with pytest.raises(OracleFailure) as err:
        ex.create(1 << 16, False)
    failure = err.value.failure
    assert failure.clause == "UNI-13" and failure.trace.failing_step == 0
    planted = "assert plant_fault(a, 'stale_binding:full')  # two live pages, one physical page"
    assert failure.detail == ("verify_byte_accounting() returned [] after the stale_v2p_full "
                              f"probe: a.alloc(8); {planted}")
    assert failure.trace.final_asserts == [
        PLANT_IMPORT, "a.alloc(8)", planted, "assert a.verify_byte_accounting()  # UNI-13"]


class _ReportsAfterAlloc(UnifiedSWAAllocator):  # type: ignore[misc]
    """A census that reports a problem on a healthy state once an ``alloc`` ran."""

    def alloc(self, need_size: int) -> Any:
        self.allocated = True
        return super().alloc(need_size)

    def verify_byte_accounting(self) -> list[str]:
        found: list[str] = super().verify_byte_accounting()
        return found or (["planted"] if getattr(self, "allocated", False) else [])


def test_a_census_problem_on_a_healthy_state_is_UNI_13() -> None:
    ex = _executor(_pool(_ReportsAfterAlloc))
    ex.create(1 << 16, False)
    with pytest.raises(OracleFailure) as err:
        ex.call("alloc", need_size=4)
    failure = err.value.failure
    assert failure.clause == "UNI-13"
    assert failure.detail == ("after alloc: verify_byte_accounting() reports ['planted'] on a "
                              "state the spec holds healthy")
    assert failure.trace.final_asserts == ["assert not a.verify_byte_accounting()  # UNI-13"]
    assert ex.events["cap.byte_accounting"] == 2  # create's and the failing call's


# -- eager placement: a row off the spec's page, moved or not (UNI-6 / UNI-4) ---------------------
class _SwapsRows(UnifiedSWAAllocator):  # type: ignore[misc]
    """Once ``swap`` is set, the first two live pages' rows trade places on one side (with
    ``last`` set: the first and the last live page's)."""

    swap = ""
    last = False

    def translate_kv_indices_for_transfer(self, kv_indices: torch.Tensor) -> torch.Tensor:
        out = super().translate_kv_indices_for_transfer(kv_indices)
        return self._swapped(out) if self.swap == "full" else out

    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor, **kw: Any) -> Any:
        out = super().translate_loc_from_full_to_swa(kv_indices, **kw)
        return self._swapped(out) if self.swap == "swa" else out

    def _swapped(self, rows: torch.Tensor) -> torch.Tensor:
        if len(rows) < 8:
            return rows
        rows = rows.clone()
        other = slice(len(rows) - 4, len(rows)) if self.last else slice(4, 8)
        rows[:4], rows[other] = rows[other].clone(), rows[:4].clone()
        return rows


def _swapped_failure(side: str, on_free: bool) -> Any:
    ex = _executor(_pool(_SwapsRows))
    ex.create(1 << 16, False)
    a = ex.call("alloc", need_size=8)
    ex.call("alloc", need_size=8)
    ex.target.swap = side
    with pytest.raises(OracleFailure) as err:
        if on_free:
            ex.call("free", free_index=a)  # moves the later request's pages down
        else:
            ex.call("alloc", need_size=4)
    return err.value.failure


def test_a_row_bound_elsewhere_with_no_page_copy_is_UNI_4() -> None:
    failure = _swapped_failure("full", on_free=False)
    assert failure.clause == "UNI-4"
    assert failure.detail.endswith("(token 4 on row 2044, the spec's 2040; no page copy "
                                   "touched its page)")
    assert failure.trace.final_asserts == [
        "assert a.translate_kv_indices_for_transfer(t([4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, "
        "15, 16, 17, 18, 19, 20, 21, 22, 23])).tolist() == [2040, 2041, 2042, 2043, 2044, "
        "2045, 2046, 2047, 2032, 2033, 2034, 2035, 2036, 2037, 2038, 2039, 2028, 2029, 2030, "
        "2031]  # [UNI-4]"]


def test_an_swa_row_bound_elsewhere_is_UNI_4_even_where_the_full_rows_agree() -> None:
    failure = _swapped_failure("swa", on_free=False)
    assert failure.clause == "UNI-4"
    assert failure.detail.startswith("after alloc: SWA rows of the live tokens is [8, 9, 10, "
                                     "11, 4, 5, 6, 7, 12,")


def test_a_row_off_the_spec_on_a_page_a_copy_touched_is_UNI_6() -> None:
    failure = _swapped_failure("full", on_free=True)
    assert failure.clause == "UNI-6"
    assert failure.detail.endswith("(token 12 on row 2044, the spec's 2040; a page copy of "
                                   "this call touched its page)")
    assert failure.trace.final_asserts == [
        "assert a.translate_kv_indices_for_transfer(t([12, 13, 14, 15, 16, 17, 18, 19]))"
        ".tolist() == [2040, 2041, 2042, 2043, 2044, 2045, 2046, 2047]  # [UNI-6]"]


def test_a_row_off_the_spec_is_UNI_4_where_the_calls_copy_touched_other_pages() -> None:
    """Freeing virtual page 5 moves virtual page 16 into its place; virtual pages 1 and 2,
    whose rows trade places, were touched by no copy."""
    ex = _executor(_pool(_SwapsRows))
    ex.create(1 << 16, False)
    rows = [ex.call("alloc", need_size=4) for _ in range(16)]
    ex.target.swap = "full"
    with pytest.raises(OracleFailure) as err:
        ex.call("free", free_index=rows[4])
    assert ex.model is not None and ex.model.full.moves[-1] == (496, 507)
    failure = err.value.failure
    assert failure.clause == "UNI-4"
    assert failure.detail.endswith("(token 4 on row 2040, the spec's 2044; no page copy "
                                   "touched its page)")


def test_a_row_claiming_a_page_the_calls_copy_touched_is_UNI_6() -> None:
    """Virtual page 1 (not moved) reads as the page virtual page 16 was just copied to."""
    ex = _executor(_pool(_SwapsRows))
    ex.create(1 << 16, False)
    rows = [ex.call("alloc", need_size=4) for _ in range(16)]
    ex.target.swap, ex.target.last = "full", True
    with pytest.raises(OracleFailure) as err:
        ex.call("free", free_index=rows[4])
    failure = err.value.failure
    assert failure.clause == "UNI-6"
    assert failure.detail.endswith("(token 4 on row 2028, the spec's 2044; a page copy of "
                                   "this call touched its page)")


def test_a_page_copy_of_an_earlier_call_does_not_count_as_this_calls() -> None:
    """The free of the first request moved the second one's page (510 to 511); a later
    allocation whose rows trade places with no copy of its own is UNI-4."""
    ex = _executor(_pool(_SwapsRows))
    ex.create(1 << 16, False)
    first = ex.call("alloc", need_size=4)
    ex.call("alloc", need_size=4)
    ex.call("free", free_index=first)
    assert ex.model is not None and ex.model.full.moves == [(510, 511)]
    ex.call("alloc", need_size=4)
    ex.target.swap = "full"
    with pytest.raises(OracleFailure) as err:
        ex.call("alloc", need_size=4)
    assert err.value.failure.clause == "UNI-4"
    assert err.value.failure.detail.endswith("(token 8 on row 2040, the spec's 2044; no page "
                                             "copy touched its page)")


class _CopiesOntoNewPage(UnifiedSWAAllocator):  # type: ignore[misc]
    """Once ``shift`` is set, ``alloc`` copies page 500 onto page 510 (the one the new
    request gets) and the newest request's full rows read one page lower."""

    shift = False

    def alloc(self, need_size: int) -> Any:
        out = super().alloc(need_size)
        if self.shift:
            self.store.full_kv_pool.move_physical_pages(torch.tensor([510]), torch.tensor([500]))
        return out

    def translate_kv_indices_for_transfer(self, kv_indices: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = super().translate_kv_indices_for_transfer(kv_indices)
        if self.shift and len(out) >= 8:
            out = out.clone()
            out[-4:] -= 4
        return out


def test_a_new_row_off_the_page_a_copy_of_its_call_touched_is_UNI_6() -> None:
    """The token is new (no page before), its row's page untouched: the spec's page, which
    the call's copy wrote, makes it a move that went wrong."""
    ex = _executor(_pool(_CopiesOntoNewPage))
    ex.create(1 << 16, False)
    ex.call("alloc", need_size=4)
    ex.target.shift = True
    with pytest.raises(OracleFailure) as err:
        ex.call("alloc", need_size=4)
    assert err.value.failure.clause == "UNI-6"
    assert err.value.failure.detail.endswith("(token 8 on row 2036, the spec's 2040; a page "
                                             "copy of this call touched its page)")


# -- the tri-pool's float chain (UNI-14) -------------------------------------------------------
class _RefusesPrealloc(UnifiedMambaSWAAllocator):  # type: ignore[misc]
    """Refuses every ``alloc_extend_swa_tail`` once ``refuse`` is set."""

    refuse = False

    def alloc_extend_swa_tail(self, *args: Any, **kwargs: Any) -> Any:
        return None if self.refuse else super().alloc_extend_swa_tail(*args, **kwargs)


def _refused_prealloc(ps: int, prefix: int, seq: int, tail: int,
                      prefix_tail: int | None = None) -> Any:
    """A tri-pool executor's prealloc of ``seq`` tokens (the first ``prefix`` already allocated,
    by a prealloc whose last ``prefix_tail`` (default: all) are on the SWA side; the last
    ``tail`` on the SWA side) that the target refuses: its failure, else its result."""
    tri = getattr(kvpool_unified_tri, "kvpool_unified_capabilities")  # noqa: B009
    refuses = BrokenTriKvpool(_RefusesPrealloc, ("UNI-14",)).factory()
    ex = UnifiedExecutor(UNIFIED.target(refuses, tri), Config(ps, False))
    ex.create(1 << 16, False)
    last = [-1]
    if prefix:
        first = ex.call("alloc_extend_swa_tail", prefix_lens=[0], seq_lens=[prefix],
                        last_loc=[-1], extend_num_tokens=prefix,
                        swa_tail_len=prefix if prefix_tail is None else prefix_tail)
        last = [first[-1]]
    ex.target.refuse = True
    try:
        return ex.call("alloc_extend_swa_tail", prefix_lens=[prefix], seq_lens=[seq],
                       last_loc=last, extend_num_tokens=seq - prefix, swa_tail_len=tail)
    except OracleFailure as err:
        return err.failure


@pytest.mark.parametrize("ps,prefix,seq,tail,full,swa", [
    (4, 0, 6, 2, 2, 1), (4, 0, 6, 0, 2, 0), (4, 0, 6, 6, 2, 2), (4, 4, 13, 3, 3, 2),
    (1, 0, 5, 2, 5, 2), (4, 0, 836, 0, 209, 0)])
def test_a_prealloc_refused_within_the_float_chains_room_is_UNI_14(
        ps: int, prefix: int, seq: int, tail: int, full: int, swa: int) -> None:
    """The pages it needs: from the prefix's last page to the sequence's, on the SWA side from
    the tail's first page (not before the prefix's end); every free virtual page id at most."""
    failure = _refused_prealloc(ps, prefix, seq, tail)
    assert failure.clause == "UNI-14"
    assert failure.detail == (f"alloc_extend_swa_tail was refused within the float chain's "
                              f"room: {full} full and {swa} SWA pages fit (the SWA float holds "
                              f"0 holes)")
    index = 2 if prefix else 1
    assert failure.trace.final_asserts == [f"assert r{index} is not None  # [UNI-14] within "
                                           "available_size()"]


def test_a_prealloc_after_a_prefix_needs_only_the_pages_past_the_prefix() -> None:
    """A 100-page prefix (no SWA pages) leaves 109 free virtual page ids and room for 110 full
    pages; its continuation to 209 pages needs 109 more: within both, so a refusal is UNI-14."""
    failure = _refused_prealloc(4, 400, 836, 0, prefix_tail=0)
    assert failure.clause == "UNI-14"
    assert "109 full and 0 SWA pages fit" in failure.detail


def test_a_prealloc_past_the_free_virtual_ids_may_be_refused() -> None:
    """210 pages: the chain would hold them, but the pool has 209 virtual page ids free."""
    assert _refused_prealloc(4, 0, 840, 0) is None


# -- what each call counts and records ----------------------------------------------------------
def test_each_call_counts_its_checks_and_events() -> None:
    ex = _executor(kvpool_unified)
    ex.create(1 << 16, True)
    ex.note("custom")
    ex.note("custom")
    assert ex.events["custom"] == 2
    a = ex.call("alloc", need_size=8)
    assert ex.trace.steps[-1].available_after == 1012  # each step records the view after it
    ex.call("alloc", need_size=4)
    assert ex.events["placement"] == 2 and ex.events["cap.byte_accounting"] == 3
    assert ex.events["lazy.holes"] == 0
    ex.call("free_swa", free_index=a[4:])  # a hole on the SWA side only
    assert ex.model is not None and ex.model.swa.holes and not ex.model.full.holes
    assert ex.events["lazy.holes"] == 1 and ex.events["placement"] == 3
    # the slot tensors go in the forms the target declares (int32, strided), call by call
    assert ex.events["input.int32"] == 1 and ex.events["input.strided"] == 1


def test_a_tri_pool_counts_its_float_chain_checks() -> None:
    tri = getattr(kvpool_unified_tri, "kvpool_unified_capabilities")  # noqa: B009
    ex = UnifiedExecutor(UNIFIED.target(kvpool_unified_tri, tri), Config(4, False))
    ex.create(1 << 16, False)
    ex.call("alloc", need_size=4)
    assert ex.events["cap.float_chain"] == 2


def test_a_rejected_call_records_the_available_size_before_it() -> None:
    ex = _executor(kvpool_unified)
    ex.create(1 << 16, False)
    ex.call("alloc", need_size=4)
    assert ex.call_bad("free", free_index=[999]) == "UNI-11"
    assert ex.trace.steps[-1].available_after == 1016  # available_size(), not a side's view
    assert ex.model is not None and ex.model.full_available_size() == 396


class _ClearKeeps(UnifiedSWAAllocator):  # type: ignore[misc]
    """Once ``keep`` is set, ``clear()`` keeps every page (UNI-12)."""

    keep = False

    def clear(self) -> None:
        if not self.keep:
            super().clear()


def test_a_divergence_right_after_clear_is_UNI_12() -> None:
    ex = _executor(_pool(_ClearKeeps))
    ex.create(1 << 16, False)
    ex.call("alloc", need_size=4)
    ex.target.keep = True
    with pytest.raises(OracleFailure) as err:
        ex.call("clear")
    failure = err.value.failure
    assert failure.clause == "UNI-12"
    assert failure.detail == "[UNI-7] after clear: available_size() is 1016, the spec says 1020"
    assert failure.trace.final_asserts == ["assert a.available_size() == 1020  # [UNI-12]"]


def test_a_long_field_is_shortened_to_160_characters() -> None:
    from kvpool.oracle.families.unified.executor import _short

    assert _short(list(range(10))) == repr(list(range(10)))
    assert _short("x" * 158) == repr("x" * 158)  # 160 with its quotes
    assert _short("x" * 159) == "'" + "x" * 156 + "..."


# -- results ----------------------------------------------------------------------------------
class _Reversed(UnifiedSWAAllocator):  # type: ignore[misc]
    """``alloc`` returns its slots in reverse order."""

    def alloc(self, need_size: int) -> Any:
        out = super().alloc(need_size)
        return None if out is None else out.flip(0)


@pytest.mark.parametrize("lazy", [False, True])
def test_a_result_out_of_order_is_UNI_8_in_both_compaction_modes(lazy: bool) -> None:
    ex = _executor(_pool(_Reversed))
    ex.create(1 << 16, lazy)
    with pytest.raises(OracleFailure) as err:
        ex.call("alloc", need_size=4)
    failure = err.value.failure
    assert failure.clause == "UNI-8"
    assert failure.detail == "alloc returned [7, 6, 5, 4], the spec says [4, 5, 6, 7]"


def test_a_call_without_a_result_clause_that_returns_one_is_UNI_8() -> None:
    class FreeReturns(UnifiedSWAAllocator):  # type: ignore[misc]
        def free(self, free_index: torch.Tensor) -> Any:
            super().free(free_index)
            return 0

    ex = _executor(_pool(FreeReturns))
    ex.create(1 << 16, False)
    row = ex.call("alloc", need_size=4)
    with pytest.raises(OracleFailure) as err:
        ex.call("free", free_index=row)
    assert err.value.failure.clause == "UNI-8"
    assert err.value.failure.detail == "free returned 0, the spec says None"


def test_an_exact_pool_refusing_what_the_spec_grants_is_UNI_8() -> None:
    """Capacity is exact here: no refusal is a bound's to accept."""

    class Refuses(UnifiedSWAAllocator):  # type: ignore[misc]
        def alloc(self, need_size: int) -> Any:
            return None

    ex = _executor(_pool(Refuses))
    ex.create(1 << 16, False)
    with pytest.raises(OracleFailure) as err:
        ex.call("alloc", need_size=4)
    assert err.value.failure.clause == "UNI-8"
    assert err.value.failure.detail == "alloc returned None, the spec says [4, 5, 6, 7]"
    assert ex.events["bound.refused"] == 0


# -- hints ----------------------------------------------------------------------------------------
class _DecodeReversed(UnifiedSWAAllocator):  # type: ignore[misc]
    """``alloc_decode`` returns its rows' slots in reverse order (UNI-8)."""

    def alloc_decode(self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                     last_loc: torch.Tensor) -> Any:
        out = super().alloc_decode(seq_lens, seq_lens_cpu, last_loc)
        return None if out is None else out.flip(0)


@pytest.mark.parametrize("ps", [1, 4])
def test_a_decode_that_diverges_at_page_size_1_hints_at_decode_ps1(ps: int) -> None:
    ex = UnifiedExecutor(UNIFIED.target(_pool(_DecodeReversed), CAPS), Config(ps, False))
    ex.create(1 << 16, False)
    a, b = ex.call("alloc", need_size=ps), ex.call("alloc", need_size=ps)
    with pytest.raises(OracleFailure) as err:
        ex.call("alloc_decode", seq_lens=[ps + 1, ps + 1], last_loc=[a[-1], b[-1]])
    failure = err.value.failure
    assert failure.clause == "UNI-8"
    decode_hint = "if alloc_decode is not meant for page size 1: --declare decode_ps1=false"
    assert (failure.hint == decode_hint) == (ps == 1)


def test_a_state_that_differs_at_create_asserts_its_field_and_gets_no_decode_hint() -> None:
    class OneShort(UnifiedSWAAllocator):  # type: ignore[misc]
        def available_size(self) -> int:
            return int(super().available_size()) - 1

    with pytest.raises(OracleFailure) as err:
        _executor(_pool(OneShort)).create(1 << 16, False)
    failure = err.value.failure
    assert failure.clause == "UNI-7" and failure.trace.failing_step == 0
    assert failure.hint is None or "decode_ps1" not in failure.hint
    # the census field alone (no census probe lines)
    assert failure.trace.final_asserts == ["assert a.available_size() == 1020  # [UNI-7]"]


# -- what a failure's repro asserts -----------------------------------------------------------
def _failure_of(factory: Any, lazy: bool, calls: Any) -> Any:
    ex = _executor(factory)
    ex.create(1 << 16, lazy)
    with pytest.raises(OracleFailure) as err:
        calls(ex)
    return err.value.failure


def test_a_page_moved_without_a_copy_has_a_repro_that_watches_the_copies() -> None:
    """UNI-6 seen after a flush or a free: the repro sets a MoveLog on the side's KV pool just
    before the failing call and asserts after it that the page moved along its copies; it
    fails on the broken pool and passes on kvpool's correct one."""

    def then(last: str) -> Any:
        def calls(ex: UnifiedExecutor) -> None:
            a = ex.call("alloc", need_size=4)
            ex.call("alloc", need_size=4)
            ex.call("free", free_index=a)
            if last:
                ex.call(last)
        return calls

    lost = BrokenKvpool(LostMove, ("UNI-6",)).factory()
    flushed = _failure_of(lost, True, then("flush_opportunistic"))
    assert flushed.clause == "UNI-6"
    assert flushed.detail == ("after flush_opportunistic: full virtual page 2 went from page "
                              "510 to 511 without a copy")
    assert flushed.trace.failing_setup[-1].startswith(
        "moves = MoveLog(a.get_kvcache().full_kv_pool)")
    assert flushed.trace.final_asserts == [
        "now = a.translate_kv_indices_for_transfer(t([8])).tolist()[0] // 4",
        "assert not moves.unexplained({2: 510}, {2: now})  # [UNI-6]"]
    freed = _failure_of(lost, False, then(""))
    assert freed.clause == "UNI-6" and freed.trace.final_asserts[-1].startswith(
        "assert not moves.unexplained(")
    for failure in (flushed, freed):
        source = failure.pytest_source()
        assert source.index("moves = MoveLog(") < source.index("assert not moves.")
        check = failure.repro_check()
        assert check.status == "confirmed", check.line


def test_a_translation_call_that_returns_other_rows_asserts_them() -> None:
    def calls(ex: UnifiedExecutor) -> None:
        ex.call("alloc", need_size=4)
        ex.call("alloc", need_size=4)
        ex.target.swap = "full"
        ex.call("translate_kv_indices_for_transfer", kv_indices=[4, 5, 6, 7, 8, 9, 10, 11])

    failure = _failure_of(_pool(_SwapsRows), False, calls)
    assert failure.clause == "UNI-11"
    assert failure.trace.final_asserts == [
        "assert r3 is not None and r3.tolist() == [2044, 2045, 2046, 2047, 2040, 2041, 2042, "
        "2043]"]


def _group_then_end(ex: UnifiedExecutor) -> None:
    a, b = ex.call("alloc", need_size=4), ex.call("alloc", need_size=4)
    ex.call("alloc", need_size=4)
    ex.call("free_group_begin")
    ex.call("free", free_index=a)
    ex.call("free", free_index=b)
    ex.call("free_group_end")


class _FreesNeighbour(UnifiedSWAAllocator):  # type: ignore[misc]
    """A ``free`` that also frees the row set in ``extra`` (once)."""

    extra: torch.Tensor | None = None

    def free(self, free_index: torch.Tensor) -> None:
        super().free(free_index)
        extra, self.extra = self.extra, None
        if extra is not None:
            super().free(extra)


def test_bindings_kept_or_lost_at_a_free_are_UNI_10_with_the_sides_bindings_asserted() -> None:
    kept = _failure_of(BrokenKvpool(GroupDropsLastFree, ("UNI-10",)).factory(), True,
                       _group_then_end)
    assert kept.clause == "UNI-10"
    assert kept.detail == ("after free_group_end: the full side still binds virtual pages [2] "
                           "the spec released")
    assert kept.trace.final_asserts == [
        "from kvpool.oracle.families.unified.peer_state import state_of",
        "assert sorted(state_of(a).sides['full'].bindings) == [3]  # [UNI-10]"]

    def frees_two(ex: UnifiedExecutor) -> None:
        a, b = ex.call("alloc", need_size=4), ex.call("alloc", need_size=4)
        ex.target.extra = torch.tensor(b)
        ex.call("free", free_index=a)

    lost = _failure_of(_pool(_FreesNeighbour), True, frees_two)
    assert lost.clause == "UNI-10"
    assert lost.detail == "after free: the full side released virtual pages [2] the spec keeps"
    assert lost.trace.final_asserts[-1] == (
        "assert sorted(state_of(a).sides['full'].bindings) == [2]  # [UNI-10]")


def test_a_row_past_the_sub_pool_asserts_the_placement() -> None:
    def calls(ex: UnifiedExecutor) -> None:
        ex.call("alloc", need_size=4)

    failure = _failure_of(BrokenKvpool(TransferPastTop, ("UNI-1",)).factory(), False, calls)
    assert failure.clause == "UNI-1"
    [line] = failure.trace.final_asserts
    assert line.startswith("assert problems_of(Geometry(page_size=4, ") and line.endswith(
        "[1]) == []  # [UNI-1]")



def test_a_result_in_another_dtype_is_UNI_8_with_the_dtype_asserted() -> None:
    class Int32(UnifiedSWAAllocator):  # type: ignore[misc]
        def alloc(self, need_size: int) -> Any:
            out = super().alloc(need_size)
            return None if out is None else out.to(torch.int32)

    failure = _failure_of(_pool(Int32), False, lambda ex: ex.call("alloc", need_size=4))
    assert failure.clause == "UNI-8"
    assert failure.detail == "alloc returned a torch.int32 tensor; SGLang returns torch.int64"
    assert failure.trace.final_asserts == [
        "assert r1.dtype == torch.int64  # [UNI-8] SGLang's dtype"]


class _RefusesExtend(UnifiedMambaSWAAllocator):  # type: ignore[misc]
    """Refuses every ``alloc_extend`` once ``refuse`` is set."""

    refuse = False

    def alloc_extend(self, *args: Any, **kwargs: Any) -> Any:
        return None if self.refuse else super().alloc_extend(*args, **kwargs)


def test_a_tri_pool_refusal_it_did_not_promise_rolls_the_model_back() -> None:
    """A bound, not an exact capacity: the refusal is taken (counted, nothing expected), and
    the model hands out the same virtual ids next."""
    tri = getattr(kvpool_unified_tri, "kvpool_unified_capabilities")  # noqa: B009
    refuses = BrokenTriKvpool(_RefusesExtend, ("UNI-8",)).factory()
    ex = UnifiedExecutor(UNIFIED.target(refuses, tri), Config(4, False))
    ex.create(1 << 16, False)
    ex.target.refuse = True
    assert ex.call("alloc_extend", prefix_lens=[0], seq_lens=[4], last_loc=[-1],
                   extend_num_tokens=4) is None
    assert ex.events["bound.refused"] == 1 and ex.trace.steps[-1].expect is None
    ex.target.refuse = False
    assert ex.call("alloc", need_size=4) == [8, 9, 10, 11]


class _BreaksHoles(UnifiedSWAAllocator):  # type: ignore[misc]
    """Once ``breaks`` is set, ``alloc`` lists a live full page among the holes and returns
    its slots in reverse order."""

    breaks = False

    def alloc(self, need_size: int) -> Any:
        out = super().alloc(need_size)
        if self.breaks:
            self.full.holes = np.append(self.full.holes, self.full.v2p[1])
            out = out.flip(0)
        return out


@pytest.mark.parametrize("lazy", [False, True])
def test_a_broken_hole_bookkeeping_is_reported_before_the_result_it_causes(lazy: bool) -> None:
    ex = _executor(_pool(_BreaksHoles))
    ex.create(1 << 16, lazy)
    ex.call("alloc", need_size=4)
    ex.target.breaks = True
    with pytest.raises(OracleFailure) as err:
        ex.call("alloc", need_size=4)
    failure = err.value.failure
    assert failure.clause == "UNI-5"
    assert failure.detail == "after alloc: [full] holes on live pages: [511]"
    assert failure.trace.final_asserts[-1] == (
        "assert not hole_problems(state_of(a).sides['full'])  # UNI-5")


def test_a_lazy_pool_that_compacts_at_once_is_UNI_5_against_the_models_holes() -> None:
    """Its own bookkeeping is sound (an eager pool's); its span and holes are not the lazy
    model's."""

    def eager_always(**kwargs: Any) -> Any:
        return kvpool_unified(**{**kwargs, "lazy": False})

    def calls(ex: UnifiedExecutor) -> None:
        a = ex.call("alloc", need_size=4)
        ex.call("alloc", need_size=4)
        ex.call("free", free_index=a)

    failure = _failure_of(eager_always, True, calls)
    assert failure.clause == "UNI-5"
    assert failure.detail == ("after free: full sub-pool: span 1 page with 0 holes, the spec "
                              "says 2 with 1")
    assert failure.trace.final_asserts[-1] == (
        "assert span_and_holes(state_of(a).sides['full']) == (2, 1)  # UNI-5")


# -- the idle flush on the target's own placement (UNI-6) -------------------------------------
class _NearHolesFirst(UnifiedSWAAllocator):  # type: ignore[misc]
    """Lazy compaction that reuses the holes nearest each sub-pool's frontier first (SGLang
    drains the farthest): other pages, equally valid, for the same virtual ids."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for pool in (self.full, self.swa):
            pool.take = self._near_take(pool, pool.take)

    @staticmethod
    def _near_take(pool: Any, take: Any) -> Any:
        def near(num_pages: int) -> np.ndarray:
            holes = np.sort(pool.holes)
            if not pool.lazy or not 0 < num_pages < len(holes):
                return take(num_pages)  # type: ignore[no-any-return]
            chosen = holes[-num_pages:] if pool.grows_up else holes[:num_pages]
            pool.holes = holes[:-num_pages] if pool.grows_up else holes[num_pages:]
            pool.last_run = None
            return chosen  # type: ignore[no-any-return]
        return near


def test_the_idle_flush_is_judged_on_the_targets_own_placement() -> None:
    """Two full holes, one at the frontier; an allocation reuses the other one on the target
    (the model would reuse the far one): the target's flush then has a page to move where the
    model's own placement would only absorb its frontier hole. Judged from the target's
    placement, the flush is conformant."""
    ex = _executor(_pool(_NearHolesFirst))
    ex.create(1 << 16, True)
    row = ex.call("alloc", need_size=24)  # six pages; page 0 of the row sits at full's frontier
    ex.call("free", free_index=row[0:4] + row[12:16])  # holes: the frontier page and one more
    ex.call("alloc", need_size=4)  # the target reuses the frontier hole
    moved = ex.call("flush_opportunistic")
    assert moved == 2  # one page moved on each side
    assert ex.model is not None and ex.model.full.span_pages() == 6


def test_a_caller_growing_its_result_leaves_the_trace_as_expected() -> None:
    """The scheduler model grows a request's slot list in place: the step's recorded result
    (what a printed repro asserts) stays what the call returned."""
    ex = _executor(kvpool_unified)
    ex.create(1 << 16, False)
    out = ex.call("alloc_extend_swa_tail", prefix_lens=[0], seq_lens=[3], last_loc=[-1],
                  extend_num_tokens=3, swa_tail_len=3)
    assert out == ex.trace.steps[-1].expect and len(out) == 3
    out += [99, 100]
    assert ex.trace.steps[-1].expect == out[:3]
