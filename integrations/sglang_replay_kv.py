"""The serving replay with real KV bytes: SGLang's own KV pool on the CPU, written as a forward
pass writes it, and every live request's K/V checked after every scheduler step.

The allocator under test is built over SGLang 0.5.23's ``MHATokenToKVPool`` (:func:`mha_pool`: a
few layers, one head, ``head_dim`` 8, float32 or bfloat16, on the CPU) or its ``SWAKVPool``.
After each ``alloc_for_extend`` / ``alloc_for_decode`` the replay (:class:`KVForward`) writes
every new token's K and V at its ``out_cache_loc`` through the pool's own ``set_kv_buffer``
(SGLang's write path; a hybrid pool translates full slots to SWA slots itself). What it writes is
the token's *signature*: eight byte-sized values (exact in bfloat16) from a hash of the sequence
up to and including the token -- what a real K/V depends on -- and its position, so a prefix
shared through the radix cache holds the same signature whichever request computed it.

After every step :meth:`KVForward.check` reads, for every live request (running or between
prefill chunks), the K and V of every position it holds, through its ``req_to_token`` row (and,
for a sliding-window layer, the allocator's ``translate_loc_from_full_to_swa``; positions whose
SWA slot the window released are not read there), and :meth:`KVForward.check_tree` every token
the radix cache holds for later requests; both raise :class:`KVMismatch` naming the position,
slot and layer whose bytes are not its signature.

Needs :func:`kvpool.oracle.peers.peer_import.load_sglang_runtime` first, and ``einops`` (the
``sglang`` extra): SGLang's ``set_kv_buffer`` imports a module that needs it.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import torch
from sglang.srt.mem_cache.memory_pool import KVWriteLoc, MHATokenToKVPool

__all__ = ["KVForward", "KVMismatch", "mha_pool", "signatures"]

NUM_LAYERS = 2  # layers of the pools the replay builds
HEAD_DIM = 8  # one signature per head: eight byte-sized values


class KVMismatch(AssertionError):
    """A live request's K/V at one position is not what was written there."""


def mha_pool(pool_tokens: int, page_size: int, dtype: torch.dtype = torch.float32,
             num_layers: int = NUM_LAYERS) -> Any:
    """SGLang's ``MHATokenToKVPool`` for ``pool_tokens`` tokens on the CPU (one head of
    ``HEAD_DIM``)."""
    return MHATokenToKVPool(pool_tokens, page_size, dtype, 1, HEAD_DIM, num_layers, "cpu", False)


def _hashes(tokens: Sequence[int], stop: int) -> list[int]:
    """The running hash of ``tokens[:p + 1]`` for every position ``p < stop``."""
    out, h = [], 0
    for token in tokens[:stop]:
        h = zlib.crc32(int(token).to_bytes(4, "little"), h)
        out.append(h)
    return out


def signatures(tokens: Sequence[int], start: int, stop: int, layer: int) -> torch.Tensor:
    """The K signature of positions ``start..stop-1`` of ``tokens`` in ``layer``:
    ``(stop - start, 1, HEAD_DIM)`` float32, every value an integer in 0..255 (V is
    ``255 - K``). Raises ValueError when ``tokens`` is shorter than ``stop``."""
    if len(tokens) < stop:
        raise ValueError(f"{len(tokens)} tokens, positions up to {stop} asked")
    hashes = _hashes(tokens, stop)
    rows = [[h & 255, h >> 8 & 255, h >> 16 & 255, h >> 24 & 255, p & 255, p >> 8 & 255,
             layer & 255, 7] for p, h in enumerate(hashes[start:], start)]
    return torch.tensor(rows, dtype=torch.float32).reshape(-1, 1, HEAD_DIM)


def _tokens(req: Any) -> list[int]:
    """The request's sequence: its prompt, then what it sampled."""
    return [*req.origin_input_ids, *req.output_ids]


class KVForward:
    """The forward pass's K/V writes and the check of every live request (module docstring).

    ``held`` maps a request id to the number of leading positions whose K/V it holds.
    """

    def __init__(self, allocator: Any) -> None:
        self.allocator = allocator
        self.pool = allocator.get_kvcache()
        if self.pool is None:
            raise ValueError("the allocator has no KV cache (build it over mha_pool)")
        self.layers = list(range(self.pool.layer_num))
        self.swa_layers = {lid for lid, (_, swa) in
                           getattr(self.pool, "layers_mapping", {}).items() if swa}
        # a unified pool (SGLang's UnifiedSWAKVPool) is written and read at physical rows
        self.physical = bool(getattr(getattr(self.pool, "full_kv_pool", None),
                                     "requires_physical_write_loc", False))
        self.held: dict[str, int] = {}
        self.writes = 0

    def _rows(self, layer: int, locs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(kept, rows)``: which of the virtual slots ``locs`` ``layer`` holds and the rows
        of its buffers they are at: an SWA layer's through ``translate_loc_from_full_to_swa``
        (a slot the window released is not held), a unified pool's full layer through
        ``translate_kv_loc``, else the slots themselves."""
        if layer in self.swa_layers:
            rows = self.allocator.translate_loc_from_full_to_swa(locs)
            kept = rows > 0
            return kept, rows[kept]
        if self.physical:
            return torch.ones_like(locs, dtype=torch.bool), self.allocator.translate_kv_loc(locs)
        return torch.ones_like(locs, dtype=torch.bool), locs

    def _write(self, req: Any, start: int, stop: int, locs: torch.Tensor) -> None:
        tokens = _tokens(req)
        where: Any = locs
        if self.physical:  # a unified pool's write door takes physical rows only
            where = KVWriteLoc(self.allocator.translate_write_loc(locs),
                               swa_loc=self.allocator.translate_loc_from_full_to_swa(locs),
                               physical=True)
        elif self.swa_layers:  # the full and the SWA slots, as an attention backend hands them
            where = KVWriteLoc(locs, swa_loc=self.allocator.translate_loc_from_full_to_swa(locs))
        for layer in self.layers:
            k = signatures(tokens, start, stop, layer)
            self.pool.set_kv_buffer(SimpleNamespace(layer_id=layer), where, k, 255 - k)
        self.held[req.rid] = stop
        self.writes += stop - start

    def extend(self, reqs: Sequence[Any], out_cache_loc: torch.Tensor) -> None:
        """After ``alloc_for_extend``: each request's new positions ``prefix_len..extend_end``,
        at its part of ``out_cache_loc`` (requests in batch order)."""
        at = 0
        for req in reqs:
            n = req.extend_end - req.prefix_len
            self._write(req, req.prefix_len, req.extend_end, out_cache_loc[at:at + n])
            at += n

    def decode(self, reqs: Sequence[Any], out_cache_loc: torch.Tensor) -> None:
        """After ``alloc_for_decode``: each request's next position (the token it sampled last)
        at its slot of ``out_cache_loc``."""
        for i, req in enumerate(reqs):
            p = self.held[req.rid]
            self._write(req, p, p + 1, out_cache_loc[i:i + 1])

    def check(self, live: Sequence[Any], req_to_token: torch.Tensor) -> int:
        """Every position every live request holds carries its signature in every layer;
        returns the number of (position, layer) pairs read. Raises :class:`KVMismatch`."""
        read = 0
        for req in live:
            n = self.held.get(req.rid, 0)
            if n == 0:
                continue
            locs = req_to_token[req.kv.req_pool_idx, :n].to(torch.int64)
            tokens = _tokens(req)
            for layer in self.layers:
                kept, at = self._rows(layer, locs)
                positions = torch.arange(n)[kept]
                if len(at):
                    want = signatures(tokens, 0, n, layer)[positions]
                    read += self._compare(layer, at, want, positions, f"request {req.rid}")
        return read

    def check_tree(self, cache: Any) -> int:
        """Every token the radix cache holds (a node's ``value`` slots, its tokens the path
        from the root) carries its signature in every layer; returns the reads. A full
        attention pool's ``RadixCache``, or a unified pool's tree (SWA layers where the window
        still holds the slot); a static hybrid pool's nodes are read through its requests.
        Raises :class:`KVMismatch`."""
        if self.swa_layers and not self.physical:
            return 0
        try:
            root = cache.root_node
        except (AttributeError, NotImplementedError):  # a tree with no node objects to read
            return 0
        stack: list[tuple[Any, list[int]]] = [(root, [])]  # (node, the tokens on its path)
        read = 0
        while stack:
            node, prefix = stack.pop()
            for child in node.children.values():
                if child.value is None or child.key.is_bigram:  # evicted (and so its subtree)
                    continue
                tokens = [*prefix, *child.key.raw_token_ids()]
                locs = child.value.to(torch.int64)
                positions = torch.arange(len(prefix), len(tokens))
                for layer in self.layers:
                    kept, at = self._rows(layer, locs)
                    if len(at):
                        want = signatures(tokens, len(prefix), len(tokens), layer)[kept]
                        read += self._compare(layer, at, want, positions[kept],
                                              "the radix cache")
                stack.append((child, tokens))
        return read

    def _compare(self, layer: int, slots: torch.Tensor, want: torch.Tensor,
                 positions: torch.Tensor, whose: str) -> int:
        """K and V of ``slots`` in ``layer`` are ``want`` and ``255 - want``; returns how many
        were read. Raises :class:`KVMismatch` naming the first position that is not."""
        k_buf, v_buf = self._buffers(layer)
        got_k, got_v = k_buf[slots].float(), v_buf[slots].float()
        bad = ((got_k != want) | (got_v != 255 - want)).flatten(1).any(1)
        if bool(bad.any()):
            i = int(bad.nonzero()[0])
            raise KVMismatch(
                f"{whose} position {int(positions[i])} (slot {int(slots[i])}, layer {layer}): "
                f"K {got_k[i].flatten().tolist()}, written {want[i].flatten().tolist()}")
        return len(slots)

    def _buffers(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The K and V buffers ``layer``'s slots index (a hybrid pool's SWA ones by SWA slot)."""
        return self.pool.get_key_buffer(layer), self.pool.get_value_buffer(layer)
