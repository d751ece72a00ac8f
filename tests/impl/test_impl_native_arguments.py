"""Every entry point of the compiled extension (``kvpool.impl._native``) checks its arguments.

Each function is called here with valid arguments (its documented result), with a page size
below 1 or outside int64 (ValueError naming ``ps``, nothing written), with each int64 buffer
replaced by one of another item type, strided, read-only or not a buffer at all (TypeError or
the exporter's ValueError, nothing written), and with each tensor replaced by one the loops do
not read or by a bare address (None: the caller's numpy form takes it, nothing written). A new
entry point fails :func:`test_every_entry_point_is_covered` until it is listed here.
``tests/fuzz/test_fuzz_native.py`` runs many more such calls, each in a child process.

The module skips where the extension is not built, and fails under
``KVPOOL_REQUIRE_NATIVE=1``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from kvpool.impl.native_ops import native_available

if not native_available():
    if os.environ.get("KVPOOL_REQUIRE_NATIVE") == "1":
        raise ImportError("kvpool.impl._native is not built (KVPOOL_REQUIRE_NATIVE=1)")
    pytest.skip("kvpool.impl._native is not built", allow_module_level=True)

from kvpool.impl import _native  # type: ignore[attr-defined]


def _t(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def _a(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _bits(*pages: int) -> np.ndarray:
    """An ownership bitmap of 32 pages with ``pages`` set."""
    bits = np.zeros(4, dtype=np.uint8)
    for page in pages:
        bits[page >> 3] |= 1 << (page & 7)
    return bits


# name -> (valid arguments, the page size's index or None, tensor indices, buffer indices)
Entry = tuple[Callable[[], list[Any]], int | None, tuple[int, ...], tuple[int, ...]]
ENTRIES: dict[str, Entry] = {
    "extend_count": (lambda: [_t([0, 3]), _t([5, 9]), 4], 2, (0, 1), ()),
    "extend_layout": (lambda: [_t([0, 3]), _t([5, 9]), _t([-1, 30]), _a([11, 12, 13, 14]), 4,
                               11], 4, (0, 1, 2), (3,)),
    "decode_count": (lambda: [_t([5, 9, 6]), 4], 1, (0,), ()),
    "decode_layout": (lambda: [_t([5, 9, 6]), _t([3, 30, 41]), _a([11, 12]), 4], 3, (0, 1),
                      (2,)),
    "page_ids": (lambda: [_t([0, 5, 17, -3]), 4, _a([0] * 4)], 1, (0,), (2,)),
    "segment_page_ids": (lambda: [torch.arange(64, 74), 0, 4, 1, _a([0] * 3)], 2, (0,), (4,)),
    "write_at": (lambda: [_a([0] * 8), 2, _t([7, 3, 9])], None, (2,), (0,)),
    "copy_into": (lambda: [_a([0] * 8), 2, _a([7, 3, 9])], None, (), (0, 2)),
    "distinct_runs": (lambda: [_a([5, 5, 3, 3, 9, 1])], None, (), (0,)),
    "merge_below": (lambda: [_a([1, 4, 8, 20]), _a([2, 9]), _a([0] * 6)], None, (), (0, 1, 2)),
    "sort_values": (lambda: [_a([5, 1, 4, 1, 9])], None, (), (0,)),
    "merge_front": (lambda: [_a([0, 7, 3, 0, 1, 2, 5, 9]), 4, 1, 2, None], None, (), (0,)),
    "ascends_across": (lambda: [_a([1, 3, 2]), 1], None, (), (0,)),
    "defer": (lambda: [_t([0, 5, 17]), 4], 1, (0,), ()),
    "release": (lambda: [4, _t([16, 17, 40]), True, _a([0] * 8), 8, True, 8, _bits(4, 10)], 0,
                (1,), (3,)),
    "slots_at": (lambda: [4, _a([3, 5, 7, 9]), 1, 2, _bits()], 0, (), (1,)),
    "extend_take": (lambda: [4, _a([0, 0, 0, 0, 11, 12, 13, 14, 15]), 4, 0, -1, None,
                             _t([0, 3]), _t([0, 3]), _t([5, 9]), _t([5, 9]), _t([-1, 30]), 11,
                             _bits(7)], 0, (6, 7, 8, 9, 10), (1,)),
    "decode_take": (lambda: [4, _a([0, 0, 11, 12, 13]), 2, 0, -1, None, _t([5, 9, 6]),
                             _t([5, 9, 6]), _t([3, 30, 41]), _bits(10)], 0, (6, 7, 8), (1,)),
}

# what the valid arguments give (int, bool, a list of ints, or the first of a tuple as a list)
EXPECTED: dict[str, Any] = {
    "extend_count": 4, "extend_layout": [44, 45, 46, 47, 48, 31, 52, 53, 54, 55, 56],
    "decode_count": 2, "decode_layout": [44, 48, 42], "page_ids": True,
    "segment_page_ids": True, "write_at": True, "copy_into": None, "distinct_runs": 4,
    "merge_below": 3, "sort_values": True, "merge_front": True, "ascends_across": True,
    "defer": [0, 1, 4], "release": 2, "slots_at": [20, 21, 22, 23, 28, 29, 30, 31],
    "extend_take": [44, 45, 46, 47, 48, 31, 52, 53, 54, 55, 56], "decode_take": [44, 48, 42],
}
WITH_PS = [name for name, entry in ENTRIES.items() if entry[1] is not None]
TENSOR_ARGS = [(name, i) for name, entry in ENTRIES.items() for i in entry[2]]
BUFFER_ARGS = [(name, i) for name, entry in ENTRIES.items() for i in entry[3]]


def _arrays(args: list[Any]) -> list[list[int]]:
    """The values of every numpy argument, to tell that nothing was written."""
    return [a.tolist() for a in args if isinstance(a, np.ndarray)]


def _read(result: Any) -> Any:
    """A result as plain values (a one-pass take: its slots)."""
    if isinstance(result, tuple):
        result = result[0]
    if isinstance(result, torch.Tensor):
        return result.tolist()
    if isinstance(result, bytearray):
        return np.frombuffer(result, dtype=np.int64).tolist()
    return result


def test_every_entry_point_is_covered() -> None:
    """The table lists exactly the functions the module exports."""
    exported = {n for n in dir(_native) if not n.startswith("_") and callable(getattr(_native, n))}
    assert exported == set(ENTRIES)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_valid_arguments_give_the_documented_result(name: str) -> None:
    assert _read(getattr(_native, name)(*ENTRIES[name][0]())) == EXPECTED[name]


@pytest.mark.parametrize("page_size", [0, -1, -(2**63), 2**63, 2**64 + 4])
@pytest.mark.parametrize("name", WITH_PS)
def test_a_page_size_outside_one_to_int64_max_is_a_value_error(name: str, page_size: int) -> None:
    """ps = 0 (a division by zero in the loops) or below, or beyond int64: ValueError naming the
    argument, nothing written."""
    make, ps_index, _, _ = ENTRIES[name]
    assert ps_index is not None
    args = make()
    args[ps_index] = page_size
    before = _arrays(args)
    with pytest.raises(ValueError, match=r"ps \(the page size\)"):
        getattr(_native, name)(*args)
    assert _arrays(args) == before


def _bad_buffer(kind: str, good: np.ndarray) -> Any:
    """``good`` turned into a buffer of the given wrong kind."""
    if kind == "strided":
        doubled = np.repeat(good, 2)
        return doubled[::2] if doubled.size else np.zeros(4, dtype=np.int64)[::2]
    if kind == "read-only":
        frozen = good.copy()
        frozen.flags.writeable = False
        return frozen
    if kind == "bytes":
        return bytearray(good.tobytes())
    if kind == "address":
        return int(good.ctypes.data) if good.size else 0
    dtypes: dict[str, Any] = {"int32": np.int32, "float64": np.float64, "uint64": np.uint64,
                              "big-endian": ">i8"}
    return good.astype(dtypes[kind])


@pytest.mark.parametrize("kind", ["int32", "float64", "uint64", "big-endian", "strided", "bytes",
                                  "address", "read-only"])
@pytest.mark.parametrize(("name", "index"), BUFFER_ARGS)
def test_a_bad_buffer_is_a_type_error(name: str, index: int, kind: str) -> None:
    """An int64 buffer argument of another item type, byte order or layout, or a bare address:
    TypeError (numpy's ValueError for a strided array, or a read-only one where the loop
    writes), nothing written. A read-only array where the loop only reads is valid."""
    args = ENTRIES[name][0]()
    args[index] = _bad_buffer(kind, args[index])
    before = _arrays(args)
    call = getattr(_native, name)
    if kind == "read-only":
        try:
            result = call(*args)
        except ValueError as error:
            assert "read-only" in str(error)
        else:  # a buffer the loop only reads: the valid result (its outputs written)
            assert _read(result) == EXPECTED[name]
            return
    else:
        with pytest.raises((TypeError, ValueError)) as raised:
            call(*args)
        assert raised.type is TypeError or "contiguous" in str(raised.value)
    assert _arrays(args) == before


@pytest.mark.parametrize("kind", ["int32", "strided", "array", "address 0", "address", "list"])
@pytest.mark.parametrize(("name", "index"), TENSOR_ARGS)
def test_a_tensor_the_loops_do_not_read_is_left_to_numpy(name: str, index: int,
                                                         kind: str) -> None:
    """A tensor argument of another dtype or layout, a numpy array, a list or an address (the
    form these functions once took): None, nothing read through it and nothing written."""
    args = ENTRIES[name][0]()
    good: torch.Tensor = args[index]
    args[index] = {"int32": lambda: good.to(torch.int32),
                   "strided": lambda: good.repeat_interleave(2)[::2],
                   "array": lambda: good.numpy(), "address 0": lambda: 0,
                   "address": lambda: good.data_ptr(), "list": lambda: good.tolist()}[kind]()
    before = _arrays(args)
    assert getattr(_native, name)(*args) is None
    assert _arrays(args) == before


@pytest.mark.parametrize(("name", "index", "value"), [
    ("page_ids", 2, _a([0] * 3)), ("page_ids", 2, _a([0] * 5)), ("page_ids", 2, _a([])),
    ("segment_page_ids", 4, _a([0] * 2)), ("segment_page_ids", 1, 10),
    ("segment_page_ids", 1, -1), ("segment_page_ids", 3, 4), ("segment_page_ids", 3, -1),
    ("write_at", 1, 6), ("write_at", 1, -1), ("write_at", 1, 2**62),
    ("copy_into", 1, 9), ("merge_front", 3, 2**62), ("merge_front", 2, 2**62),
    ("merge_front", 1, 9), ("slots_at", 3, 5), ("slots_at", 2, 4), ("release", 4, 9),
    ("release", 4, -1),
])
def test_a_size_or_position_outside_its_buffer_is_a_value_error(name: str, index: int,
                                                                value: Any) -> None:
    """An output of another length than the input's, or a position or count that does not fit
    the buffer it indexes: ValueError, nothing written."""
    args = ENTRIES[name][0]()
    args[index] = value
    before = _arrays(args)
    with pytest.raises(ValueError, match=name):
        getattr(_native, name)(*args)
    assert _arrays(args) == before


@pytest.mark.parametrize("num_tokens", [0, -1, 2**63, 2**64 + 11, -(2**64)])
@pytest.mark.parametrize("name", ["extend_layout", "extend_take"])
def test_a_token_count_outside_int64_is_left_to_numpy(name: str, num_tokens: int) -> None:
    """extend_layout's and extend_take's token count below 1 or outside int64: None (the numpy
    form raises the clause), never OverflowError."""
    args = ENTRIES[name][0]()
    args[5 if name == "extend_layout" else 11] = num_tokens
    before = _arrays(args)
    assert getattr(_native, name)(*args) is None
    assert _arrays(args) == before
