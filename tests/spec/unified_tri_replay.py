"""Random call sequences on SGLang's tri-pool, its capacity views compared with the float chain's.

``replay(page_size, lazy, seed, steps)`` builds SGLang's ``UnifiedMambaSWATokenToKVPoolAllocator``
(``build_tri_pool``) and drives it with ``alloc``, ``alloc_extend`` of fresh rows, ``free_swa``
of a window prefix, ``free``, and state-slot ``alloc(1)`` / ``free`` on its mamba end (as SGLang's
request pool does); after every call its five capacity views must equal
``kvpool.spec.unified_float.capacity_views`` of its frontiers, and ``can_reserve`` of random
unequal demands ``fits_on_chain`` (``UNI-14``). A planted chain that
ignores the state end's bytes must disagree somewhere, or the run did not exercise them.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any


def replay(page_size: int, lazy: bool, seed: int, steps: int) -> dict[str, Any]:
    """Problems found (``step call: detail``), steps with a live float / live state slots, and
    the steps where ignoring the state end's bytes would change a view."""
    import torch
    from kvpool.oracle.families.unified.float_views import chain_of, observed_views, view_problems
    from kvpool.spec.unified_float import capacity_views, fits_on_chain
    from unified_peer import load

    fixtures = load()
    fixtures.setup_allocator_context()
    _, target = fixtures.build_tri_pool(page_size=page_size, lazy=lazy)
    rng = random.Random(seed)
    ps = page_size
    rows: list[list[int]] = []
    released: list[int] = []
    states: list[Any] = []
    out: dict[str, Any] = {"problems": [], "float_live": 0, "state_live": 0, "state_matters": 0,
                           "refused": 0, "holes": 0, "reserve_fits": 0}

    def t(xs: list[int]) -> Any:
        return torch.tensor(xs, dtype=torch.int64)

    for step in range(steps):
        op = rng.choice(["alloc", "extend", "free", "free_swa", "state", "state_free"])
        if op == "alloc":
            got = target.alloc(rng.randint(1, 6) * ps)
            if got is not None:
                rows.append(got.tolist())
                released.append(0)
            out["refused"] += got is None
        elif op == "extend":
            seq = [rng.randint(1, 5 * ps) for _ in range(rng.randint(1, 2))]
            bs = len(seq)
            got = target.alloc_extend(t([0] * bs), t([0] * bs), t(seq), t(seq), t([-1] * bs),
                                      sum(seq))
            if got is not None:
                ids = got.tolist()
                for n in seq:
                    rows.append(ids[:n])
                    released.append(0)
                    ids = ids[n:]
            out["refused"] += got is None
        elif op == "free" and rows:
            i = rng.randrange(len(rows))
            released.pop(i)
            target.free(t(rows.pop(i)))
        elif op == "free_swa" and rows:
            i = rng.randrange(len(rows))
            upto = len(rows[i]) // ps * ps - ps
            if upto > released[i]:
                target.free_swa(t(rows[i][released[i]:upto]))
                released[i] = upto
        elif op == "state":
            slot = target.mamba_allocator.alloc(1)
            if slot is not None:
                states.append(slot)
        elif op == "state_free" and states:
            target.mamba_allocator.free(states.pop(rng.randrange(len(states))))
        chain = chain_of(target)
        out["float_live"] += not chain.transparent
        out["state_live"] += bool(states)
        out["holes"] += bool(chain.swa_holes or chain.full_holes or chain.state_holes)
        blind = chain._replace(state_high_byte=0)
        out["state_matters"] += capacity_views(blind) != observed_views(target)
        out["problems"] += [f"{step} {op}: {p}" for p in view_problems(target)]
        for _ in range(3):  # can_reserve: the same fit for unequal demands
            f, w = rng.randint(0, 40), rng.randint(0, 40)
            if target.can_reserve(f * ps, w * ps) != fits_on_chain(chain, f, w):
                out["problems"].append(f"{step} {op}: can_reserve({f * ps}, {w * ps}) is "
                                       f"{not fits_on_chain(chain, f, w)}")
            out["reserve_fits"] += fits_on_chain(chain, f, w)
    return out


def main() -> None:
    from unified_peer import load_or_exit

    load_or_exit()
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 150
    result = {f"ps{ps}_{'lazy' if lazy else 'eager'}": replay(ps, lazy, seed, steps)
              for ps in (1, 4) for lazy in (False, True) for seed in (0,)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
