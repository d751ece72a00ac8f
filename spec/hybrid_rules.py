"""Caller rules and the mapping census of the hybrid sliding-window allocator (``SWA-*``).

The checks see the allocator through data (the mapped values of the slots named, ``RELEASED``
where a peer is gone) and page-status lookups, so :class:`kvpool.spec.hybrid.HybridModel` and
``kvpool.impl``'s SWA allocator in checked mode share them. Each raises
:class:`ContractViolation` naming its clause before anything changes (``ERR-1``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .errors import ContractViolation
from .rules import FREE, STAGED, StatusOf, check_slot
from .window import RELEASED
from .wording import counted


def check_slots(slots: Sequence[int], page_size: int, num_pages: int) -> None:
    """Every slot an int in the full pool, not on page 0 (``FREE-1``, ``FREE-2``).

    pre: len(slots) <= 8
    pre: 1 <= page_size <= 8
    pre: 0 <= num_pages <= 16
    post: all(1 <= s // page_size <= num_pages for s in slots)
    raises: ContractViolation
    """
    for slot in slots:
        check_slot(slot, page_size, num_pages)


def check_peers_live(slots: Sequence[int], peers: Sequence[int], call: str, page_size: int) -> None:
    """``free_swa`` / ``free`` / segment frees: every slot still has its SWA peer (``SWA-11``).

    ``peers[k]`` is the mapped value of ``slots[k]``. Releasing the SWA side twice is a caller
    error at every page size (SGLang 0.5.23 skips a released peer at ps > 1 and releases the
    padding slot at ps = 1); so is naming a slot twice at page size 1, where the peer slots are
    released one by one.

    pre: len(slots) == len(peers) <= 8
    pre: 1 <= page_size <= 8
    post: all(p != RELEASED for p in peers)
    post: page_size > 1 or len(set(slots)) == len(slots)
    raises: ContractViolation
    """
    if page_size == 1 and len(set(slots)) != len(slots):
        raise ContractViolation("SWA-11", f"{call}: a slot appears twice in {list(slots)} "
                                          "(SWA double release)")
    for slot, peer in zip(slots, peers):
        if peer == RELEASED:
            raise ContractViolation(
                "SWA-11", f"{call}: slot {slot} has no SWA peer (released already: SWA double release)")


def check_peers_released(slots: Sequence[int], peers: Sequence[int], call: str) -> None:
    """``free_full`` / ``free_full_segment(s)``: every slot's SWA peer is gone (``SWA-12``).

    pre: len(slots) == len(peers) <= 8
    post: all(p == RELEASED for p in peers)
    raises: ContractViolation
    """
    for slot, peer in zip(slots, peers):
        if peer != RELEASED:
            raise ContractViolation(
                "SWA-12", f"{call}: slot {slot} still has SWA peer {peer}; free it with free()")


def check_swa_last_loc(prefix_lens: Sequence[int], seq_lens: Sequence[int],
                       swa_last_loc: Sequence[int], page_size: int) -> None:
    """A request that continues a partial page continues its SWA peer too (``SWA-8``).

    ``swa_last_loc`` is ``translate(last_loc)``. When ``prefix % ps != 0`` and the request
    grows, the SWA side's part 1 writes after it; a released peer would make it write into the
    padding page (bug B8b). Aligned prefixes read no ``last_loc`` on either side.

    pre: len(seq_lens) == len(prefix_lens) == len(swa_last_loc) <= 4
    pre: 1 <= page_size <= 8
    post: all(p % page_size == 0 or s <= p or loc != RELEASED for p, s, loc in zip(prefix_lens, seq_lens, swa_last_loc))
    raises: ContractViolation
    """
    for i, (pre, seq, loc) in enumerate(zip(prefix_lens, seq_lens, swa_last_loc)):
        if pre % page_size and seq > pre and loc == RELEASED:
            raise ContractViolation(
                "SWA-8", f"request {i}: last_loc continues a partial page whose SWA peer is "
                         "released")


def check_swa_tail(prefix_lens: Sequence[int], seq_lens: Sequence[int], extend_num_tokens: int,
                   swa_tail_len: int, page_size: int) -> int:
    """``alloc_extend_swa_tail``: one request, ``0 <= swa_tail_len <= extend_num_tokens``, and
    the tail starts on a page boundary (``(seq - swa_tail_len) % ps == 0``), so the tail's full
    slots and its fresh SWA pages page in step (``SWA-20``; SGLang's PD-decode caller asserts
    the boundary after the call). Returns the SWA pages the tail needs.

    pre: len(prefix_lens) <= 4 and len(seq_lens) <= 4
    pre: 0 <= extend_num_tokens <= 64
    pre: -4 <= swa_tail_len <= 64
    pre: all(0 <= s <= 64 for s in seq_lens)
    pre: 1 <= page_size <= 8
    post: __return__ * page_size >= swa_tail_len >= 0
    post: (seq_lens[0] - swa_tail_len) % page_size == 0
    raises: ContractViolation
    """
    if len(seq_lens) != 1 or len(prefix_lens) != 1:
        raise ContractViolation("SWA-20", f"alloc_extend_swa_tail takes one request, got "
                                          f"{len(seq_lens)} seq_lens, {len(prefix_lens)} prefix_lens")
    if not 0 <= swa_tail_len <= extend_num_tokens:
        raise ContractViolation("SWA-20", f"swa_tail_len {swa_tail_len} is not within "
                                          f"[0, extend_num_tokens {extend_num_tokens}]")
    if (seq_lens[0] - swa_tail_len) % page_size:
        raise ContractViolation("SWA-20", f"the SWA tail of {counted(swa_tail_len, 'token')} starts at "
                                          f"position {seq_lens[0] - swa_tail_len}, not on a page "
                                          f"boundary (page size {page_size})")
    return -(-swa_tail_len // page_size)


def check_translate(slots: Sequence[int], full_status_of: StatusOf, page_size: int,
                    num_pages: int) -> None:
    """``translate_loc_from_full_to_swa``: each index is ``-1`` or a full slot the caller holds
    (``SWA-16``); a slot on a free or staged full page has no meaning to translate.

    pre: len(slots) <= 8
    pre: 1 <= page_size <= 8
    pre: 0 <= num_pages <= 16
    post: all(s == -1 or 1 <= s // page_size <= num_pages for s in slots)
    raises: ContractViolation
    """
    for slot in slots:
        if slot == -1:
            continue
        try:
            page = check_slot(slot, page_size, num_pages)
        except ContractViolation as err:
            raise ContractViolation("SWA-16", f"translate: {err.detail}") from None
        if full_status_of(page) in (FREE, STAGED):
            raise ContractViolation(
                "SWA-16", f"translate: slot {slot} is on full page {page}, which is "
                          f"{full_status_of(page)}")


def mapping_census(pairs: Iterable[tuple[int, int]], *, page_size: int,
                   full_status_of: StatusOf, swa_status_of: StatusOf, swa_num_pages: int,
                   swa_deferred: Sequence[int]) -> list[str]:
    """Violations of the mapping invariants ``SWA-2..4`` (empty when healthy).

    ``pairs`` are the mapped ``(full_slot, swa_slot)`` entries; ``swa_deferred`` the SWA pages
    that the open free group will release. Checks: both slots lie on held pages at the same
    offset (``SWA-2``); no SWA slot mapped twice, full pages map one-to-one onto SWA pages
    (``SWA-3``); every held SWA page is a mapped peer page or deferred, each once (``SWA-4``).

    pre: 1 <= page_size <= 8
    pre: 0 <= swa_num_pages <= 16
    post: isinstance(__return__, list)
    """
    problems: list[str] = []
    swa_of_full: dict[int, int] = {}
    full_of_swa: dict[int, int] = {}
    seen: set[int] = set()
    for full, swa in pairs:
        if full_status_of(full // page_size) in (FREE, STAGED):
            problems.append(f"SWA-2: full slot {full} is mapped but its page is free")
        if not 1 <= swa // page_size <= swa_num_pages or swa_status_of(swa // page_size) in (FREE, STAGED):
            problems.append(f"SWA-2: full slot {full} maps to SWA slot {swa}, which is not held")
        if full % page_size != swa % page_size:
            problems.append(f"SWA-2: full slot {full} and SWA slot {swa} differ in page offset")
        if swa in seen:
            problems.append(f"SWA-3: SWA slot {swa} is mapped twice")
        seen.add(swa)
        fp, sp = full // page_size, swa // page_size
        if swa_of_full.setdefault(fp, sp) != sp or full_of_swa.setdefault(sp, fp) != fp:
            problems.append(f"SWA-3: full page {fp} and SWA page {sp} do not page in step")
    deferred = list(swa_deferred)
    if len(set(deferred)) != len(deferred):
        problems.append(f"SWA-4: an SWA page is deferred twice in {sorted(deferred)}")
    held = {p for p in range(1, swa_num_pages + 1) if swa_status_of(p) not in (FREE, STAGED)}
    accounted = set(full_of_swa) | set(deferred)
    if accounted & set(deferred) & set(full_of_swa):
        problems.append("SWA-4: an SWA page is both mapped and deferred")
    if held != accounted:
        problems.append(f"SWA-4: held SWA pages {sorted(held - accounted)} have no mapped peer "
                        f"(leak); {sorted(accounted - held)} are mapped or deferred but not held")
    return problems
