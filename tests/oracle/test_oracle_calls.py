"""The call table (``kvpool.oracle.families.single.calls.CALLS``): its three forms of a call agree.

For every call: the spec invocation on the model, the target invocation on ``kvpool.impl`` and
the Python source printed into pytest repros (executed) give the same result and leave the same
free list; ``map_slots`` renames exactly the arguments that carry slots; every clause the table
names is defined in SPEC.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch
from kvpool.impl import PagedTokenToKVPoolAllocator
from kvpool.oracle.engine.call import map_slots
from kvpool.oracle.families.single.calls import CALLS, as_list, bind_args
from kvpool.oracle.families.single.treecache import TinyTreeCache
from kvpool.spec import AllocatorModel, ResizeConfig

ROOT = Path(__file__).resolve().parents[2]
PS = 4
SIZE = 16 * PS
# After ``alloc(4 * PS)`` the caller owns pages 1-4 (slots 4..19); the free group is closed.
EXAMPLES: dict[str, dict[str, Any]] = {
    "alloc": {"need_size": 2 * PS},
    "alloc_extend": {"prefix_lens": [2], "seq_lens": [7], "last_loc": [5], "extend_num_tokens": 5},
    "alloc_decode": {"seq_lens": [4], "last_loc": [18]},
    "free": {"free_index": [8, 9, 10, 11]},
    "free_full": {"free_index": [12, 13, 14, 15]},
    "free_page_ids": {"page_ids": [3, 1]},
    "free_segment": {"free_index": [9, 10, 11, 12, 13], "start_pos": 5},
    "free_segments": {"segments": [[[4, 5, 6], 0], [[7, 8], 3]]},
    "free_group_begin": {},
    "free_group_end": {},
    "merge_and_sort_free": {},
    "clear": {},
    "resize": {"max_total_num_tokens": 8 * PS},
    "translate_kv_indices_for_transfer": {"kv_indices": [4, 9]},
    "evict_to_free_tokens": {"entries": [[4, 5, 6, 7], [8, 9, 10, 11]], "num_tokens": 12 * PS},
    "check_decode_capacity": {"entries": [[4, 5, 6, 7]], "num_tokens": 12 * PS},
}
PERFORMED = sorted(set(CALLS) - {"create"})


def _fresh() -> tuple[AllocatorModel, PagedTokenToKVPoolAllocator]:
    model = AllocatorModel(SIZE, PS, paged=True, need_sort=False)
    impl = PagedTokenToKVPoolAllocator(SIZE, PS, torch.float16, "cpu", None, False, checked=True)
    assert model.alloc(4 * PS) == as_list(impl.alloc(4 * PS))
    return model, impl


def _with_caches(name: str, model: AllocatorModel, impl: Any) -> tuple[dict[str, Any], ...]:
    args = EXAMPLES[name]
    if CALLS[name].kind != "cache":
        return args, args
    return (
        {**args, "tree_cache": TinyTreeCache(model.free, args["entries"])},
        {**args, "tree_cache": TinyTreeCache.for_torch(impl, args["entries"])},
    )


def test_every_call_has_an_example_and_the_model_has_it() -> None:
    assert set(EXAMPLES) == set(PERFORMED)
    for name in PERFORMED:
        assert callable(getattr(AllocatorModel, name)), name
        assert callable(getattr(PagedTokenToKVPoolAllocator, name)), name


def _plain(value: Any) -> Any:
    return as_list(value) if isinstance(value, torch.Tensor) else value


@pytest.mark.parametrize("name", PERFORMED)
def test_spec_target_and_source_forms_agree(name: str) -> None:
    """Spec invocation, target invocation and the executed repro source (with its result
    asserts): same result, free list and size."""
    call = CALLS[name]
    model, impl = _fresh()
    spec_args, target_args = _with_caches(name, model, impl)
    expected = call.spec(model, spec_args)
    got, _ = call.target(impl, target_args, "cpu")
    assert _plain(got) == expected
    assert as_list(impl.get_all_free_pages()) == model.get_all_free_pages()
    assert impl.available_size() == model.available_size()

    _, printed = _fresh()
    namespace: dict[str, Any] = {
        "a": printed,
        "t": lambda values: torch.tensor(values, dtype=torch.int64),
        "DEVICE": "cpu",
        "TinyTreeCache": TinyTreeCache,
        "ResizeConfig": ResizeConfig,
    }
    exec("\n".join(call.source(EXAMPLES[name], "r")), namespace)
    assert _plain(namespace.get("r")) == _plain(got)
    assert as_list(printed.get_all_free_pages()) == model.get_all_free_pages()
    assert printed.available_size() == model.available_size()
    if call.checks is not None:  # a hook's recorded expect is the number of entries evicted
        evicted = call.kind == "cache" and call.result_clause is None
        recorded = spec_args["tree_cache"].num_evicted if evicted else expected
        exec("\n".join(call.checks(EXAMPLES[name], recorded, "r")), namespace)


@pytest.mark.parametrize("name", PERFORMED)
def test_map_slots_renames_exactly_the_slot_arguments(name: str) -> None:
    args = EXAMPLES[name]
    renamed = map_slots(args, CALLS[name].slot_args, lambda s: s + 1000)
    for key, value in args.items():
        if key in CALLS[name].slot_args:
            assert renamed[key] != value and str(value) != str(renamed[key]), key
        else:
            assert renamed[key] == value, key


def test_bind_reads_the_model_signature() -> None:
    assert bind_args("alloc_extend", ([0, 2], [3, 4], [-1, 5])) == {
        "prefix_lens": [0, 2],
        "seq_lens": [3, 4],
        "last_loc": [-1, 5],
        "extend_num_tokens": 5,
    }
    assert bind_args("free_segment", ([4, 5],), {"start_pos": 2}) == {
        "free_index": [4, 5],
        "start_pos": 2,
    }
    assert (
        bind_args("resize", (ResizeConfig(24),))
        == bind_args("resize", (24,))
        == {
            "max_total_num_tokens": 24,
        }
    )


def test_every_clause_of_the_table_is_defined_in_spec_md() -> None:
    defined = set(re.findall(r'<a id="([A-Z]+-\d+)"></a>', (ROOT / "SPEC.md").read_text()))
    clauses = {c.raise_clause for c in CALLS.values()} | {c.order_clause for c in CALLS.values()}
    clauses |= {c.result_clause for c in CALLS.values() if c.result_clause}
    assert clauses <= defined, sorted(clauses - defined)
