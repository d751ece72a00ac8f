"""One random sequence of requests, window releases and state slots, driven through kvpool's
unified pool inside SGLang and SGLang's own side by side, with signatures in SGLang's buffers.

A token's signature is written into layer 0's K row of each token side (two int16 elements), a
state slot's into the first eight bytes of its Mamba entry; after every call every live one must
read back through kvpool's translations from kvpool's bundle, and the two pools' results and
``views(alloc, page_size)`` must agree."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import torch


class Bytes:
    """Signatures in the buffers of one SGLang pool bundle driven by ``alloc``."""

    def __init__(self, bundle: Any, alloc: Any) -> None:
        self.alloc, self.kv = alloc, bundle.token_to_kv_pool
        self.state_pool = bundle.req_to_token_pool.mamba_pool
        self.slots = bundle.req_to_token_pool.mamba_allocator

    def _rows(self, ids: torch.Tensor, side: str) -> tuple[torch.Tensor, torch.Tensor]:
        if side == "full":
            return self.kv.full_kv_pool.k_buffer[0], self.alloc.translate_kv_loc(ids)
        return self.kv.swa_kv_pool.k_buffer[0], self.alloc.translate_loc_from_full_to_swa(ids)

    def write_tokens(self, ids: torch.Tensor, side: str) -> None:
        buffer, rows = self._rows(ids, side)
        pair = torch.stack((ids % 30000, ids // 30000), 1)
        buffer.view(torch.int16)[rows, 0, :2] = pair.to(torch.int16)

    def read_tokens(self, ids: torch.Tensor, side: str) -> list[int]:
        buffer, rows = self._rows(ids, side)
        pair = buffer.view(torch.int16)[rows, 0, :2].to(torch.int64)
        return (pair[:, 0] + pair[:, 1] * 30000).tolist()  # type: ignore[no-any-return]

    def _entries(self, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.state_pool._entry_view(), self.slots.translate(slots)

    def write_state(self, slots: torch.Tensor) -> None:
        entries, physical = self._entries(slots)
        entries[physical, :8] = (1000 + slots).to(torch.int64).view(torch.uint8).view(-1, 8)

    def read_state(self, slots: torch.Tensor) -> list[int]:
        entries, physical = self._entries(slots)
        return entries[physical, :8].contiguous().view(torch.int64).view(-1).tolist()  # type: ignore[no-any-return]


def drive(build: Callable[[bool], tuple[Any, Any]], views: Callable[[Any], tuple[Any, ...]], *,
          seed: int, ps: int, steps: int, swa: bool, break_state_moves: bool = False) -> int:
    """``build(kvpool)`` gives a pool bundle and its allocator (kvpool's inside SGLang, or
    SGLang's own); both run one random sequence (``swa``: with window releases). Returns the
    state slot copies kvpool's issued. ``break_state_moves`` drops them (a broken pool).

    Raises:
        AssertionError: at the first difference or lost signature, naming the step.
    """
    rng = random.Random(seed)
    (ours_b, ours), (theirs_b, theirs) = build(True), build(False)
    moved = [0]
    state_pool = ours_b.req_to_token_pool.mamba_pool
    move = state_pool.move_physical_pages

    def counting(dst: torch.Tensor, src: torch.Tensor, page_size: int) -> None:
        moved[0] += len(dst)
        if not break_state_moves:
            move(dst, src, page_size)

    state_pool.move_physical_pages = counting
    data, sides = Bytes(ours_b, ours), ("full", "swa") if swa else ("full",)
    pools = ((ours_b, ours), (theirs_b, theirs))
    rows: list[tuple[torch.Tensor, int]] = []  # a request's ids and its window-released tokens
    states: list[torch.Tensor] = []
    for step in range(steps):
        pick, where = rng.random(), f"seed {seed} step {step}"
        if pick < 0.35:
            need = rng.randrange(1, 24) * ps
            got = [a.alloc(need) for _, a in pools]
            assert (got[0] is None) == (got[1] is None), where
            if got[0] is not None:
                assert got[0].tolist() == got[1].tolist(), where
                for side in sides:
                    data.write_tokens(got[0], side)
                rows.append((got[0], 0))
        elif pick < 0.55 and rows:
            ids, _ = rows.pop(rng.randrange(len(rows)))
            for _, a in pools:
                a.free(ids.sort().values)
        elif pick < 0.7 and rows and swa:
            k = rng.randrange(len(rows))
            ids, done = rows[k]
            upto = min(len(ids), done + rng.randrange(1, 4) * ps)
            if upto > done:
                for _, a in pools:
                    a.free_swa(ids[done:upto].sort().values)
                rows[k] = (ids, upto)
        elif pick < 0.88:
            count = rng.randrange(1, 4)
            got = [b.req_to_token_pool.mamba_allocator.alloc(count) for b, _ in pools]
            assert (got[0] is None) == (got[1] is None), where
            if got[0] is not None:
                assert got[0].tolist() == got[1].tolist(), where
                data.write_state(got[0])
                states.append(got[0])
        elif states:
            slots = states.pop(rng.randrange(len(states))).sort().values
            for b, _ in pools:
                b.req_to_token_pool.mamba_allocator.free(slots)
        assert views(ours) == views(theirs), f"{where}: views or hooks differ"
        for ids, done in rows:
            assert data.read_tokens(ids, "full") == ids.tolist(), f"{where}: full K/V"
            if swa:
                live = ids[done:]
                assert data.read_tokens(live, "swa") == live.tolist(), f"{where}: SWA K/V"
        for slots in states:
            assert data.read_state(slots) == (1000 + slots).tolist(), f"{where}: state"
        assert ours.verify_byte_accounting() == []
    return moved[0]
