"""Micro workloads W1-W4: one allocator call pattern each, every implementation side by side.

A workload yields ``Case`` objects; the runner builds the cases of one row group (same
workload, variant, allocator kind, page size and pool size) together and times them with
interleaved windows. Set-up shared by all: a fresh allocator per case, then half of the pool
held so that free lists are pool-sized. vLLM has no ``need_sort``; its cases carry
``need_sort=None`` and are paired with both kvpool settings.

- W1 ``alloc_free``: ``x = alloc(k pages); free(x)``, k in ``Config.ks``.
- W2 ``decode``: batch 256. ``new_page``: every request crosses into a new page
  (``alloc_decode`` with ``seq = ps + 1``) then ``free`` of the 256 new slots; ``no_new_page``:
  ``seq = 3``, no page taken. At ps 1 the token allocator's ``alloc(256)`` + ``free`` (what
  SGLang runs for ps 1). vLLM: batched ``get_new_blocks(256)`` + ``free_blocks``.
- W3 ``extend``: ``alloc_extend`` for 64 requests with mixed, unaligned prefix / extend lengths;
  only the call is timed, the new pages are given back untimed. vLLM: one
  ``get_new_blocks(n_i)`` per request. ``floor``: one numpy operation writing as many int64
  values as the call returns (:func:`output_floor`).
- W4 ``free_row``: a 32k-token row (ps 16, 2048 pages) freed by ``free`` (unique) or by
  ``free_segments`` with 4 page-aligned segments; only the free is timed, the row is taken
  again untimed. vLLM: ``free_blocks`` of its 2048 blocks.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from benchmarks.adapters import (
    VllmPools,
    make_allocator,
    vllm_extend,
    vllm_free_row,
    vllm_round_trip,
)
from benchmarks.timing import Settings, Step, measure

DECODE_BATCH = 256
EXTEND_BATCH = 64
ROW_TOKENS = 32 * 1024
ROW_SEGMENTS = 4


@dataclass
class Config:
    """What to run: pool sizes (pages), page sizes, need_sort values, implementations."""

    sizes: list[int]
    page_sizes: list[int]
    need_sorts: list[bool]
    ks: list[int]
    settings: Settings
    impls: dict[str, Any]  # name -> module with SGLang's allocator API
    vllm: VllmPools | None
    device: str = "cpu"
    trace_steps: int = 10_000
    measure: Callable[[Step, Settings], Any] = measure


@dataclass
class Case:
    """One measured cell: its row key, its implementation, and how to build its step.

    ``make()`` builds the allocator state and returns ``(step, cleanup)``; the state lives in the
    step's closure until the runner drops it. ``cleanup`` (or None) is called when the group is
    done (it gives back what a shared vLLM pool lent).
    """

    workload: str
    variant: str
    kind: str
    page_size: int
    need_sort: bool | None
    num_pages: int
    impl: str
    make: Callable[[], tuple[Any, Callable[[], Any] | None]] = field(repr=False)
    lockstep: bool = False  # make() returns a generator of seconds per step (W5)
    across_sizes: bool = False  # interleave this row over all pool sizes (W1: P scaling)

    def group(self) -> tuple[Any, ...]:
        """Cases with the same group are timed together (interleaved)."""
        size = None if self.across_sizes else self.num_pages
        return (self.workload, self.variant, self.kind, self.page_size, size)

    def record(self, sample: Any) -> dict[str, Any]:
        """A result record: the row key, the implementation and the sample's fields."""
        return {"workload": self.workload, "variant": self.variant, "kind": self.kind,
                "page_size": self.page_size, "need_sort": self.need_sort,
                "num_pages": self.num_pages, "impl": self.impl, **sample.as_dict()}


def kinds(page_sizes: list[int]) -> list[tuple[str, int]]:
    """Allocator kinds per page size: ps 1 runs the token and the paged allocator."""
    out: list[tuple[str, int]] = []
    for ps in page_sizes:
        if ps == 1:
            out.append(("token", 1))
        out.append(("paged", ps))
    return out


def _fresh(cfg: Config, module: Any, kind: str, num_pages: int, ps: int, ns: bool,
           hold_pages: int) -> tuple[Any, Any]:
    """A new allocator with ``hold_pages`` pages held; returns (allocator, held slots)."""
    a = make_allocator(module, kind, num_pages, ps, ns, cfg.device)
    return a, a.alloc(hold_pages * ps)


def _each_impl(cfg: Config) -> Iterator[tuple[str, Any, bool]]:
    for ns in cfg.need_sorts:
        for name, module in cfg.impls.items():
            yield name, module, ns


def w1_alloc_free(cfg: Config) -> Iterator[Case]:
    """W1: alloc(k pages) + free round trip with half the pool held.

    The cells of one (kind, ps, k) are interleaved over every pool size too, so that the
    10^6 / 10^4 ratio of one implementation is measured under one load.
    """
    for kind, ps in kinds(cfg.page_sizes):
        for k in cfg.ks:
            for num_pages in cfg.sizes:
                for name, module, ns in _each_impl(cfg):
                    def make(module: Any = module, kind: str = kind, n: int = num_pages,
                             ps: int = ps, ns: bool = ns, k: int = k) -> Any:
                        a, held = _fresh(cfg, module, kind, n, ps, ns, n // 2)

                        def step() -> None:
                            a.free(a.alloc(k * ps))
                            _ = held
                        return step, None
                    yield Case("w1_alloc_free", f"k={k}", kind, ps, ns, num_pages, name, make,
                               across_sizes=True)
                if cfg.vllm is not None:
                    yield Case("w1_alloc_free", f"k={k}", kind, ps, None, num_pages, "vllm",
                               vllm_round_trip(cfg.vllm, num_pages, k), across_sizes=True)


def w2_decode(cfg: Config) -> Iterator[Case]:
    """W2: one decode step at batch 256 (see the module docstring)."""
    bs = DECODE_BATCH
    for num_pages in cfg.sizes:
        for ps in cfg.page_sizes:
            kind = "token" if ps == 1 else "paged"
            variants = [("new_page", ps + 1)] + ([("no_new_page", 3)] if ps > 2 else [])
            for variant, seq in variants:
                for name, module, ns in _each_impl(cfg):
                    def make(module: Any = module, kind: str = kind, n: int = num_pages,
                             ps: int = ps, ns: bool = ns, seq: int = seq) -> Any:
                        a, held = _fresh(cfg, module, kind, n, ps, ns, n // 2)
                        if ps == 1:
                            def tstep() -> None:
                                a.free(a.alloc(bs))
                                _ = held
                            return tstep, None
                        base = a.alloc(bs * ps)
                        pages = (base[::ps] // ps).clone()
                        seq_cpu = torch.full((bs,), seq, dtype=torch.int64)
                        seq_dev = seq_cpu.to(cfg.device)
                        # each request owns one page; its last slot is at offset seq - 2
                        last_loc = pages * ps + (seq - 2)
                        new_page = seq == ps + 1

                        def dstep() -> None:
                            out = a.alloc_decode(seq_dev, seq_cpu, last_loc)
                            if new_page:
                                a.free(out)
                            _ = held, base
                        return dstep, None
                    yield Case("w2_decode", variant, kind, ps, ns, num_pages, name, make)
                if cfg.vllm is not None and variant == "new_page":
                    yield Case("w2_decode", variant, kind, ps, None, num_pages, "vllm",
                               vllm_round_trip(cfg.vllm, num_pages, bs))


def extend_batch(ps: int, seed: int = 1234) -> tuple[list[int], list[int]]:
    """Deterministic prefix / sequence lengths for W3: mixed, unaligned, a quarter fresh."""
    rng = random.Random(seed * 31 + ps)
    # ps 16: ≈ 8k new tokens in all, SGLang's default chunked-prefill budget (8192)
    max_prefix, max_extend = (60, 60) if ps == 1 else (1000, 256)
    prefix = [0 if rng.random() < 0.25 else rng.randint(1, max_prefix)
              for _ in range(EXTEND_BATCH)]
    seq = [p + rng.randint(1, max_extend) for p in prefix]
    return prefix, seq


def extend_inputs(alloc: Any, prefix: list[int], seq: list[int],
                  device: str) -> tuple[list[Any], tuple[Any, ...]]:
    """Take each request's prefix pages from ``alloc`` and build ``alloc_extend``'s arguments.

    Returns the prefix rows (keep them alive: they own the pages) and the positional arguments
    ``(prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc, extend_num_tokens)``,
    where ``last_loc`` is each prefix's last slot (-1 for a fresh request).
    """
    ps = alloc.page_size
    rows = [alloc.alloc(-(-p // ps) * ps) if p else None for p in prefix]
    last = [int(r[p - 1]) if p else -1 for r, p in zip(rows, prefix, strict=True)]
    pre_cpu = torch.tensor(prefix, dtype=torch.int64)
    seq_cpu = torch.tensor(seq, dtype=torch.int64)
    last_d = torch.tensor(last, dtype=torch.int64, device=device)
    return rows, (pre_cpu.to(device), pre_cpu, seq_cpu.to(device), seq_cpu, last_d,
                  sum(seq) - sum(prefix))


def new_page_positions(prefix: list[int], seq: list[int], ps: int) -> torch.Tensor:
    """Flat indices into an alloc_extend result of the slots that lie on new pages."""
    idx: list[int] = []
    flat = 0
    for p, s in zip(prefix, seq, strict=True):
        # positions [p, s); those in [ceil_page(p), s) are on pages the request did not own
        first_new = -(-p // ps) * ps
        for pos in range(p, s):
            if pos >= first_new:
                idx.append(flat)
            flat += 1
    return torch.tensor(idx, dtype=torch.int64)


def w3_extend(cfg: Config) -> Iterator[Case]:
    """W3: alloc_extend for 64 requests with mixed prefix / extend lengths."""
    for num_pages in cfg.sizes:
        for ps in cfg.page_sizes:
            prefix, seq = extend_batch(ps)
            new_pages = [-(-s // ps) - -(-p // ps) for p, s in zip(prefix, seq, strict=True)]
            for name, module, ns in _each_impl(cfg):
                def make(module: Any = module, n: int = num_pages, ps: int = ps,
                         ns: bool = ns) -> Any:
                    return w3_step(module, n, ps, ns, cfg.device)[0], None
                yield Case("w3_extend", f"bs={EXTEND_BATCH}", "paged", ps, ns, num_pages, name,
                           make)
            if cfg.vllm is not None:
                yield Case("w3_extend", f"bs={EXTEND_BATCH}", "paged", ps, None, num_pages,
                           "vllm", vllm_extend(cfg.vllm, num_pages, new_pages))
            if cfg.device == "cpu":
                yield Case("w3_extend", f"bs={EXTEND_BATCH}", "paged", ps, None, num_pages,
                           "floor", output_floor(sum(seq) - sum(prefix)))


def w3_step(module: Any, num_pages: int, ps: int, need_sort: bool,
            device: str) -> tuple[Step, tuple[Any, ...]]:
    """W3's step on a fresh allocator of ``module``: one timed ``alloc_extend`` of
    :func:`extend_batch`, then an untimed free of its new pages (the state is the same after
    every step). Returns the step and the ``alloc_extend`` arguments it passes."""
    prefix, seq = extend_batch(ps)
    new_pages = [-(-s // ps) - -(-p // ps) for p, s in zip(prefix, seq, strict=True)]
    a = make_allocator(module, "paged", num_pages, ps, need_sort, device)
    rows, args = extend_inputs(a, prefix, seq, device)
    spare = a.available_size() // ps - 2 * sum(new_pages) - EXTEND_BATCH
    held = a.alloc(max(0, min(num_pages // 2, spare)) * ps)
    new_pos = new_page_positions(prefix, seq, ps).to(device)

    def estep() -> float:
        t0 = time.perf_counter()
        out = a.alloc_extend(*args)
        t = time.perf_counter() - t0
        a.free(out[new_pos])
        _ = held, rows
        return t
    return estep, args


def output_floor(num_tokens: int) -> Callable[[], tuple[Step, None]]:
    """The output floor of a call that returns ``num_tokens`` slots: one vectorised numpy
    operation (``np.add(x, 1)`` into a new array) writing ``num_tokens`` int64 values."""
    def make() -> tuple[Step, None]:
        src = np.arange(num_tokens, dtype=np.int64)

        def fstep() -> float:
            t0 = time.perf_counter()
            np.add(src, 1)
            return time.perf_counter() - t0
        return fstep, None
    return make


def w4_free_row(cfg: Config) -> Iterator[Case]:
    """W4: free a 32k-token row at ps 16 by free (unique) vs free_segments (4 segments)."""
    ps = 16
    row_pages = ROW_TOKENS // ps
    seg = ROW_TOKENS // ROW_SEGMENTS
    if ps not in cfg.page_sizes:
        return
    for num_pages in cfg.sizes:
        if num_pages < 2 * row_pages:
            continue
        for variant in ("free", "free_segments"):
            for name, module, ns in _each_impl(cfg):
                def make(module: Any = module, n: int = num_pages, ns: bool = ns,
                         segmented: bool = variant == "free_segments") -> Any:
                    a, held = _fresh(cfg, module, "paged", n, ps, ns, n // 2)
                    state = {"row": a.alloc(ROW_TOKENS)}

                    def fstep() -> float:
                        row = state["row"]
                        t0 = time.perf_counter()
                        if segmented:
                            # segments [i*seg, (i+1)*seg) of the row, page-aligned starts
                            a.free_segments([(row[i * seg:(i + 1) * seg], i * seg)
                                             for i in range(ROW_SEGMENTS)])
                        else:
                            a.free(row)
                        t = time.perf_counter() - t0
                        state["row"] = a.alloc(ROW_TOKENS)
                        _ = held
                        return t
                    return fstep, None
                yield Case("w4_free_row", variant, "paged", ps, ns, num_pages, name, make)
            if cfg.vllm is not None and variant == "free":
                yield Case("w4_free_row", variant, "paged", ps, None, num_pages, "vllm",
                           vllm_free_row(cfg.vllm, num_pages, row_pages))
