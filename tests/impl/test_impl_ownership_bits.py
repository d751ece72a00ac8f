"""The compiled guard's bit passes (``csrc/args.c``: ``mark_taken``, ``claim_pages``) against a
plain-Python statement of their effect on the ownership bitmap.

``slots_at`` marks the pages it hands out; ``release`` (no dedup) claims the pages it puts back:
every one must lie inside the bitmap, have its bit set and be named once, else nothing is
written and every bit stays as it was. The passes take runs of consecutive pages by their
bytes and scattered pages one bit each, so the inputs here mix both: runs of every length at
every bit offset (byte ends, the bitmap's last bits), scattered pages, pages outside the bitmap
(negative, past its end, near the int64 limits) and pages named twice, in runs or apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kvpool.impl.native_ops import native_available

pytestmark = pytest.mark.skipif(not native_available(), reason="extension not built")


def _native() -> Any:
    from kvpool.impl import _native  # type: ignore[attr-defined]

    return _native


def _bit(bits: bytearray, page: int) -> bool:
    return bool(bits[page >> 3] >> (page & 7) & 1)


@st.composite
def _pages(draw: Any, num_bits: int) -> list[int]:
    """Pages in pieces: runs from anywhere in (or just around) the bitmap, scattered pages,
    far-away values, and repeats of pages drawn before."""
    pages: list[int] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["run", "run", "lone", "far", "repeat"]))
        if kind == "run":
            first = draw(st.integers(-3, num_bits + 2))
            pages += range(first, first + draw(st.integers(1, 80)))
        elif kind == "lone":
            pages += draw(st.lists(st.integers(0, num_bits - 1), max_size=20))
        elif kind == "far":
            pages.append(draw(st.sampled_from([-(2**63), -1, num_bits, 2**62, 2**63 - 1])))
        elif pages:
            pages.append(draw(st.sampled_from(pages)))
    return pages


@st.composite
def _case(draw: Any) -> tuple[bytearray, list[int]]:
    num_bytes = draw(st.integers(1, 40))
    fill = draw(st.sampled_from(["all", "holes", "none", "random"]))
    if fill == "random":
        bits = bytearray(draw(st.binary(min_size=num_bytes, max_size=num_bytes)))
    else:
        bits = bytearray(b"\xff" * num_bytes if fill in ("all", "holes") else num_bytes)
    if fill == "holes":  # every page handed out but a few (inside a long run, say)
        for page in draw(st.lists(st.integers(0, num_bytes * 8 - 1), max_size=3)):
            bits[page >> 3] &= ~(1 << (page & 7)) & 0xFF
    return bits, draw(_pages(num_bytes * 8))


@settings(max_examples=400, deadline=None)
@given(case=_case())
def test_claim_clears_held_pages_named_once_or_changes_nothing(
        case: tuple[bytearray, list[int]]) -> None:
    """``release`` of ``pages``: cleared bits and ``len(pages)`` when each is inside the bitmap,
    set, and named once; else None with the bitmap and the buffer as they were."""
    bits, pages = case
    num_bits = len(bits) * 8
    before = bytes(bits)
    allowed = (len(set(pages)) == len(pages) and
               all(0 <= p < num_bits and _bit(bits, p) for p in pages))
    buf = np.full(len(pages) + 1, -7, dtype=np.int64)
    source = [bytearray(np.array(pages, dtype=np.int64).tobytes())]
    got = _native().release(1, source, False, buf, 0, False, len(pages), bits)
    if not allowed:
        assert got is None
        assert bytes(bits) == before
        assert buf.tolist() == [-7] * (len(pages) + 1)
        return
    assert got == len(pages)
    assert buf[:len(pages)].tolist() == pages
    expected = bytearray(before)
    for p in pages:
        expected[p >> 3] &= ~(1 << (p & 7)) & 0xFF
    assert bits == expected


@settings(max_examples=400, deadline=None)
@given(case=_case())
def test_mark_sets_the_bits_of_every_page_inside_the_bitmap(
        case: tuple[bytearray, list[int]]) -> None:
    """``slots_at`` (ps 1) hands ``pages`` out as they are and sets the bit of each one that
    lies inside the bitmap, no other (a page outside it marks nothing: memory stays safe)."""
    bits, pages = case
    num_bits = len(bits) * 8
    expected = bytearray(bits)
    for p in pages:
        if 0 <= p < num_bits:
            expected[p >> 3] |= 1 << (p & 7)
    view = np.array(pages or [1], dtype=np.int64)
    got = _native().slots_at(1, view, 0, len(pages), bits)
    assert got.tolist() == pages
    assert bits == expected


@pytest.mark.parametrize("offset", range(8))
@pytest.mark.parametrize("length", [1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 130])
def test_a_run_claimed_after_it_was_marked_leaves_every_other_bit(offset: int,
                                                                  length: int) -> None:
    """A run at every bit offset and around the byte and word lengths: marked, it sets exactly
    its bits; claimed, it clears them; claimed again, it is refused with nothing changed."""
    bits = bytearray(b"\x5a" * 40)  # other pages: a pattern that must survive
    pattern = bytes(bits)
    pages = list(range(8 + offset, 8 + offset + length))
    _native().slots_at(1, np.array(pages, dtype=np.int64), 0, length, bits)
    assert all(_bit(bits, p) for p in pages)
    source = [bytearray(np.array(pages, dtype=np.int64).tobytes())]
    buf = np.zeros(length, dtype=np.int64)
    assert _native().release(1, source, False, buf, 0, False, length, bits) == length
    assert not any(_bit(bits, p) for p in pages)
    for p in range(len(bits) * 8):
        if p not in pages:
            assert _bit(bits, p) == _bit(bytearray(pattern), p)
    cleared = bytes(bits)
    assert _native().release(1, source, False, buf, 0, False, length, bits) is None
    assert bytes(bits) == cleared


@pytest.mark.parametrize("offset", [0, 3, 7])
@pytest.mark.parametrize("length", [9, 17, 72, 130])
def test_a_run_with_any_one_page_not_handed_out_is_refused(offset: int, length: int) -> None:
    """Whichever page of a run (its end bytes, the bytes between, the words between) is not
    handed out, ``release`` of the run is refused with every bit as it was."""
    pages = list(range(8 + offset, 8 + offset + length))
    source = [bytearray(np.array(pages, dtype=np.int64).tobytes())]
    buf = np.zeros(length, dtype=np.int64)
    for hole in pages:
        bits = bytearray(b"\xff" * 40)
        bits[hole >> 3] &= ~(1 << (hole & 7)) & 0xFF
        before = bytes(bits)
        assert _native().release(1, source, False, buf, 0, False, length, bits) is None, hole
        assert bytes(bits) == before
