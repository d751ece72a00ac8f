"""One table of hand-computed cases, run against the spec and against every implementation.

A case is a fresh allocator plus a list of steps; each step is a call in the spec's signature
(plain ints and lists) with its expected result, or the clause ID of the ContractViolation it
must raise. ``tests/spec`` runs the table on ``AllocatorModel``; ``tests/impl`` runs the same
table on the torch allocators through an adapter that converts arguments and results.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ANY: Any = object()  # expected value that is not checked


@dataclass(frozen=True)
class Step:
    """One call: ``call`` names a method of the spec model (``alloc``, ``alloc_extend``, ...).

    ``args`` are plain ints / lists (``free_segments`` takes a list of ``(slots, start_pos)``).
    ``expect`` is the return value as plain Python (``ANY`` to skip); ``raises`` the clause ID
    of the expected ContractViolation; ``free_after`` the expected ``get_all_free_pages()`` and
    ``available_after`` the expected ``available_size()`` after the step (None to skip).
    """

    call: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    expect: Any = ANY
    raises: str | None = None
    free_after: list[int] | None = None
    available_after: int | None = None


@dataclass(frozen=True)
class Case:
    """A fresh allocator (``size`` tokens) and the steps to run on it."""

    name: str
    paged: bool
    size: int
    page_size: int
    need_sort: bool
    steps: tuple[Step, ...]

    def __str__(self) -> str:
        return self.name


CASES: list[Case] = []  # filled by the table below / by case factories


def run_case(case: Case, make: Callable[[Case], Any], call: Callable[[Any, Step], Any],
             free_pages: Callable[[Any], list[int]], error_type: type[BaseException]) -> None:
    """Run ``case`` on the allocator ``make(case)`` and assert every expectation.

    ``call(allocator, step)`` performs the step and returns its result as plain Python;
    ``free_pages(allocator)`` returns ``get_all_free_pages()`` as a list. A step with ``raises``
    must raise ``error_type`` whose ``clause`` equals it and leave the free census unchanged.
    """
    alloc = make(case)
    for i, step in enumerate(case.steps):
        where = f"{case.name} step {i} {step.call}{step.args}"
        if step.raises is not None:
            before = (free_pages(alloc), alloc.available_size())
            try:
                call(alloc, step)
            except error_type as err:
                assert getattr(err, "clause", None) == step.raises, f"{where}: {err}"
            else:
                raise AssertionError(f"{where}: expected {step.raises}")
            assert (free_pages(alloc), alloc.available_size()) == before, f"{where}: state changed"
            continue
        result = call(alloc, step)
        if step.expect is not ANY:
            assert result == step.expect, f"{where}: got {result}, expected {step.expect}"
        if step.free_after is not None:
            assert free_pages(alloc) == step.free_after, f"{where}: free {free_pages(alloc)}"
        if step.available_after is not None:
            assert alloc.available_size() == step.available_after, where


# ---------------------------------------------------------------------------------------------
# The table. Expected values are computed by hand (or by the short formulas written next to
# them), from SGLang's own tests and worked examples and from SPEC.md's examples.
# SGLang puts some ``last_loc`` values on page 0; here they are shifted onto a real page.

PAGE_SIZES = (1, 2, 16, 64)  # page sizes every paged factory is instantiated for


def slots(pages: list[int] | range, ps: int) -> list[int]:
    """Every slot of ``pages``, page-major (``page * ps + offset``): a hand formula."""
    return [page * ps + offset for page in pages for offset in range(ps)]


def step(call: str, *args: Any, **kwargs: Any) -> Step:
    """``Step(call, args, ...)`` with the expectation keywords split from the call's kwargs."""
    known = {key: kwargs.pop(key) for key in ("expect", "raises", "free_after", "available_after")
             if key in kwargs}
    return Step(call, args, kwargs, **known)


def case(name: str, size: int, ps: int, *steps: Step, paged: bool = True,
         need_sort: bool = False) -> Case:
    return Case(name, paged, size, ps, need_sort, tuple(steps))


def _ns(need_sort: bool) -> str:
    return "-sort" if need_sort else ""


# -- token allocator (ps 1, frees append) -------------------------------------------------------

def token_cases() -> list[Case]:
    out = [
        case("token-fifo ALLOC-5 FREE-5", 8, 1,
             step("alloc", 3, expect=[1, 2, 3], free_after=[4, 5, 6, 7, 8]),
             step("free", [1, 2], free_after=[4, 5, 6, 7, 8, 1, 2], available_after=7),
             step("alloc", 6, expect=[4, 5, 6, 7, 8, 1], free_after=[2], available_after=1),
             paged=False),
        case("token-need-sort SORT-1 SORT-2 SORT-3", 8, 1,
             step("alloc", 6, expect=[1, 2, 3, 4, 5, 6], free_after=[7, 8]),
             step("free", [5, 2], free_after=[7, 8, 5, 2], available_after=4),
             step("alloc", 2, expect=[7, 8], free_after=[5, 2], available_after=2),
             step("alloc", 1, expect=[2], free_after=[5], available_after=1),
             paged=False, need_sort=True),
        case("token-merge-explicit SORT-3", 8, 1,
             step("alloc", 4, expect=[1, 2, 3, 4]),
             step("merge_and_sort_free", free_after=[5, 6, 7, 8]),
             step("free", [4, 1, 3], free_after=[5, 6, 7, 8, 4, 1, 3]),
             step("merge_and_sort_free", free_after=[1, 3, 4, 5, 6, 7, 8], available_after=7),
             paged=False, need_sort=True),
        case("token-alloc-zero ALLOC-2", 4, 1,
             step("alloc", 0, expect=[], free_after=[1, 2, 3, 4], available_after=4),
             paged=False),
        case("token-over-capacity ALLOC-3", 4, 1,
             step("alloc", 5, expect=None, free_after=[1, 2, 3, 4], available_after=4),
             step("alloc", 4, expect=[1, 2, 3, 4], free_after=[]),
             step("alloc", 1, expect=None, free_after=[], available_after=0),
             paged=False),
        # need_sort: the short alloc merges (sorts) before it answers None (B16 order).
        case("token-over-capacity-sort ALLOC-3 SORT-2", 4, 1,
             step("alloc", 4, expect=[1, 2, 3, 4]),
             step("free", [3, 1], free_after=[3, 1], available_after=2),
             step("alloc", 3, expect=None, free_after=[1, 3], available_after=2),
             paged=False, need_sort=True),
        case("token-errors FREE-1 FREE-2 FREE-3 ALLOC-2 ERR-1", 4, 1,
             step("alloc", 2, expect=[1, 2]),
             step("free", [1], free_after=[3, 4, 1]),
             step("free", [1], raises="FREE-3"),       # double free
             step("free", [2, 2], raises="FREE-3"),    # one slot twice in one call
             step("free", [4], raises="FREE-3"),       # never allocated
             step("free", [0], raises="FREE-2"),       # the padding slot
             step("free", [5], raises="FREE-1"),       # slots are [0, 5)
             step("free", [-1], raises="FREE-1"),
             step("free", [2, 9], raises="FREE-1"),    # rejected whole: 2 stays owned
             step("alloc", -1, raises="ALLOC-2"),
             step("free", [2], free_after=[3, 4, 1, 2], available_after=4),
             paged=False),
        case("token-empty-free FREE-6", 4, 1,
             step("alloc", 2, expect=[1, 2]),
             step("free", [], free_after=[3, 4], available_after=2),
             paged=False),
        case("token-group GROUP-4 GROUP-5 GROUP-2", 8, 1,
             step("alloc", 4, expect=[1, 2, 3, 4]),
             step("free_group_begin"),
             step("free", [3], available_after=4),
             step("free_segments", [([1], 0), ([2], 1)], available_after=4),
             step("free", [3], raises="FREE-3"),       # token: a repeat is a double free
             step("free_group_end", free_after=[5, 6, 7, 8, 3, 1, 2], available_after=7),
             step("free_group_end", free_after=[5, 6, 7, 8, 3, 1, 2], available_after=7),
             paged=False),
        case("token-group-nested GROUP-1", 8, 1,
             step("alloc", 2, expect=[1, 2]),
             step("free_group_begin"),
             step("free", [2]),
             step("free_group_begin", raises="GROUP-1"),
             step("free_group_end", free_after=[3, 4, 5, 6, 7, 8, 2]),
             paged=False),
        case("token-segments SEG-3 SEG-6", 8, 1,
             step("alloc", 5, expect=[1, 2, 3, 4, 5]),
             step("free_segments", [([2, 1], 0), ([], 2), ([3], 2), ([4, 5], 3)],
                  free_after=[6, 7, 8, 2, 1, 3, 4, 5], available_after=8),
             paged=False),
        case("token-segment-errors SEG-1 SEG-4", 8, 1,
             step("alloc", 4, expect=[1, 2, 3, 4]),
             step("free_segments", [([1, 2], 0), ([3], 1)], raises="SEG-4"),   # overlap
             step("free_segments", [([3], 2), ([1], 0)], raises="SEG-4"),      # descending
             step("free_segment", [1], start_pos=-1, raises="SEG-1"),
             step("free_segments", [([1], 0), ([1], 1)], raises="SEG-1"),      # one slot twice
             step("free_segments", [([1, 2], 0), ([5], 2)], raises="FREE-3"),  # 5 is free
             step("free_segment", [1, 2, 3, 4], start_pos=0, free_after=[5, 6, 7, 8, 1, 2, 3, 4]),
             paged=False),
        case("token-translate LIFE-3", 8, 1,
             step("translate_kv_indices_for_transfer", [3, 1, 2], expect=[3, 1, 2]),
             paged=False),
        case("token-clear LIFE-1", 8, 1,
             step("alloc", 3, expect=[1, 2, 3]),
             step("free", [2]),
             step("free_group_begin"),
             step("free", [1]),
             step("clear", free_after=[1, 2, 3, 4, 5, 6, 7, 8], available_after=8),
             step("free_group_end", free_after=[1, 2, 3, 4, 5, 6, 7, 8]),  # no group is open
             paged=False, need_sort=True),
        case("token-free-full FREE-7", 8, 1,
             step("alloc", 3, expect=[1, 2, 3]),
             step("free_full", [3, 1], free_after=[4, 5, 6, 7, 8, 3, 1]),
             step("free_full", [1], raises="FREE-3"),
             paged=False),
    ]
    return out


# -- paged allocator, any page size (frees prepend sorted distinct pages) -----------------------

def paged_order_cases(ps: int) -> list[Case]:
    """LIFO reuse, need_sort staging and merge, alloc(0), over-capacity None, at page size ps."""
    size = 4 * ps + ps - 1  # a ragged tail: still 4 pages (MODEL-1)
    return [
        case(f"paged-lifo ps={ps} FREE-4 FREE-5 ALLOC-4 ALLOC-5 MODEL-1", size, ps,
             step("alloc", 3 * ps, expect=slots([1, 2, 3], ps), free_after=[4]),
             # page 3 whole plus one slot of page 1: both pages released, sorted
             step("free", [*slots([3], ps), ps], free_after=[1, 3, 4], available_after=3 * ps),
             step("alloc", ps, expect=slots([1], ps), free_after=[3, 4]),
             step("free", slots([2], ps)[::-1], free_after=[2, 3, 4]),
             step("alloc", 3 * ps, expect=slots([2, 3, 4], ps), free_after=[], available_after=0)),
        case(f"paged-need-sort ps={ps} SORT-1 SORT-2 SORT-3 LIFE-4", 4 * ps, ps,
             step("alloc", 3 * ps, expect=slots([1, 2, 3], ps), free_after=[4]),
             step("free", slots([3], ps), free_after=[4, 3]),
             step("free", [3 * ps], raises="FREE-3"),  # page 3 is staged already
             step("free", slots([1], ps), free_after=[4, 3, 1], available_after=3 * ps),
             step("alloc", ps, expect=slots([4], ps), free_after=[3, 1]),      # not short: no merge
             step("alloc", ps, expect=slots([1], ps), free_after=[3]),         # short: merge, sort
             step("free", slots([2], ps)[::-1] + slots([1], ps), free_after=[3, 1, 2]),
             step("merge_and_sort_free", free_after=[1, 2, 3], available_after=3 * ps),
             step("merge_and_sort_free", free_after=[1, 2, 3]),
             need_sort=True),
        case(f"paged-alloc-zero ps={ps} ALLOC-2", 2 * ps, ps,
             step("alloc", 0, expect=[], free_after=[1, 2], available_after=2 * ps)),
        case(f"paged-over-capacity ps={ps} ALLOC-3", 3 * ps, ps,
             step("alloc", 4 * ps, expect=None, free_after=[1, 2, 3], available_after=3 * ps),
             step("alloc", 3 * ps, expect=slots([1, 2, 3], ps)),
             step("alloc", ps, expect=None, free_after=[], available_after=0)),
        case(f"paged-over-capacity-sort ps={ps} ALLOC-3 SORT-2", 4 * ps, ps,
             step("alloc", 2 * ps, expect=slots([1, 2], ps)),
             step("free", slots([2], ps), free_after=[3, 4, 2]),
             # short: the merge happens, then None; the free multiset is unchanged
             step("alloc", 4 * ps, expect=None, free_after=[2, 3, 4], available_after=3 * ps),
             need_sort=True),
        case(f"paged-errors ps={ps} FREE-1 FREE-2 FREE-3 ALLOC-2 ERR-1", 4 * ps, ps,
             step("alloc", 2 * ps, expect=slots([1, 2], ps)),
             step("free", [0], raises="FREE-2"),
             step("free", [ps - 1], raises="FREE-2"),
             step("free", [5 * ps], raises="FREE-1"),          # slots are [0, 5 ps)
             step("free", [ps, -1], raises="FREE-1"),
             step("free", [3 * ps], raises="FREE-3"),          # page 3 is free
             step("free", [ps, 3 * ps], raises="FREE-3"),      # rejected whole: page 1 stays owned
             step("alloc", -ps, raises="ALLOC-2"),
             step("free", [2 * ps], free_after=[2, 3, 4]),
             step("free", [2 * ps + ps - 1], raises="FREE-3"),  # page 2 again (B2)
             step("free", [ps], free_after=[1, 2, 3, 4], available_after=4 * ps)),
        case(f"paged-group-order ps={ps} GROUP-4 GROUP-5{_ns(False)}", 8 * ps, ps,
             *_group_order_steps(ps, need_sort=False)),
        case(f"paged-group-order ps={ps} GROUP-4 GROUP-5{_ns(True)}", 8 * ps, ps,
             *_group_order_steps(ps, need_sort=True), need_sort=True),
        case(f"paged-group-dedup ps={ps} GROUP-6 GROUP-2 FREE-3", 4 * ps, ps,
             step("alloc", 3 * ps, expect=slots([1, 2, 3], ps)),
             step("free_group_begin"),
             step("free", [ps]),
             step("free", slots([2, 1], ps)),                 # page 1 named again: released once
             step("free", [ps + ps - 1, ps]),
             step("free_segment", slots([1], ps), start_pos=0, raises="FREE-3"),
             step("free_segment", slots([3], ps), start_pos=0),
             step("free", [3 * ps], raises="FREE-3"),         # page 3 deferred by a segment free
             step("free_group_begin", raises="GROUP-1"),
             step("free_group_end", free_after=[3, 1, 2, 4], available_after=4 * ps),
             step("free_group_end", free_after=[3, 1, 2, 4]),
             step("free", [ps], raises="FREE-3")),
        case(f"paged-clear-translate ps={ps} LIFE-1 LIFE-3", 4 * ps, ps,
             step("alloc", 2 * ps, expect=slots([1, 2], ps)),
             step("free", slots([1], ps)),
             step("free_group_begin"),
             step("free", slots([2], ps)),
             step("translate_kv_indices_for_transfer", [2 * ps, ps + 1], expect=[2 * ps, ps + 1]),
             step("clear", free_after=[1, 2, 3, 4], available_after=4 * ps),
             step("free_group_end", free_after=[1, 2, 3, 4]),
             need_sort=True),
    ]


def _group_order_steps(ps: int, *, need_sort: bool) -> list[Step]:
    """Group: free() pages 5, 1 and segment pages 2, 3, then 6; released free() first, sorted,
    then the segment pages in enqueue order (GROUP-4)."""
    release = [1, 5, 2, 3, 6]
    after = [7, 8, *release] if need_sort else [2, 3, 6, 1, 5, 7, 8]
    return [
        step("alloc", 6 * ps, expect=slots(range(1, 7), ps), free_after=[7, 8]),
        step("free_group_begin"),
        step("free", slots([5], ps)),
        step("free_segment", slots([2, 3], ps), start_pos=0),
        step("free", slots([1], ps)[:1]),
        step("free_segments", [(slots([6], ps), 0)], available_after=2 * ps),
        step("alloc", 3 * ps, expect=None, free_after=[7, 8]),  # deferred pages are not free
        step("free_group_end", free_after=after, available_after=7 * ps),
    ]


# -- alloc_extend / alloc_decode (paged only) -----------------------------------------------------

def extend_case(ps: int, prefix_len: int, seq_len: int) -> Case:
    """One request owning page 1 (positions [0, ps) there), page 2 owned by someone else, free
    pages 3.. : extend from prefix_len to seq_len (0 < prefix_len <= ps < seq_len).

        positions  [prefix, ps)        -> page 1, continuing last_loc     (part 1)
                   [ps, seq // ps * ps) -> pages 3, 4, ... whole           (part 2)
                   [seq // ps * ps, seq) -> the next free page's head       (part 3)
    """
    last_loc = ps + prefix_len - 1
    num_full = seq_len // ps - 1
    part1 = list(range(last_loc + 1, 2 * ps))
    part2 = slots(range(3, 3 + num_full), ps)
    tail_page = 3 + num_full
    part3 = [tail_page * ps + offset for offset in range(seq_len % ps)]
    first_left = tail_page + (1 if seq_len % ps else 0)
    return case(f"extend ps={ps} prefix={prefix_len} seq={seq_len} EXTEND-4 EXTEND-5 EXTEND-7",
                12 * ps, ps,
                step("alloc", ps, expect=slots([1], ps)),
                step("alloc", ps, expect=slots([2], ps)),
                step("alloc_extend", [prefix_len], [seq_len], [last_loc],
                     expect=part1 + part2 + part3, free_after=list(range(first_left, 13)),
                     available_after=(13 - first_left) * ps))


# SGLang's alloc_extend_naive shapes at ps 4 (test_allocator_cpu.py), shifted onto page 1
# (slots 4..7) with free pages 3, 4, ...: (prefix, seq, result).
EXTEND_PARTS_PS4 = [
    (2, 3, [6]),                                         # part 1 only
    (4, 8, [12, 13, 14, 15]),                            # part 2 only
    (4, 6, [12, 13]),                                    # part 3 only
    (2, 8, [6, 7, 12, 13, 14, 15]),                      # 1 + 2
    (2, 6, [6, 7, 12, 13]),                              # 1 + 3
    (4, 10, [12, 13, 14, 15, 16, 17]),                   # 2 + 3
    (2, 11, [6, 7, 12, 13, 14, 15, 16, 17, 18]),         # 1 + 2 + 3 (SGLang: [2, 3] + ...)
    (2, 2, []),                                          # nothing to extend, no page
]


def extend_parts_cases() -> list[Case]:
    out = []
    for prefix_len, seq_len, expected in EXTEND_PARTS_PS4:
        used = len({s // 4 for s in expected} - {1})
        out.append(case(f"extend-parts ps=4 prefix={prefix_len} seq={seq_len} EXTEND-5", 32, 4,
                        step("alloc", 4, expect=[4, 5, 6, 7]),
                        step("alloc", 4, expect=[8, 9, 10, 11]),
                        step("alloc_extend", [prefix_len], [seq_len], [3 + prefix_len],
                             extend_num_tokens=seq_len - prefix_len, expect=expected,
                             free_after=list(range(3 + used, 9)))))
    out += [
        # SGLang GPU test: pre=[1,3], seq=[6,7], last_loc=[4,10] (pages 1, 2 are real already)
        case("extend-multi ps=4 EXTEND-7 EXTEND-8", 32, 4,
             step("alloc", 8, expect=list(range(4, 12))),
             step("alloc_extend", [1, 3], [6, 7], [4, 10],
                  expect=[5, 6, 7, 12, 13, 11, 16, 17, 18], free_after=[5, 6, 7, 8])),
        case("extend-new-requests ps=4 EXTEND-7", 32, 4,
             step("alloc_extend", [0, 0, 0], [5, 0, 4], [-1, -1, -1], extend_num_tokens=9,
                  expect=[4, 5, 6, 7, 8, 12, 13, 14, 15], free_after=[4, 5, 6, 7, 8],
                  available_after=20)),
        # B1 shape: 2 free pages, a 12-token request needs 3: None, free list unchanged.
        case("extend-short ps=4 EXTEND-6", 8, 4,
             step("alloc_extend", [0], [12], [-1], expect=None, free_after=[1, 2],
                  available_after=8),
             step("alloc_extend", [0], [8], [-1], expect=list(range(4, 12)), free_after=[])),
        # B16: need_sort, P(4, [1,2,3]); page 1 staged; the extend needs 2 pages: merge first.
        case("extend-B16 ps=4 SORT-2 EXTEND-6", 12, 4,
             step("alloc", 8, expect=list(range(4, 12)), free_after=[3]),
             step("free", [4, 5, 6, 7], free_after=[3, 1], available_after=8),
             step("alloc_extend", [0], [8], [-1], expect=[4, 5, 6, 7, 12, 13, 14, 15],
                  free_after=[], available_after=0),
             need_sort=True),
        # The merge bound 4 // 4 + 1 + 1 = 3 exceeds len(free) = 2: merge although not short.
        case("extend-merge-bound ps=4 EXTEND-7 SORT-2", 20, 4,
             step("alloc", 12, expect=list(range(4, 16)), free_after=[4, 5]),
             step("free", [8], free_after=[4, 5, 2]),
             step("alloc_extend", [0], [4], [-1], expect=[8, 9, 10, 11], free_after=[4, 5]),
             need_sort=True),
        case("extend-no-merge ps=4 EXTEND-7 SORT-2", 32, 4,
             step("alloc", 12, expect=list(range(4, 16)), free_after=[4, 5, 6, 7, 8]),
             step("free", [8], free_after=[4, 5, 6, 7, 8, 2]),
             step("alloc_extend", [0], [4], [-1], expect=[16, 17, 18, 19],
                  free_after=[5, 6, 7, 8, 2]),
             need_sort=True),
        # The merge bound counts the new tokens only: 4 // 4 + 1 + 1 = 3 <= len(free) = 6,
        # no merge although the prefix is long; page 10 stays staged.
        case("extend-long-prefix-no-merge ps=4 EXTEND-7 SORT-2", 64, 4,
             step("alloc", 36, expect=list(range(4, 40)), free_after=list(range(10, 17))),
             step("alloc", 4, expect=[40, 41, 42, 43], free_after=list(range(11, 17))),
             step("free", [40, 41, 42, 43], free_after=[*range(11, 17), 10]),
             step("alloc_extend", [36], [40], [39], expect=[44, 45, 46, 47],
                  free_after=[*range(12, 17), 10]),
             need_sort=True),
        case("extend-ps1 ps=1 EXTEND-5", 8, 1,
             step("alloc", 2, expect=[1, 2]),
             step("alloc_extend", [2, 0], [4, 1], [2, -1], expect=[3, 4, 5], free_after=[6, 7, 8])),
    ]
    return out


def decode_cases() -> list[Case]:
    return [
        # seq [5, 8, 9] at ps 4: requests 0 and 2 open pages (positions 4 and 8 page-aligned);
        # free pages 7, 9, 11 at the front; rows: req 0 on page 1, req 1 on pages 2-3, req 2 on 4-5.
        case("decode ps=4 DECODE-4 DECODE-5 DECODE-7", 48, 4,
             step("alloc", 4, expect=[4, 5, 6, 7]),
             step("alloc", 8, expect=list(range(8, 16))),
             step("alloc", 8, expect=list(range(16, 24))),
             step("alloc", 28, expect=list(range(24, 52))),
             step("free", slots([6, 8, 10, 12], 4), free_after=[6, 8, 10, 12]),
             step("free", slots([7, 9, 11], 4), free_after=[7, 9, 11, 6, 8, 10, 12]),
             step("alloc_decode", [5, 8, 9], [7, 14, 23], expect=[28, 15, 36],
                  free_after=[11, 6, 8, 10, 12], available_after=20)),
        case("decode-within-page ps=4 DECODE-4", 16, 4,
             step("alloc", 4, expect=[4, 5, 6, 7]),
             step("alloc_decode", [4], [6], expect=[7], free_after=[2, 3, 4], available_after=12),
             step("alloc_decode", [5], [7], expect=[8], free_after=[3, 4], available_after=8)),
        # B1 decode shape: 3 requests crossing pages, 2 free pages: None, free list unchanged.
        case("decode-short ps=4 DECODE-6", 12, 4,
             step("alloc", 4, expect=[4, 5, 6, 7]),
             step("alloc_decode", [5, 1, 1], [7, -1, -1], expect=None, free_after=[2, 3]),
             step("alloc_decode", [5, 1], [7, -1], expect=[8, 12], free_after=[])),
        case("decode-B16 ps=4 DECODE-7 SORT-2", 12, 4,
             step("alloc", 12, expect=list(range(4, 16)), free_after=[]),
             step("free", [4], free_after=[1], available_after=4),
             step("alloc_decode", [5], [11], expect=[4], free_after=[], available_after=0),
             need_sort=True),
        # A batch as large as the free list takes it without merging (DECODE-7: merge only
        # when the batch exceeds it); page 1 stays staged.
        case("decode-batch-equals-free ps=4 DECODE-7 SORT-2", 32, 4,
             step("alloc", 24, expect=list(range(4, 28)), free_after=[7, 8]),
             step("free", [4, 5, 6, 7], free_after=[7, 8, 1]),
             step("alloc_decode", [5, 5], [11, 15], expect=[28, 32], free_after=[1]),
             need_sort=True),
        # Deviation from SGLang at ps 1 (its page count says 0): every decode step opens a page.
        case("decode-ps1 ps=1 DECODE-4", 4, 1,
             step("alloc", 2, expect=[1, 2]),
             step("alloc_decode", [3, 1], [2, -1], expect=[3, 4], free_after=[], available_after=0),
             step("alloc_decode", [4], [3], expect=None, free_after=[])),
        case("decode-general ps=2 DECODE-4 DECODE-5", 16, 2,
             step("alloc", 2, expect=[2, 3]),
             step("alloc_decode", [3], [3], expect=[4], free_after=[3, 4, 5, 6, 7, 8]),
             step("alloc_decode", [4], [4], expect=[5], free_after=[3, 4, 5, 6, 7, 8])),
    ]


# -- free_segment(s) ------------------------------------------------------------------------------

def dedup_cases_ps4() -> list[Case]:
    """SGLang's test_paged_free_segment shapes: a row of 12 positions on pages 1, 2, 3 (slots
    4..15), segments over its first 11 positions. Page 2 spans both segments: released once.

    The spec's semantics (SEG-5). SGLang 0.5.23 asserts on these shared-page segments instead (its
    narrower E4 contract); every other case of this table matches 0.5.23 on CPU exactly, except
    ``decode-ps1`` (the deliberate DECODE-4 deviation at page size 1)."""
    row = list(range(4, 16))
    cut = [  # (name, segments as (start, end) position ranges, free list after, not need_sort)
        ("[0,6)+[6,11)", [(0, 6), (6, 11)], [3, 1, 2]),
        ("[0,5)+[7,11)", [(0, 5), (7, 11)], [3, 1, 2]),
        ("[0,5)+[5,7)+[8,11) inside", [(0, 5), (5, 7), (8, 11)], [3, 1, 2]),
        ("[0,4)+[4,11) aligned", [(0, 4), (4, 11)], [2, 3, 1]),
        ("[0,6)+[6,6)+[6,11) empty SEG-6", [(0, 6), (6, 6), (6, 11)], [3, 1, 2]),
        ("[0,6)+[2,2)+[6,11) empty skipped SEG-6", [(0, 6), (2, 2), (6, 11)], [3, 1, 2]),
    ]
    out = []
    for name, ranges, released in cut:
        segments = [(row[a:b], a) for a, b in ranges]
        for need_sort in (False, True):
            after = [4, 5, 6, 7, 8, *sorted(released)] if need_sort else [*released, 4, 5, 6, 7, 8]
            out.append(case(f"segments ps=4 {name} SEG-2 SEG-3 SEG-5{_ns(need_sort)}", 32, 4,
                            step("alloc", 12, expect=row),
                            step("free_segments", segments, free_after=after,
                                 available_after=32),
                            need_sort=need_sort))
    return out


def dedup_cases(ps: int) -> list[Case]:
    """Pages 1, 2, 3 hold row positions [0, 3ps); h = ps // 2 (ps >= 2)."""
    row, h = slots([1, 2, 3], ps), ps // 2
    return [
        case(f"segments ps={ps} shared boundary SEG-5", 4 * ps, ps,
             step("alloc", 3 * ps, expect=row),
             step("free_segments", [(row[:ps + h], 0), (row[ps + h:3 * ps - 1], ps + h)],
                  free_after=[3, 1, 2, 4])),
        case(f"segments ps={ps} inside the shared page SEG-5", 4 * ps, ps,
             step("alloc", 3 * ps, expect=row),
             step("free_segments", [(row[:ps + h], 0), (row[ps + h:2 * ps], ps + h)],
                  free_after=[1, 2, 4], available_after=3 * ps),
             step("free_segment", row[2 * ps:], start_pos=2 * ps, free_after=[3, 1, 2, 4])),
        case(f"segments ps={ps} errors SEG-1 SEG-4 FREE-2 FREE-3 ERR-1", 5 * ps, ps,
             step("alloc", 3 * ps, expect=row),
             step("free_segments", [(row[:ps + 1], 0), (row[ps:2 * ps], ps)], raises="SEG-4"),
             step("free_segments", [(row[ps:2 * ps], ps), (row[:ps], 0)], raises="SEG-4"),
             step("free_segment", row[1:ps + 1], start_pos=0, raises="SEG-1"),
             step("free_segment", row[:ps] + row[:ps], start_pos=0, raises="SEG-1"),
             step("free_segment", row[:ps], start_pos=-ps, raises="SEG-1"),
             step("free_segments", [(row[:ps], 0), (row[:ps], ps)], raises="SEG-1"),
             # a trimmed head must still name the page the previous segment gave its row page
             *([step("free_segments", [(row[:ps + 1], 0),
                                       (slots([4], ps)[1:] + row[2 * ps:], ps + 1)],
                     raises="SEG-1")] if ps > 1 else []),
             step("free_segment", list(range(ps)), start_pos=0, raises="FREE-2"),
             step("free_segment", slots([6], ps), start_pos=0, raises="FREE-1"),
             step("free_segments", [(row[:ps], 0), (slots([4], ps), ps)], raises="FREE-3"),
             step("free_segments", [], free_after=[4, 5]),
             step("free_segment", [], start_pos=7, free_after=[4, 5]),
             step("free_segment", row, start_pos=0, free_after=[1, 2, 3, 4, 5]),
             step("free_segment", row[:1], start_pos=0, raises="FREE-3")),
    ]


def segment_order_cases(ps: int) -> list[Case]:
    """A row on pages 3, 2 (in that order): a segment free keeps row order, free() sorts."""
    row = slots([3, 2], ps)
    setup = [
        step("alloc", 3 * ps, expect=slots([1, 2, 3], ps)),
        step("free", slots([2], ps)),
        step("free", slots([3], ps), free_after=[3, 2, 4]),
        step("alloc", 2 * ps, expect=row, free_after=[4]),
    ]
    return [
        case(f"segment-row-order ps={ps} SEG-3", 4 * ps, ps, *setup,
             step("free_segment", row, start_pos=0, free_after=[3, 2, 4])),
        case(f"free-sorted ps={ps} FREE-5", 4 * ps, ps, *setup,
             step("free", row, free_after=[2, 3, 4])),
        case(f"segment-row-order ps={ps} SEG-3 need_sort", 4 * ps, ps, *setup[:1],
             step("free", slots([2], ps)), step("free", slots([3], ps)),
             step("merge_and_sort_free", free_after=[2, 3, 4]),
             step("free", slots([1], ps)),
             step("alloc", 3 * ps, expect=slots([2, 3, 4], ps), free_after=[1]),  # not short
             step("free_segments", [(slots([4, 2], ps), 0), (slots([3], ps), 2 * ps)],
                  free_after=[1, 4, 2, 3]),
             need_sort=True),
    ]


# -- caller errors of alloc_extend / alloc_decode (ps 4; request on page 1, prefix 2) -------------

def extend_error_cases() -> list[Case]:
    setup = (step("alloc", 4, expect=[4, 5, 6, 7]), step("alloc", 4, expect=[8, 9, 10, 11]))
    return [
        case("extend-errors ps=4 EXTEND-1 EXTEND-2 EXTEND-3 EXTEND-8 ERR-1", 32, 4, *setup,
             step("alloc_extend", [2], [5, 6], [5], raises="EXTEND-1"),
             step("alloc_extend", [2], [5], [5, 5], raises="EXTEND-1"),
             step("alloc_extend", [2], [5], [5], extend_num_tokens=4, raises="EXTEND-1"),
             step("alloc_extend", [3], [2], [6], raises="EXTEND-2"),
             step("alloc_extend", [0], [-1], [-1], raises="EXTEND-2"),
             step("alloc_extend", [-1], [3], [-2], raises="EXTEND-2"),
             step("alloc_extend", [2], [5], [6], raises="EXTEND-3"),     # B8 (a): misaligned
             step("alloc_extend", [2], [5], [-1], raises="EXTEND-3"),
             step("alloc_extend", [0], [5], [5], raises="EXTEND-3"),
             step("alloc_extend", [2], [5], [13], raises="EXTEND-3"),    # page 3 is free
             step("alloc_extend", [2], [5], [1], raises="EXTEND-3"),     # page 0 (SGLang's example)
             step("alloc_extend", [2], [5], [37], raises="EXTEND-3"),    # page 9 does not exist
             step("alloc_extend", [2, 2], [5, 5], [5, 5], raises="EXTEND-8"),
             step("alloc_extend", [0, 2], [4, 5], [-1, 5], extend_num_tokens=7,
                  expect=[12, 13, 14, 15, 6, 7, 16], free_after=[5, 6, 7, 8]),
             # a request with nothing to extend does not continue its page
             step("alloc_extend", [2, 2], [2, 2], [5, 5], expect=[], free_after=[5, 6, 7, 8])),
        case("decode-errors ps=4 DECODE-1 DECODE-2 DECODE-3 DECODE-8 ERR-1", 32, 4, *setup,
             step("alloc_decode", [3], [5, 5], raises="DECODE-1"),
             step("alloc_decode", [0], [-1], raises="DECODE-2"),
             step("alloc_decode", [3], [6], raises="DECODE-3"),
             step("alloc_decode", [3], [-1], raises="DECODE-3"),
             step("alloc_decode", [3], [13], raises="DECODE-3"),        # page 3 is free
             step("alloc_decode", [3, 3], [5, 5], raises="DECODE-8"),
             # two requests sharing a full prefix page may both open a page
             step("alloc_decode", [5, 5], [7, 7], expect=[12, 16], free_after=[5, 6, 7, 8]),
             step("alloc_decode", [3, 6], [5, 16], expect=[6, 17], free_after=[5, 6, 7, 8])),
    ]


CASES += token_cases()
for _ps in PAGE_SIZES:
    CASES += paged_order_cases(_ps)
    CASES += segment_order_cases(_ps)
for _ps in (2, 4, 16, 64):
    CASES.append(extend_case(_ps, _ps // 2, 2 * _ps + _ps // 2 + 1))
    CASES.append(extend_case(_ps, _ps, 3 * _ps))
    CASES += dedup_cases(_ps)
CASES += extend_parts_cases() + decode_cases() + dedup_cases_ps4() + extend_error_cases()
