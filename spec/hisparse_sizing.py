"""The arithmetic of SGLang's HiSparse allocators (``HSP-1``, ``HSP-2``, ``HSP-7``, ``HSP-10``,
SPEC.md section 20): pure functions of ints, with PEP 316 contracts that CrossHair checks
(``.ci/crosshair``) and Z3 lemmas prove for unbounded integers
(``tests/formal/test_formal_z3_hisparse.py``).

A HiSparse pool of ``size`` device slots and ratio ``r`` has a logical side of ``size * r``
slots and a device side of ``size`` slots, both paged with page 0 reserved; its full -> device
mapping has one entry per logical slot id a page can hand out, then one more row of padding
and a trailing ``-1`` (what a ``last_loc`` of ``-1`` translates to)::

    size 8, r 2, ps 4: logical pages 1..4 (slots 4..19), device pages 1..2 (slots 4..11)
    mapping: 8 * 2 + 4 + 1 = 21 entries, entry 20 is -1
"""

from __future__ import annotations


def logical_size(size: int, ratio: int) -> int:
    """Slots of the logical side: ``size * ratio`` (``HSP-1``); ``size`` and ``size_full``
    report this number.

    pre: 0 <= size <= 4096 and 1 <= ratio <= 16
    post: __return__ >= size
    post: __return__ == size * ratio
    """
    return size * ratio


def num_pages(num_slots: int, page_size: int) -> int:
    """Pages of a side of ``num_slots`` slots: ``num_slots // page_size`` (pages
    ``1..num_pages``; page 0 is the padding page, ``HSP-1``).

    pre: 0 <= num_slots <= 65536 and 1 <= page_size <= 256
    post: __return__ * page_size <= num_slots < (__return__ + 1) * page_size
    """
    return num_slots // page_size


def mapping_len(size: int, ratio: int, page_size: int) -> int:
    """Entries of the full -> device mapping: ``size * ratio + page_size`` zeros and a trailing
    ``-1`` (``HSP-1``). Every slot of logical page ``p <= num_pages`` is below the ``-1`` entry
    (``mapping_len - 1``), so no slot reads it but a ``last_loc`` of ``-1``.

    pre: 0 <= size <= 4096 and 1 <= ratio <= 16 and 1 <= page_size <= 256
    post: __return__ - 1 >= (num_pages(size * ratio, page_size) + 1) * page_size
    """
    return size * ratio + page_size + 1


def capacity(logical_available: int, device_available: int) -> int:
    """``available_size()``: the smaller side's free tokens (``HSP-2``); an allocation needs
    room on both.

    pre: logical_available >= 0 and device_available >= 0
    post: __return__ <= logical_available and __return__ <= device_available
    post: __return__ in (logical_available, device_available)
    """
    return min(logical_available, device_available)


def compressed_last_loc(last_loc: int, compress_ratio: int) -> int:
    """The last complete compressed block of a prefix ending at ``last_loc`` (``HSP-10``):
    ``(last_loc - (c - 1)) // c``; ratio 1 is the identity and ``-1`` stays ``-1``.

    pre: -1 <= last_loc <= 65536 and compress_ratio in (1, 4)
    post: compress_ratio != 1 or __return__ == last_loc
    post: last_loc != -1 or __return__ == -1
    post: __return__ * compress_ratio <= last_loc
    """
    return (last_loc - (compress_ratio - 1)) // compress_ratio


def device_buffer_split(num_mapped: int, need_size: int, page_size: int) -> tuple[int, int, int]:
    """How ``alloc_device_buffer`` fills ``need_size`` device slots from ``num_mapped`` mapped
    ones (``HSP-7``): ``(surplus, pad, extra)``. With enough mapped slots the first
    ``need_size`` are the buffer and ``surplus`` go back to the device side; else the last
    mapped page is padded with its ``pad`` remaining slots and ``extra`` slots (whole pages)
    are taken from the device side. ``need_size`` is a page multiple.

    pre: 0 <= num_mapped <= 4096 and 0 <= need_size <= 4096 and 1 <= page_size <= 64
    pre: need_size % page_size == 0
    post: __return__[0] == max(num_mapped - need_size, 0)
    post: __return__[2] >= 0 and __return__[2] % page_size == 0
    post: __return__[0] > 0 or num_mapped + __return__[1] + __return__[2] == need_size
    post: 0 <= __return__[1] < page_size
    """
    if num_mapped >= need_size:
        return num_mapped - need_size, 0, 0
    pad = (page_size - num_mapped % page_size) % page_size
    return 0, pad, need_size - num_mapped - pad
