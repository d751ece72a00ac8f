"""The oracle's data plane: a signature in the KV bytes of every slot an allocation hands out.

With the plane on (``python -m kvpool.oracle --data-plane``, ``pytest --kvpool-data-plane``, the
environment variable :data:`ENV`, or a family executor's ``data_plane_default``), the engine
calls :func:`after_call` after every call it judged. The :class:`DataPlane` then

- ends the liveness of every slot the spec model no longer holds (freed, its SWA window
  released, the pool cleared): from then on its bytes may change;
- writes the signature (request, position) of every slot an allocation handed out into that
  slot's KV bytes (the request is the allocation's step index, the position the slot's index
  in the result), through the side's write translation where it has one (``DATA-2``: a slot
  still live is never handed out);
- reads every live slot back through the same translation and requires its signature
  (``DATA-1``);
- after an allocation, where the target reaches a KV cache (``get_cpu_copy`` /
  ``load_cpu_copy``), copies the new slots out, overwrites their bytes, loads the copy back to
  the same slots and requires the signatures again (``DATA-3``, the retract-and-resume path).

A *side* (:class:`Side`) is one KV buffer: its store, the liveness of an allocation's slot on it
(from the spec model), and the translation from that slot to the store's index. The single-pool
family has one side; the hybrid family two (full by full index; SWA through the target's
``translate_loc_from_full_to_swa``). A *store* is any object with ``write(slots, signatures)``
and ``read(slots) -> (n, 2) tensor``; :class:`TensorStore` is the harness-owned default for
targets without a KV buffer. A target whose ``_kvcache`` has no ``get_cpu_copy`` is given a
:class:`HarnessKVCache` over the plane's stores (every other attribute is its own cache's).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from kvpool.spec.contract import Divergence
from kvpool.spec.dataplane import KVSignatures
from kvpool.spec.rules import FREE, STAGED

__all__ = [
    "ENV", "DataPlane", "HarnessKVCache", "Side", "SlotStore", "TensorStore", "after_call",
    "live_slot", "requested",
]

ENV = "KVPOOL_ORACLE_DATA_PLANE"  # "1": every engine runs with the data plane on
POISON = -7  # what the harness writes over a slot between get_cpu_copy and load_cpu_copy


def requested() -> bool:
    """Whether the environment turns the data plane on (:data:`ENV` set, not ``0``)."""
    return os.environ.get(ENV, "0") not in ("", "0")


class SlotStore(Protocol):
    """KV bytes addressed by slot: ``write`` puts one (request, position) row per slot,
    ``read`` returns the rows of ``slots`` as an ``(n, 2)`` integer tensor."""

    def write(self, slots: torch.Tensor, signatures: torch.Tensor) -> None: ...

    def read(self, slots: torch.Tensor) -> torch.Tensor: ...


class TensorStore:
    """The harness's own KV bytes: one int64 (request, position) row per slot id, grown on
    demand (a resize may grow the pool). Row 0 is the padding slot; nothing reads it."""

    def __init__(self, num_slots: int = 0) -> None:
        self.rows = torch.zeros((num_slots, 2), dtype=torch.int64)

    def _fit(self, slots: torch.Tensor) -> None:
        if slots.numel() and int(slots.min()) < 0:
            raise IndexError(f"slot ids must be non-negative, got {slots.tolist()}")
        need = int(slots.max()) + 1 if slots.numel() else 0
        if need > self.rows.shape[0]:
            grown = torch.zeros((need, 2), dtype=torch.int64)
            grown[: self.rows.shape[0]] = self.rows
            self.rows = grown

    def write(self, slots: torch.Tensor, signatures: torch.Tensor) -> None:
        """Rows ``slots`` := ``signatures`` (``(n, 2)``). Raises IndexError for a negative slot."""
        self._fit(slots)
        self.rows[slots.long()] = signatures.to(torch.int64)

    def read(self, slots: torch.Tensor) -> torch.Tensor:
        """A copy of rows ``slots``. Raises IndexError for a negative slot."""
        self._fit(slots)
        return self.rows[slots.long()].clone()

    def check_invariants(self) -> None:
        assert self.rows.dim() == 2 and self.rows.shape[1] == 2


@dataclass
class Side:
    """One KV buffer the plane checks (see the module docstring)."""

    name: str
    store: Any  # a SlotStore
    live: Callable[[int], bool]  # an allocation's slot is live on this side (the spec model)
    translate: Callable[[torch.Tensor], torch.Tensor] | None = None  # slot -> store index
    kv: KVSignatures = field(default_factory=KVSignatures)

    def locate(self, slots: Sequence[int]) -> torch.Tensor:
        """The store indices of ``slots`` (through the translation, if any)."""
        idx = torch.tensor(list(slots), dtype=torch.int64)
        return self.translate(idx).to("cpu", torch.int64) if self.translate is not None else idx

    def write(self, slots: Sequence[int], rows: torch.Tensor) -> None:
        """Rows into the store at the slots' indices; a slot translated to a negative index
        (no KV there) is skipped, so reading it back fails."""
        loc = self.locate(slots)
        keep = loc >= 0
        if bool(keep.any()):
            self.store.write(loc[keep], rows[keep])

    def read(self, slots: Sequence[int]) -> list[tuple[int, int]]:
        """The rows at the slots' indices; ``(-1, -1)`` where one translates to a negative."""
        loc = self.locate(slots)
        keep = loc >= 0
        rows = torch.full((len(loc), 2), -1, dtype=torch.int64)
        if bool(keep.any()):
            rows[keep] = self.store.read(loc[keep]).to("cpu", torch.int64)
        return [(int(r), int(p)) for r, p in rows.tolist()]


def live_slot(model: Any, slot: int) -> bool:
    """Whether ``slot`` lies on a page ``model`` (an AllocatorModel) holds: owned or deferred."""
    page = slot // model.page_size
    return 1 <= page <= model.num_pages and model.status_of(page) not in (FREE, STAGED)


class HarnessKVCache:
    """The KV cache given to a target that has none: ``get_cpu_copy`` / ``load_cpu_copy`` over
    the plane's sides; any other attribute is the target's own cache object's (``inner``)."""

    def __init__(self, sides: Sequence[Side], inner: Any) -> None:
        self._sides, self._inner = list(sides), inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_inner"], name)

    def get_cpu_copy(self, indices: torch.Tensor, *args: Any, **kwargs: Any) -> list[Any]:
        """Per side: the positions in ``indices`` live on it and their rows."""
        slots = indices.tolist()
        out = []
        for side in self._sides:
            where = [i for i, s in enumerate(slots) if side.live(s)]
            rows = torch.tensor(side.read([slots[i] for i in where]), dtype=torch.int64)
            out.append((where, rows.reshape(-1, 2)))
        return out

    def load_cpu_copy(self, copy: list[Any], indices: torch.Tensor, *args: Any,
                      **kwargs: Any) -> None:
        """Write each side's rows back at the same positions of ``indices``."""
        slots = indices.tolist()
        for side, (where, rows) in zip(self._sides, copy):
            side.write([slots[i] for i in where], rows)


class DataPlane:
    """The signatures of one target's live slots, over its sides (see the module docstring).

    ``round_trips``: whether the target reaches a KV cache the plane can copy through: the
    harness's (stores of its own, a target whose ``_kvcache`` has no ``get_cpu_copy``) or the
    target's own, where the sides' stores are that cache's bytes (none a :class:`TensorStore`).
    """

    def __init__(self, target: Any, sides: Sequence[Side]) -> None:
        self.target, self.sides = target, list(sides)
        self.round_trips = False
        inner = getattr(target, "_kvcache", AttributeError)
        if inner is not AttributeError and hasattr(target, "get_cpu_copy"):
            if not hasattr(inner, "get_cpu_copy"):
                target._kvcache = HarnessKVCache(self.sides, inner)
                self.round_trips = True
            else:  # the target's own cache: only where the stores read its bytes
                self.round_trips = not any(isinstance(s.store, TensorStore) for s in self.sides)

    def after(self, request: int, call: str, handed_out: Sequence[int] | None,
              events: Counter[str]) -> None:
        """Release, write the new signatures, check every live slot, round-trip the new ones.

        Raises Divergence: ``DATA-2`` (a handed-out slot still live), ``DATA-1`` (a live slot's
        bytes changed), ``DATA-3`` (the CPU-copy round trip did not restore them)."""
        for side in self.sides:
            side.kv.release(side.live)
            slots = [s for s in handed_out or () if side.live(s)]
            if slots:
                signatures = side.kv.hand_out(slots, request)
                side.write(slots, torch.tensor(signatures, dtype=torch.int64))
                events["data.hand_out"] += 1
        self.check(f"after {call}")
        events["data.check"] += 1
        if handed_out and self.round_trips:
            self.round_trip(list(handed_out), call)
            events["data.round_trip"] += 1

    def check(self, when: str) -> None:
        """Every live slot of every side holds its signature (``DATA-1``)."""
        for side in self.sides:
            slots = list(side.kv.expected)
            if slots:
                side.kv.check_read(slots, side.read(slots), f"{when}, {side.name} side")

    def round_trip(self, slots: list[int], call: str) -> None:
        """``get_cpu_copy(slots)``, the bytes overwritten, ``load_cpu_copy(copy, slots)``
        through the target; the signatures must be back (``DATA-3``)."""
        try:
            copy = self.target.get_cpu_copy(torch.tensor(slots, dtype=torch.int64))
        except NotImplementedError:  # the target's cache has no CPU copy: no round trips
            self.round_trips = False
            return
        except Exception as err:
            raise Divergence("DATA-3", f"get_cpu_copy of {call}'s slots raised "
                                       f"{type(err).__name__}: {err}") from err
        for side in self.sides:
            mine = [s for s in slots if s in side.kv.expected]
            if mine:
                side.write(mine, torch.full((len(mine), 2), POISON))
        try:
            self.target.load_cpu_copy(copy, torch.tensor(slots, dtype=torch.int64))
        except Exception as err:
            raise Divergence("DATA-3", f"load_cpu_copy of {call}'s slots raised "
                                       f"{type(err).__name__}: {err}") from err
        for side in self.sides:
            mine = [s for s in slots if s in side.kv.expected]
            if mine:
                side.kv.check_restored(mine, side.read(mine),
                                       f"get_cpu_copy/load_cpu_copy of {call}'s slots, "
                                       f"{side.name} side")

    def check_invariants(self) -> None:
        for side in self.sides:
            side.kv.check_invariants()


def after_call(engine: Any, request: int, call: str, result: Any) -> None:
    """The engine's hook after a judged call (``engine.data_plane`` on): builds the plane for
    the engine's current target (its family's ``_data_sides()``) and runs :meth:`DataPlane.after`
    with the call's result when it is an allocation's slot list."""
    plane = engine.plane
    if plane is None or plane.target is not engine.target:
        plane = engine.plane = DataPlane(engine.target, engine._data_sides())
    row = engine.calls.get(call)
    alloc = row is not None and row.kind == "alloc" and isinstance(result, list)
    plane.after(request, call, result if alloc else None, engine.events)
