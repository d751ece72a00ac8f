"""The mirrored call stream of a shard group: what every rank's allocator is fed, generated
from a seed (standard library ``random``) with the spec model beside it so that every call is
valid, and applied to an allocator by the family's call table.

A call is a dict: ``{"call": name, **arguments}`` in the call table's terms
(:data:`~kvpool.oracle.families.page_interleave.calls.PAGE_INTERLEAVE_CALLS`). The stream opens
new chains (base left to the allocator, sometimes named), extends chains from their phase,
places chains with ``alloc_cyclic``, frees chains whole or their tail pages, groups frees and
merges the release lists; a chain the allocator refuses is not held.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from kvpool.spec.page_interleave_model import PageInterleaveModel

from .calls import PAGE_INTERLEAVE_CALLS

Stream = list[dict[str, Any]]


@dataclass(frozen=True)
class Shape:
    """One shard group's pool: ``ranks`` ranks of ``size`` slots each, page size, need_sort."""

    ranks: int
    page_size: int = 4
    size: int = 64
    need_sort: bool = False

    def spec(self) -> PageInterleaveModel:
        """A fresh spec model of this shape."""
        return PageInterleaveModel(self.size, self.page_size, self.ranks, self.need_sort)


def _extend(rng: random.Random, shape: Shape, chains: list[dict[str, Any]]) -> dict[str, Any]:
    ps, n = shape.page_size, shape.ranks
    requests: list[list[int]] = []
    bases: list[int | None] = []
    picked: list[dict[str, Any] | None] = []
    for _ in range(rng.randint(1, 3)):
        chain = rng.choice(chains) if chains and rng.random() < 0.3 else None
        if chain is not None and any(chain is c for c in picked):
            chain = None
        prefix = len(chain["pages"]) * ps if chain is not None else 0
        base = chain["base"] if chain is not None else (
            rng.randrange(n) if rng.random() < 0.15 else None)
        requests.append([prefix, prefix + rng.randint(1, 3 * n * ps)])
        bases.append(base)
        picked.append(chain)
    return {"call": "alloc_extend", "requests": requests, "bases": bases, "chains": picked}


def generate(shape: Shape, num_calls: int, seed: int) -> Stream:
    """``num_calls`` valid calls for a pool of ``shape``, the same for the same seed."""
    rng, model = random.Random(seed), shape.spec()
    chains: list[dict[str, Any]] = []
    stream: Stream = []
    ps = shape.page_size
    while len(stream) < num_calls:
        roll = rng.random()
        if roll < 0.4:
            call = _extend(rng, shape, chains)
            picked = call.pop("chains")
            slots, resolved = model.alloc_extend([tuple(r) for r in call["requests"]],
                                                 call["bases"])
            at = 0
            for (prefix, seq), base, chain in zip(call["requests"], resolved, picked):
                part, at = (slots or [])[at:at + seq - prefix], at + seq - prefix
                if slots is None:
                    continue
                if chain is None:
                    chain = {"base": base, "pages": [], "slots": []}
                    chains.append(chain)
                chain["pages"] += list(dict.fromkeys(s // ps for s in part))
                chain["slots"] += part
        elif roll < 0.5:
            call = {"call": "alloc_cyclic", "start_class": rng.randrange(shape.ranks),
                    "need_size": rng.randint(1, 2 * shape.ranks * ps)}
            slots = model.alloc_cyclic(call["start_class"], call["need_size"])
            if slots is not None:
                chains.append({"base": call["start_class"],
                               "pages": list(dict.fromkeys(s // ps for s in slots)),
                               "slots": slots})
        elif roll < 0.8 and chains:
            chain = chains[rng.randrange(len(chains))]
            keep = rng.randint(0, len(chain["pages"]) - 1) if rng.random() < 0.3 else 0
            if keep:
                dropped = set(chain["pages"][keep:])
                slots = [s for s in chain["slots"] if s // ps in dropped]
                chain["pages"] = chain["pages"][:keep]
                chain["slots"] = [s for s in chain["slots"] if s // ps not in dropped]
            else:
                chains.remove(chain)
                slots = chain["slots"]
            call = {"call": "free", "slots": slots}
            model.free(slots)
        elif roll < 0.9:
            name = "free_group_end" if model.pending is not None else "free_group_begin"
            call = {"call": name}
            getattr(model, name)()
        else:
            call = {"call": "merge_and_sort_free"}
            model.merge_and_sort_free()
        stream.append(call)
    return stream


def apply(alloc: Any, call: dict[str, Any]) -> Any:
    """Make ``call`` on ``alloc`` (the family's call table); its result as plain values:
    ``[slots or None, resolved bases]`` for an allocation, None otherwise."""
    args = {k: v for k, v in call.items() if k != "call"}
    result, _ = PAGE_INTERLEAVE_CALLS[call["call"]].target(alloc, args, "cpu")
    if result is None:
        return None
    slots = result[0]
    return [None if slots is None else [int(s) for s in slots.tolist()], result[1]]
