"""W5: a deterministic serving trace, replayed on each implementation.

The trace is generated once per page size in plain Python (no allocator involved), so every
implementation replays exactly the same calls. Each step of the scheduler model:

1. requests that finished in the previous step are released inside one free group;
2. waiting requests are admitted while the model's page budget covers their whole lifetime
   (so no replay can run out of pages);
3. prefilling requests get chunks of their prompt under a per-step token budget: one batched
   ``alloc_extend`` (ps 1: one token ``alloc`` of the chunk total, split per request);
4. every running request past its prompt decodes one token: one batched ``alloc_decode``
   (ps 1: ``alloc(batch)``).

Only allocator calls are timed (building the small length tensors and keeping the rows is the
same harness work for everyone and is left out). vLLM maps to one ``get_new_blocks(n)`` per
request that needs pages and one ``free_blocks`` per finished request (what its
``KVCacheManager`` issues); requests with nothing to allocate make no call. The ``floor`` row is
one numpy operation per step writing as many int64 values as the step's allocations return.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class TraceParams:
    """Shape of the synthetic load for one page size."""

    max_running: int
    prompt: tuple[int, int]
    output: tuple[int, int]
    chunk_budget_tokens: int
    arrivals_per_step: float


PARAMS = {
    1: TraceParams(64, (8, 48), (4, 24), 256, 3.0),
    16: TraceParams(128, (64, 480), (16, 160), 2048, 1.2),
}


@dataclass
class Step:
    """One scheduler step: finished rids, prefill chunks (rid, prefix, seq), decoding rids."""

    finish: list[int]
    extend: list[tuple[int, int, int]]
    decode: list[int]


def make_trace(ps: int, num_steps: int, budget_pages: int, seed: int = 7) -> list[Step]:
    """The deterministic trace for page size ``ps`` (a key of ``PARAMS``).

    ``budget_pages`` bounds the pages all admitted requests may ever hold together.
    """
    p = PARAMS[ps]
    rng = random.Random(seed + ps)
    waiting: list[tuple[int, int, int]] = []  # rid, prompt, output
    running: dict[int, list[int]] = {}  # rid -> [done_tokens, prompt, total, pages_reserved]
    used_pages = 0
    next_rid = 0
    finishing: list[int] = []
    steps: list[Step] = []
    for _ in range(num_steps):
        finish = finishing
        for rid in finish:
            used_pages -= running.pop(rid)[3]
        arrivals = int(p.arrivals_per_step) + (rng.random() < p.arrivals_per_step % 1)
        for _ in range(arrivals):
            waiting.append((next_rid, rng.randint(*p.prompt), rng.randint(*p.output)))
            next_rid += 1
        while waiting and len(running) < p.max_running:
            rid, prompt, output = waiting[0]
            pages = -(-(prompt + output) // ps)
            if used_pages + pages > budget_pages:
                break
            waiting.pop(0)
            used_pages += pages
            running[rid] = [0, prompt, prompt + output, pages]
        extend: list[tuple[int, int, int]] = []
        decode: list[int] = []
        budget = p.chunk_budget_tokens
        finishing = []
        for rid, st in running.items():
            done, prompt, total, _ = st
            if done < prompt:
                if budget <= 0:
                    continue
                take = min(prompt - done, budget)
                budget -= take
                extend.append((rid, done, done + take))
                st[0] = done + take
            else:
                decode.append(rid)
                st[0] = done + 1
            if st[0] == total:
                finishing.append(rid)
        steps.append(Step(list(finish), extend, decode))
    return steps


def summary(per_step_s: list[float]) -> dict[str, float | int]:
    """Median of 10 window means (µs per step), overall mean, spread."""
    n = len(per_step_s)
    windows = 10 if n >= 10 else 1
    size = n // windows
    means = [statistics.fmean(per_step_s[i * size:(i + 1) * size]) * 1e6
             for i in range(windows)]
    return {"median_us": statistics.median(means), "mean_us": statistics.fmean(per_step_s) * 1e6,
            "min_us": min(means), "max_us": max(means), "steps_per_window": size,
            "windows": windows}


def _mix(digest: int, out: torch.Tensor) -> int:
    """Fold an allocation result into a running digest (equal digests: equal call results)."""
    return (digest * 1_000_003 + int(out.sum()) * 31 + int(out.numel())) % (1 << 61)


def replay(alloc: Any, trace: list[Step], ps: int,
           device: str = "cpu") -> Generator[float, None, int]:
    """Replay ``trace`` on an SGLang-API allocator, yielding allocator seconds per step.

    Returns (as the generator's value) a digest of every allocation result, so that two
    implementations of one order can be checked to have given the same slots.
    """
    rows: dict[int, list[torch.Tensor]] = {}
    decoded: dict[int, list[int]] = {}
    last: dict[int, int] = {}
    length: dict[int, int] = {}  # tokens in each request's row
    digest = 0
    clock = time.perf_counter
    for step in trace:
        spent = 0.0
        if step.finish:
            frees = []
            for rid in step.finish:
                parts = rows.pop(rid)
                tail = decoded.pop(rid)
                if tail:
                    parts.append(torch.tensor(tail, dtype=torch.int64, device=device))
                frees.append(torch.cat(parts))
                last.pop(rid)
                length.pop(rid)
            t0 = clock()
            alloc.free_group_begin()
            for row in frees:
                alloc.free(row)
            alloc.free_group_end()
            spent += clock() - t0
        if step.extend:
            n_tok = sum(s - p for _, p, s in step.extend)
            if ps == 1:
                t0 = clock()
                out = alloc.alloc(n_tok)
                spent += clock() - t0
            else:
                pre = torch.tensor([p for _, p, _ in step.extend], dtype=torch.int64)
                seq = torch.tensor([s for _, _, s in step.extend], dtype=torch.int64)
                ll = torch.tensor([last.get(r, -1) for r, _, _ in step.extend],
                                  dtype=torch.int64, device=device)
                pre_d, seq_d = pre.to(device), seq.to(device)
                t0 = clock()
                out = alloc.alloc_extend(pre_d, pre, seq_d, seq, ll, n_tok)
                spent += clock() - t0
            if out is None:
                raise RuntimeError("trace ran out of pages")
            digest = _mix(digest, out)
            off = 0
            for rid, p, s in step.extend:
                # this request's slots are out[off, off + s - p)
                chunk = out[off:off + s - p]
                off += s - p
                rows.setdefault(rid, []).append(chunk)
                decoded.setdefault(rid, [])
                last[rid] = int(chunk[-1])
                length[rid] = s
        if step.decode:
            if ps == 1:
                t0 = clock()
                out = alloc.alloc(len(step.decode))
                spent += clock() - t0
            else:
                seq = torch.tensor([length[r] + 1 for r in step.decode], dtype=torch.int64)
                ll = torch.tensor([last[r] for r in step.decode], dtype=torch.int64,
                                  device=device)
                seq_d = seq.to(device)
                t0 = clock()
                out = alloc.alloc_decode(seq_d, seq, ll)
                spent += clock() - t0
            if out is None:
                raise RuntimeError("trace ran out of pages")
            digest = _mix(digest, out)
            for rid, slot in zip(step.decode, out.tolist(), strict=True):
                decoded[rid].append(slot)
                last[rid] = slot
                length[rid] += 1
        yield spent
    return digest


def replay_vllm(pool: Any, trace: list[Step], ps: int) -> Generator[float, None, int]:
    """Replay ``trace`` on a vLLM ``BlockPool``, yielding pool seconds per step (digest 0)."""
    blocks: dict[int, list[Any]] = {}
    length: dict[int, int] = {}
    clock = time.perf_counter
    try:
        for step in trace:
            spent = 0.0
            for rid in step.finish:
                bl = blocks.pop(rid)
                length.pop(rid)
                t0 = clock()
                pool.free_blocks(reversed(bl))
                spent += clock() - t0
            for rid, p, s in step.extend:
                n = -(-s // ps) - -(-p // ps)
                length[rid] = s
                blocks.setdefault(rid, [])
                if n:
                    t0 = clock()
                    got = pool.get_new_blocks(n)
                    spent += clock() - t0
                    blocks[rid].extend(got)
            for rid in step.decode:
                if length[rid] % ps == 0:  # the new token starts a page
                    t0 = clock()
                    got = pool.get_new_blocks(1)
                    spent += clock() - t0
                    blocks[rid].extend(got)
                length[rid] += 1
            yield spent
    finally:
        for bl in blocks.values():
            pool.free_blocks(bl)
    return 0


def replay_floor(trace: list[Step], ps: int) -> Generator[float, None, int]:
    """The output floor of each step: one numpy operation writing as many int64 values as the
    step's allocations return (its prefill tokens plus its decode batch); digest 0."""
    src = np.arange(max((sum(s - p for _, p, s in st.extend) + len(st.decode) for st in trace),
                        default=0), dtype=np.int64)
    clock = time.perf_counter
    for step in trace:
        view = src[:sum(s - p for _, p, s in step.extend) + len(step.decode)]
        t0 = clock()
        np.add(view, 1)
        yield clock() - t0
    return 0


def w5_trace(cfg: Any) -> Any:
    """W5 cases: the trace for each pool size, page size (1: token, 16: paged) and need_sort.

    ``cfg`` is a ``benchmarks.workloads.Config``. Each case's ``make()`` returns a generator of
    allocator seconds per step (``Case.lockstep``): the runner advances the cases of one pool
    size step by step in turn, so that every implementation sees the same load drift.
    """
    from benchmarks.adapters import make_allocator
    from benchmarks.workloads import Case

    budget = min(cfg.sizes) // 2 - 64
    for ps in cfg.page_sizes:
        if ps not in PARAMS:
            continue
        kind = "token" if ps == 1 else "paged"
        trace = make_trace(ps, cfg.trace_steps, budget)
        variant = f"steps={len(trace)}"
        for num_pages in cfg.sizes:
            for ns in cfg.need_sorts:
                for name, module in cfg.impls.items():
                    def make(module: Any = module, n: int = num_pages, ns: bool = ns,
                             ps: int = ps, kind: str = kind, trace: list[Step] = trace) -> Any:
                        a = make_allocator(module, kind, n, ps, ns, cfg.device)
                        held = a.alloc((n // 2) * ps)
                        gen = replay(a, trace, ps, cfg.device)
                        return gen, lambda: held
                    yield Case("w5_trace", variant, kind, ps, ns, num_pages, name, make,
                               lockstep=True)
            if cfg.device == "cpu":
                def fmake(ps: int = ps, trace: list[Step] = trace) -> Any:
                    return replay_floor(trace, ps), None
                yield Case("w5_trace", variant, kind, ps, None, num_pages, "floor", fmake,
                           lockstep=True)
            if cfg.vllm is not None:
                def vmake(n: int = num_pages, ps: int = ps, trace: list[Step] = trace) -> Any:
                    return replay_vllm(cfg.vllm.get(n), trace, ps), None
                yield Case("w5_trace", variant, kind, ps, None, num_pages, "vllm", vmake,
                           lockstep=True)


def replay_in_turn(gens: dict[str, Generator[float, None, int]],
                   num_steps: int) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Advance :func:`replay` generators one step each in turn (the order flipped every step,
    so that drift in the machine's load falls on all of them alike) until each has returned:
    the seconds of every step per name, and each one's digest."""
    names = list(gens)
    times: dict[str, list[float]] = {name: [] for name in names}
    digests: dict[str, int] = {}
    for turn in range(num_steps + 1):
        for name in (names if turn % 2 == 0 else names[::-1]):
            try:
                times[name].append(next(gens[name]))
            except StopIteration as stop:
                digests[name] = int(stop.value or 0)
    return times, digests

