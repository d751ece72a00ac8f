"""SGLang 0.5.23's unified full + Mamba composite beside ``UnifiedMambaModel``, call for call.

:func:`run` drives both with one seeded random sequence (allocs, extends of fresh and growing
rows, decodes at page size > 1, frees and segment frees of whole requests in any order, free
groups, state slot allocs and frees, ``prepare_mamba_allocation``, lazy ``flush_opportunistic``
and a move gate, ``clear``) and compares after every call: results, the token and state views,
the recheck bound, state slot ids, each end's frontier and hole count, and the physical row of
every live token (both compaction modes: the model places as SGLang does). It returns the
mismatches found.
"""

from __future__ import annotations

import random
from typing import Any

import torch
from kvpool.oracle.families.unified_mamba.peer import ENTRY_BYTES, STATE_BYTES, build_unified_mamba
from kvpool.spec.unified_mamba import UnifiedMambaModel


def pair(total_bytes: int, page_size: int, lazy: bool) -> tuple[Any, UnifiedMambaModel]:
    """SGLang's composite and the model over the same whole buffer."""
    theirs = build_unified_mamba(total_bytes=total_bytes, page_size=page_size, lazy=lazy)
    return theirs, UnifiedMambaModel(theirs.unified_buffer.total_bytes, page_size, ENTRY_BYTES,
                                     STATE_BYTES, lazy=lazy)


def _t(xs: list[int]) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.int64)


def _ids(x: Any) -> list[int] | None:
    return None if x is None else [int(v) for v in x.tolist()]


def observe(a: Any, m: UnifiedMambaModel, live: list[int]) -> dict[str, Any]:
    """What the two show, side by side: ``{name: (sglang's, model's)}``."""
    fa, ma = a.full_attn_allocator, a.mamba_allocator
    out = {
        "available_size": (int(a.available_size()), m.available_size()),
        "full_available_size": (int(a.full_available_size()), m.full_available_size()),
        "size": (int(a.size), m.size()),
        "mamba_available": (int(ma.available_size()), m.state_available_size()),
        "mamba_schedulable": (int(ma.schedulable_available_size()), m.state_schedulable_size()),
        "recheck_3": (int(a.full_tokens_before_mamba_recheck(3)),
                      m.full_tokens_before_mamba_recheck(3)),
        "full_frontier": (int(fa.watermark_physical), m.full.watermark),
        "state_frontier": (int(ma.watermark_physical), m.state.watermark),
        "full_holes": (int(fa._free_phys_pages.numel()), len(m.full.holes)),
        "state_holes": (int(ma._free_phys_pages.numel()), len(m.state.holes)),
        "free_virtual": (_ids(fa.free_virtual_ids), m.free_virtual),
        "free_state": (_ids(ma.free_virtual_ids), m.free_state_ids),
        "census_empty": (not a.verify_byte_accounting(), not m.census()),
    }
    if live:
        out["rows"] = (_ids(a.translate_kv_loc(_t(live))), m.translate(live))
    return out


class Run:
    """One seeded sequence on one geometry."""

    def __init__(self, seed: int, total_bytes: int, page_size: int, lazy: bool) -> None:
        self.rng = random.Random(seed)
        self.a, self.m = pair(total_bytes, page_size, lazy)
        self.ps, self.lazy = page_size, lazy
        self.reqs: list[list[int]] = []
        self.slots: list[int] = []
        self.gate = [True]
        self.gated = False
        self.mismatches: list[str] = []
        self.steps = 0

    def live(self) -> list[int]:
        return [t for r in self.reqs for t in r]

    def check(self, what: str, theirs: Any = None, ours: Any = None) -> None:
        self.steps += 1
        seen = observe(self.a, self.m, self.live())
        seen["result"] = (theirs, ours)
        bad = {k: v for k, v in seen.items() if v[0] != v[1]}
        if bad:
            self.mismatches.append(f"step {self.steps} {what}: {bad}")
        self.m.check_invariants()

    def step(self) -> None:
        r, a, m, ps = self.rng, self.a, self.m, self.ps
        kind = r.choice(["alloc", "extend", "extend", "decode", "free", "segment", "group",
                         "state", "state", "state_free", "prepare", "flush", "gate", "clear"])
        if kind == "alloc":
            n = r.randint(0, max(1, m.available_size() // ps + 2)) * ps
            got = (_ids(a.alloc(n)), m.alloc(n))
            if got[1]:
                self.reqs.append(list(got[1]))
            self.check(f"alloc({n})", *got)
        elif kind in ("extend", "decode"):
            if kind == "decode" and (ps == 1 or not self.reqs):
                return
            grow = [q for q in self.reqs if q and r.random() < 0.5]
            fresh = r.randint(0 if grow else 1, 2) if kind == "extend" else 0
            rows = grow + [[] for _ in range(fresh)]
            pre = [len(q) for q in rows]
            seq = [p + (r.randint(1, 3 * ps) if kind == "extend" else 1) for p in pre]
            last = [q[-1] if q else -1 for q in rows]
            if kind == "extend":
                theirs = a.alloc_extend(_t(pre), _t(pre), _t(seq), _t(seq), _t(last),
                                        sum(seq) - sum(pre))
                ours = m.alloc_extend(pre, seq, last)
            else:
                theirs = a.alloc_decode(_t(seq), _t(seq), _t(last))
                ours = m.alloc_decode(seq, last)
            got = (_ids(theirs), ours)
            if ours is not None:
                pos = 0
                for q, p, s in zip(rows, pre, seq, strict=True):
                    q.extend(ours[pos:pos + s - p])
                    pos += s - p
                self.reqs += [q for q in rows[len(grow):]]
            self.check(f"{kind}({pre}->{seq}, last={last})", *got)
        elif kind in ("free", "segment") and self.reqs:
            q = self.reqs.pop(r.randrange(len(self.reqs)))
            if kind == "free" or len(q) <= ps:
                if r.random() < 0.5:
                    r.shuffle(q)  # a free names its ids in any order
                a.free(_t(q))
                m.free(q)
                self.check(f"free({q})")
            else:
                start = r.randint(1, (len(q) - 1) // ps) * ps
                tail = q[start:]
                a.free_segment(_t(tail), start_pos=start)
                m.free_segment(tail, start)
                self.reqs.append(q[:start])
                self.check(f"free_segment({tail}, {start})")
        elif kind == "group" and self.reqs:
            a.free_group_begin()
            m.free_group_begin()
            for _ in range(r.randint(1, 3)):
                if not self.reqs:
                    break
                q = self.reqs.pop(r.randrange(len(self.reqs)))
                if ps > 1 and len(q) > ps and r.random() < 0.5:
                    start = r.randint(1, (len(q) - 1) // ps) * ps
                    a.free_segment(_t(q[start:]), start_pos=start)
                    m.free_segment(q[start:], start)
                    self.reqs.append(q[:start])
                else:
                    r.shuffle(q)
                    a.free(_t(q))
                    m.free(q)
                if r.random() < 0.3:
                    a.prepare_mamba_allocation(1)
                    m.prepare_mamba_allocation(1)
            a.free_group_end()
            m.free_group_end()
            self.check("free group")
        elif kind == "state":
            got = (_ids(a.mamba_allocator.alloc(1)), m.alloc_state(1))
            if got[1]:
                self.slots += got[1]
            self.check("alloc_state(1)", *got)
        elif kind == "state_free" and self.slots:
            k = r.randint(1, len(self.slots))
            r.shuffle(self.slots)
            gone, self.slots = self.slots[:k], self.slots[k:]
            a.mamba_allocator.free(_t(gone))
            m.free_state(gone)
            self.check(f"free_state({gone})")
        elif kind == "prepare":
            n = r.randint(1, 4)
            a.prepare_mamba_allocation(n)
            m.prepare_mamba_allocation(n)
            self.check(f"prepare_mamba_allocation({n})")
        elif kind == "flush" and self.lazy:
            self.check("flush_opportunistic", int(a.flush_opportunistic()),
                       m.flush_opportunistic())
        elif kind == "gate" and self.lazy:
            if not self.gated:
                a.set_disagg_move_gate(lambda: self.gate[0])
                self.gated = True
            self.gate[0] = not self.gate[0]
            m.set_move_gate(self.gate[0])
            self.check(f"gate({self.gate[0]})")
        elif kind == "clear" and r.random() < 0.2:
            a.clear()
            m.clear()
            self.reqs, self.slots = [], []
            self.check("clear")


def run(seed: int, total_bytes: int, page_size: int, lazy: bool,
        steps: int) -> tuple[int, list[str]]:
    """One sequence of ``steps`` calls; returns (calls compared, mismatches)."""
    x = Run(seed, total_bytes, page_size, lazy)
    x.check("construction")
    for _ in range(steps):
        x.step()
        if x.mismatches:
            break
    return x.steps, x.mismatches
