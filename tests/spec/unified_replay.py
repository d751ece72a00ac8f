"""Random call sequences replayed on SGLang's unified SWA composite and on the model.

``replay(target, model, seed, steps)`` drives both with the same calls (alloc, alloc_extend of
fresh rows and of live rows from their prefix, alloc_decode at ``page_size > 1``, free_swa of a
window prefix, free) and yields, after each call, the call's name and both sides'
observations, for the peers test to compare. ``compare`` counts disagreements,
``probe_divergences`` runs the minimal sequences of SGLang's departures from the contract and
``tri_pool_chain`` checks the tri-pool's chain order.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from kvpool.spec.unified import UnifiedSWAModel


def observe(target: Any, model: UnifiedSWAModel, rows: list[list[int]]) -> dict[str, Any]:
    """What the contract fixes, from both: capacity views, census emptiness, translations."""
    import torch

    live = [t for row in rows for t in row]
    ids = torch.tensor(live, dtype=torch.int64)
    return {
        "ids": live,
        "target": {
            "available_size": target.available_size(),
            "full_available_size": target.full_available_size(),
            "swa_available_size": target.swa_available_size(),
            "healthy": not target.verify_byte_accounting(),
            "translate": target.translate_kv_indices_for_transfer(ids).tolist() if live else [],
            "translate_swa": target.translate_loc_from_full_to_swa(ids).tolist() if live else [],
        },
        "model": {
            "available_size": model.available_size(),
            "full_available_size": model.full_available_size(),
            "swa_available_size": model.swa_available_size(),
            "healthy": not model.census(),
            "translate": model.translate(live),
            "translate_swa": model.translate(live, "swa"),
        },
    }


def replay(target: Any, model: UnifiedSWAModel, seed: int,
           steps: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """Drive both with the same random calls; yield ``(call, observations)`` after each."""
    import torch

    def t(xs: list[int]) -> Any:
        return torch.tensor(xs, dtype=torch.int64)

    rng = random.Random(seed)
    ps = model.page_size
    rows: list[list[int]] = []      # live rows, token ids in position order
    released: list[int] = []        # per row: positions whose SWA pages were released
    for _ in range(steps):
        op = rng.choice(["alloc", "extend", "extend", "grow", "decode", "decode", "free",
                         "free_swa"])
        if op == "alloc":
            n = rng.randint(1, 4) * ps
            got, want = target.alloc(n), model.alloc(n)
            assert (got is None) == (want is None), (op, n)
            if got is not None:
                assert got.tolist() == want, (op, got.tolist(), want)
                rows.append(want)
                released.append(0)
        elif op == "extend":
            bs = rng.randint(1, 3)
            seq = [rng.randint(1, 6 * ps) for _ in range(bs)]
            got = target.alloc_extend(t([0] * bs), t([0] * bs), t(seq), t(seq), t([-1] * bs),
                                      sum(seq))
            want = model.alloc_extend([0] * bs, seq, [-1] * bs)
            assert (got is None) == (want is None), (op, seq)
            if got is not None and want is not None:
                assert got.tolist() == want, (op, got.tolist(), want)
                for n in seq:
                    rows.append(want[:n])
                    released.append(0)
                    want = want[n:]
        elif op == "grow" and rows:                 # extend live rows from their prefix
            picked = rng.sample(range(len(rows)), rng.randint(1, min(2, len(rows))))
            prefix = [len(rows[i]) for i in picked]
            seq = [n + rng.randint(1, 3 * ps) for n in prefix]
            last = [rows[i][-1] for i in picked]
            got = target.alloc_extend(t(prefix), t(prefix), t(seq), t(seq), t(last),
                                      sum(seq) - sum(prefix))
            want = model.alloc_extend(prefix, seq, last)
            assert (got is None) == (want is None), (op, prefix, seq)
            if got is not None and want is not None:
                assert got.tolist() == want, (op, got.tolist(), want)
                for i, p, n in zip(picked, prefix, seq, strict=True):
                    rows[i].extend(want[: n - p])
                    want = want[n - p:]
        elif op == "decode" and rows and ps > 1:   # ps == 1 decodes through alloc(bs)
            picked = rng.sample(range(len(rows)), rng.randint(1, min(3, len(rows))))
            seq = [len(rows[i]) + 1 for i in picked]
            last = [rows[i][-1] for i in picked]
            got = target.alloc_decode(t(seq), t(seq), t(last))
            want = model.alloc_decode(seq, last)
            assert (got is None) == (want is None), (op, seq)
            if got is not None and want is not None:
                assert got.tolist() == want, (op, got.tolist(), want)
                for i, slot in zip(picked, want, strict=True):
                    rows[i].append(slot)
        elif op == "free" and rows:
            i = rng.randrange(len(rows))
            row = rows.pop(i)
            released.pop(i)
            target.free(t(row))
            model.free(row)
        elif op == "free_swa" and rows:
            i = rng.randrange(len(rows))
            upto = len(rows[i]) // ps * ps - ps   # whole pages, the last page kept
            if upto > released[i]:
                part = rows[i][released[i]:upto]
                target.free_swa(t(part))
                model.free_swa(part)
                released[i] = upto
        yield op, observe(target, model, rows)


def placement_problems(ids: list[int], rows: list[int], page_size: int,
                       min_page: int) -> list[str]:
    """What must hold of a translation whose placement the contract leaves free (lazy hole
    reuse, UNI-5): distinct rows, the in-page offset kept, every row above the sink."""
    out = []
    if len(set(rows)) != len(rows):
        out.append("two live tokens share a row")
    if any(r % page_size != t % page_size for t, r in zip(ids, rows, strict=True)):
        out.append("a token changed its in-page offset")
    if any(r // page_size < min_page for r in rows):
        out.append("a live token reads the sink")
    return out


def compare(page_size: int, lazy: bool, seeds: range, steps: int) -> dict[str, Any]:
    """Replay ``seeds`` on fresh pairs; count calls and list every disagreement where the
    contract fixes the answer (eager: everything; lazy: all but the placement, which is judged
    by ``placement_problems``)."""
    from unified_peer import build

    calls: dict[str, int] = {}
    mismatches: list[str] = []
    moves = 0
    for seed in seeds:
        target, model = build(page_size, lazy)
        for step, (op, seen) in enumerate(replay(target, model, seed, steps)):
            calls[op] = calls.get(op, 0) + 1
            got, want = seen["target"], seen["model"]
            for key in want:
                if key.startswith("translate") and lazy:
                    bound = [i for i, row in enumerate(want[key]) if row != 0]
                    problems = placement_problems(
                        [seen["ids"][i] for i in bound], [got[key][i] for i in bound],
                        page_size, model.full.min_page if key == "translate" else
                        model.swa.min_page)
                    if [r == 0 for r in got[key]] != [r == 0 for r in want[key]]:
                        problems.append("released SWA pages differ")
                    mismatches += [f"seed {seed} step {step} {op}: {key}: {p}" for p in problems]
                elif got[key] != want[key]:
                    mismatches.append(f"seed {seed} step {step} {op}: {key} {got[key]} != "
                                      f"{want[key]}")
        moves += len(model.full.moves) + len(model.swa.moves)
    return {"calls": calls, "mismatches": mismatches, "model_moves": moves}


def probe_divergences() -> dict[str, Any]:
    """The minimal sequences on which SGLang 0.5.23's unified SWA composite departs from the
    contract (UNI-8, UNI-11, UNI-13), with what it does instead."""
    import torch
    from unified_peer import build

    out: dict[str, Any] = {}
    target, _ = build(1, False)                         # alloc_decode at page_size 1
    target.alloc(3)
    got = target.alloc_decode(torch.tensor([4]), torch.tensor([4]), torch.tensor([3]))
    fa = target.full_attn_allocator
    out["decode_ps1"] = {"returned": got.tolist(), "bound": fa.is_slot_allocated(4),
                         "still_free": 4 in fa.free_virtual_ids.tolist()}
    for lazy in (False, True):                          # translating a freed id
        target, _ = build(1, lazy)
        row = target.alloc(2)
        target.free(row[:1])
        out[f"translate_freed_lazy_{lazy}"] = target.translate_kv_indices_for_transfer(
            row[:1]).tolist()
    target, _ = build(1, True)                          # double free under lazy compaction
    row = target.alloc(2)
    target.free(row[:1])
    target.free(row[:1])
    fa = target.full_attn_allocator
    out["lazy_double_free"] = {
        "verify_byte_accounting": target.verify_byte_accounting(),
        "free_ids_tail": fa.free_virtual_ids[-2:].tolist(),
        "holes": fa._free_phys_pages.tolist(),
        "live_page_count": fa.live_page_count,
    }
    target, _ = build(1, False)                         # a stale v2p entry, planted
    row = target.alloc(2)
    fa = target.full_attn_allocator
    fa.virtual_to_physical[int(row[0])] = fa.virtual_to_physical[int(row[1])]
    out["stale_v2p_verify"] = target.verify_byte_accounting()
    target, _ = build(1, False)                         # double free, eager: refused untyped
    row = target.alloc(2)
    target.free(row[:1])
    try:
        target.free(row[:1])
        out["eager_double_free"] = "accepted"
    except AssertionError:
        out["eager_double_free"] = "AssertionError"
    return out


def main() -> None:
    """Print, as JSON, ``compare`` for page sizes 1 and 4, eager and lazy, and the probes.
    Exit 3 when SGLang cannot be imported."""
    import json
    import sys

    from unified_peer import load_or_exit

    load_or_exit()
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 150
    result: dict[str, Any] = {
        f"ps{ps}_{'lazy' if lazy else 'eager'}": compare(ps, lazy, range(3), steps)
        for ps in (1, 4) for lazy in (False, True)
    }
    result["divergences"] = probe_divergences()
    result["tri_pool"] = {f"ps{ps}_{'lazy' if lazy else 'eager'}": tri_pool_chain(ps, lazy, 0,
                                                                                  steps)
                          for ps in (1, 4) for lazy in (False, True)}
    print(json.dumps(result))



def tri_pool_chain(page_size: int, lazy: bool, seed: int, steps: int) -> dict[str, Any]:
    """SGLang's tri-pool (mamba up, SWA float, full down) under random ``alloc`` / ``free``:
    after each call, ``unified_layout.bands_ordered`` over its bands in chain order (a
    transparent float as an empty band) must agree with the absence of a ``[chain]`` line in
    its ``verify_byte_accounting()``, and no live band may reach into the reserved sink."""
    from kvpool.spec import unified_layout as ul
    from unified_peer import load

    fixtures = load()
    fixtures.setup_allocator_context()
    _, target = fixtures.build_tri_pool(page_size=page_size, lazy=lazy)
    members = {m.grow_direction: m for m in (target.full_attn_allocator,
                                             target.swa_attn_allocator)}
    members.update({m.grow_direction: m for m in vars(target).values()
                    if hasattr(m, "_byte_low_frontier") and m.grow_direction == "up"})
    chain = [members["up"], members["float"], members["down"]]
    floor = chain[0].unified_buffer._reserved_floor
    rng = random.Random(seed)
    rows: list[Any] = []
    problems: list[str] = []
    float_used = 0

    def bands() -> list[tuple[int, int]]:
        return [(0, 0) if m._is_frontier_transparent() else
                (m._byte_low_frontier(), m._byte_high_frontier()) for m in chain]

    def chain_ok() -> bool:
        return not any("[chain]" in line for line in target.verify_byte_accounting())

    for step in range(steps):
        if rows and rng.random() < 0.4:
            target.free(rows.pop(rng.randrange(len(rows))))
        else:
            row = target.alloc(rng.randint(1, 6) * page_size)
            if row is not None:
                rows.append(row)
        now = bands()
        float_used += now[1][0] < now[1][1]
        if ul.bands_ordered(now) != chain_ok():
            problems.append(f"step {step}: bands {now}, SGLang's chain check {chain_ok()}")
        if any(low < floor for low, high in now if low < high):
            problems.append(f"step {step}: a band reaches into the sink: {now}")
    # planted: the float's span pushed one page into the full pool's band; both must object
    flt, full = chain[1], chain[2]
    if not flt._is_frontier_transparent():
        flt.high_wm_page = full._byte_low_frontier() // flt.entry_bytes_per_page + 1
    planted = {"bands_ordered": ul.bands_ordered(bands()), "sglang_chain_ok": chain_ok()}
    return {"problems": problems, "float_used_steps": float_used, "planted_overlap": planted}


if __name__ == "__main__":
    main()
