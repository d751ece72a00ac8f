"""Contract-level acceptance: is a target's result allowed, whatever page it picked?

The reference order (``AllocatorModel``) is one correct allocator; another may hand out other
pages. These checks take the model's pre-state, the call and the target's result, decide whether
the result keeps the contract, and on success make the model adopt the target's choice (the
pages it handed out become owned). They raise :class:`Divergence` naming the clause broken.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from .layout import ceil_div, num_new_pages
from .model import AllocatorModel
from .rules import FREE, OWNED, STAGED
from .wording import counted


class Divergence(AssertionError):
    """A target's observable behaviour breaks a contract clause (not a caller error)."""

    def __init__(self, clause: str, detail: str) -> None:
        super().__init__(f"[{clause}] {detail}")
        self.clause = clause
        self.detail = detail


def _adopt_pages(model: AllocatorModel, pages: Sequence[int], clause: str) -> None:
    """Move ``pages`` from free/staged to owned, after checking they were all available."""
    if len(set(pages)) != len(pages):
        dup = sorted(p for p, c in Counter(pages).items() if c > 1)
        raise Divergence(clause, f"pages {dup} handed out twice in one result")
    for page in pages:
        if not 1 <= page <= model.num_pages:
            raise Divergence(clause, f"page {page} is not a page of the pool 1..{model.num_pages}")
        if model.status_of(page) not in (FREE, STAGED):
            raise Divergence(clause, f"page {page} handed out while {model.status_of(page)}")
    taken = set(pages)
    model.free_pages = [p for p in model.free_pages if p not in taken]
    model.staged = [p for p in model.staged if p not in taken]
    for page in pages:
        model._status[page] = OWNED


def _none_allowed(model: AllocatorModel, needed_pages: int, result: object, clause: str) -> bool:
    available = len(model.free_pages) + len(model.staged)
    if result is None:
        if needed_pages <= available:
            raise Divergence(clause, f"returned None although "
                                     f"{counted(needed_pages, 'page was', 'pages were')} needed "
                                     f"and {counted(available, 'is', 'are')} free or staged")
        return True
    if needed_pages > available:
        raise Divergence(clause, f"returned slots although "
                                 f"{counted(needed_pages, 'page was', 'pages were')} needed "
                                 f"and only {counted(available, 'is', 'are')} free or staged")
    return False


def accept_alloc(model: AllocatorModel, need_size: int, result: Sequence[int] | None) -> None:
    """``alloc(need_size)``: None iff short (``ALLOC-3``); whole free pages, page-major (``ALLOC-4``)."""
    ps = model.page_size
    num_pages = need_size // ps
    if _none_allowed(model, num_pages, result, "ALLOC-3"):
        return
    assert result is not None
    if len(result) != need_size:
        raise Divergence("ALLOC-4", f"alloc({need_size}) returned {counted(len(result), 'slot')}")
    pages = [result[i * ps] // ps for i in range(num_pages)]
    for i, slot in enumerate(result):
        if slot != pages[i // ps] * ps + i % ps:
            raise Divergence("ALLOC-4", f"slot {slot} at index {i} breaks the whole-page layout")
    _adopt_pages(model, pages, "ALLOC-4")


def accept_extend(model: AllocatorModel, prefix_lens: Sequence[int], seq_lens: Sequence[int],
                  last_loc: Sequence[int], result: Sequence[int] | None, *,
                  clause_prefix: str = "EXTEND") -> None:
    """``alloc_extend``: None iff short (``-6``); part 1 continues ``last_loc``, new positions keep
    the row layout on distinct previously free pages, one per new logical page (``-4``, ``-5``)."""
    ps = model.page_size
    needed = sum(num_new_pages(p, s, ps) for p, s in zip(prefix_lens, seq_lens))
    if _none_allowed(model, needed, result, f"{clause_prefix}-6"):
        return
    assert result is not None
    total = sum(seq_lens) - sum(prefix_lens)
    if len(result) != total:
        raise Divergence(f"{clause_prefix}-5", f"returned {counted(len(result), 'slot')} for "
                                                f"{counted(total, 'new position')}")
    pages: list[int] = []
    k = 0
    for i, (pre, seq, loc) in enumerate(zip(prefix_lens, seq_lens, last_loc)):
        page_of_logical: dict[int, int] = {}
        for pos in range(pre, seq):
            slot = result[k]
            k += 1
            if pos < ceil_div(pre, ps) * ps:
                if slot != loc + 1 + pos - pre:
                    raise Divergence(f"{clause_prefix}-5", f"request {i} position {pos}: slot {slot}, "
                                     f"expected {loc + 1 + pos - pre} (continues last_loc {loc})")
                continue
            if slot % ps != pos % ps:
                raise Divergence(f"{clause_prefix}-5", f"request {i} position {pos}: slot {slot} breaks "
                                 f"the row layout (offset {slot % ps} != {pos % ps})")
            page = page_of_logical.setdefault(pos // ps, slot // ps)
            if page != slot // ps:
                raise Divergence(f"{clause_prefix}-5", f"request {i}: logical page {pos // ps} split over "
                                 f"pages {page} and {slot // ps}")
        pages.extend(page_of_logical.values())
    _adopt_pages(model, pages, f"{clause_prefix}-4")


def accept_decode(model: AllocatorModel, seq_lens: Sequence[int], last_loc: Sequence[int],
                  result: Sequence[int] | None) -> None:
    """``alloc_decode``: the extend contract with ``prefix = seq - 1`` (``DECODE-*``)."""
    accept_extend(model, [s - 1 for s in seq_lens], seq_lens, last_loc, result, clause_prefix="DECODE")


def check_census(model: AllocatorModel, target_free_pages: Sequence[int],
                 target_available_size: int) -> None:
    """The target's free census equals the model's as a multiset (``INV-1``, ``INV-2``, ``INV-4``).

    ``target_free_pages`` is the target's ``get_all_free_pages()`` (pages; slots for a token
    allocator). Raises :class:`Divergence` naming the pages that differ: ``INV-4`` when
    ``available_size()`` differs, else ``INV-2`` when the target lists a page twice, else ``INV-1``.
    """
    if target_available_size != model.available_size():
        raise Divergence("INV-4", f"available_size() is {target_available_size}, "
                                  f"the spec says {model.available_size()}")
    got, want = Counter(target_free_pages), Counter(model.get_all_free_pages())
    if got != want:
        extra = sorted((got - want).elements())
        missing = sorted((want - got).elements())
        clause = "INV-2" if max(got.values(), default=0) > 1 else "INV-1"
        raise Divergence(clause, f"free census differs: target also lists {extra}, "
                                 f"target lacks {missing}")
