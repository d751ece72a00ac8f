"""Driving a unified composite's state end as SGLang's request pool does.

Shared by the composites with a Mamba state end (:class:`~.unified_tri.UnifiedMambaSWAAllocator`,
:class:`~.unified_mamba.UnifiedMambaAllocator`), whose ``set_state_slots(count)`` hook (the
introspection protocol's, :mod:`kvpool.spec.unified_state`) is :func:`set_state_slots`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__ = ["set_state_slots", "take_state_slots"]


def set_state_slots(pool: Any, count: int) -> None:
    """Take or release state slots on ``pool`` (its ``state`` end, ``free_state_slots``,
    ``prepare_state_allocation``, ``alloc_state``) until ``count`` are live: the lowest live
    slots released first, one at a time; the missing ones prepared, then taken one at a time
    until one is refused."""
    live = np.flatnonzero(pool.state.v2p >= 0)
    for slot in live[:max(0, len(live) - count)]:
        pool.free_state_slots(torch.tensor([int(slot)]))
    missing = count - len(live)
    if missing > 0:
        pool.prepare_state_allocation(missing)
    for _ in range(missing):
        if pool.alloc_state(1) is None:
            return


def take_state_slots(pool: Any, count: int, relieve: Callable[[], None]) -> torch.Tensor | None:
    """``count`` state slot ids from ``pool.free_state`` in order, bound on ``pool.state``
    past its frontier (or on its holes, lazy); when they do not fit the state end's view now
    (``pool.state_available_size()``), ``relieve()`` runs first. None, nothing handed out,
    when they still do not fit or the free ids are short."""
    if count <= 0:
        return torch.empty(0, dtype=torch.int64)
    if count > pool.state_available_size():
        relieve()
        if count > pool.state_available_size():
            return None
    if count > len(pool.free_state):
        return None
    ids, pool.free_state = pool.free_state[:count], pool.free_state[count:]
    pool.state.bind(ids, pool.state.take(count), pool.state.last_run)
    return torch.from_numpy(ids.copy())
