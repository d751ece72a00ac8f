"""One row of a family's call table (:class:`Call`) and what the engine does with slot arguments.

A call's arguments are plain values in the spec's terms (``Args``: ints and lists of ints, as a
:class:`~kvpool.oracle.engine.trace.TraceStep` stores them). A family's table (single pool:
:mod:`kvpool.oracle.families.single.calls`; hybrid: :mod:`kvpool.oracle.families.hybrid.calls`)
maps each call name to a :class:`Call`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .callforms import Args

MAX_HELD = 64  # returned tensors re-checked after every step (the most recent ones)


@dataclass(frozen=True)
class Call:
    """One allocator call (see the module docstring). ``kind``: alloc, free, cache or state."""

    name: str
    kind: str
    params: tuple[str, ...]
    spec: Callable[[Any, Args], Any]  # the family's spec model (AllocatorModel, HybridModel)
    target: Callable[[Any, Args, str], tuple[Any, list[torch.Tensor]]]
    source: Callable[[Args, str], list[str]]
    raise_clause: str
    order_clause: str
    result_clause: str | None = None
    checks: Callable[[Args, Any, str], list[str]] | None = None
    reuse: str | None = None
    slot_args: tuple[str, ...] = ()
    # the model's positional arguments (``params`` order) as the table's: defaults, unwrapping
    from_model: Callable[[dict[str, Any]], dict[str, Any]] | None = None


def map_slots(
    args: Args, names: Sequence[str], slot: Callable[[int], int], page_size: int = 1
) -> dict[str, Any]:
    """``args`` with every slot in the arguments ``names`` passed through ``slot``.

    Slot arguments are lists of slots (``free_index``, ``last_loc``, ``kv_indices``), lists of
    ``[slots, start_pos]`` (``segments``), lists of slot lists (``entries``) or page ids
    (``page_ids``: page ``p`` follows its first slot ``p * page_size``).
    """
    out = dict(args)
    for name in names:
        value = args.get(name)
        if value is None:
            continue
        if name == "segments":
            out[name] = [[[slot(s) for s in idx], start] for idx, start in value]
        elif name == "entries":
            out[name] = [[slot(s) for s in e] for e in value]
        elif name == "page_ids":
            out[name] = [slot(p * page_size) // page_size for p in value]
        else:
            out[name] = [slot(s) for s in value]
    return out
