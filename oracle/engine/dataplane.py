"""The oracle's data plane: a signature in the KV bytes of every slot an allocation hands out.

With the plane on (``python -m kvpool.oracle --data-plane``, ``pytest --kvpool-data-plane``, the
environment variable :data:`ENV`, or a family executor's ``data_plane_default``), the engine
calls :func:`after_call` after every call it judged. The :class:`DataPlane` then

- ends the liveness of every slot the spec model no longer holds (freed, its SWA window
  released, the pool cleared): from then on its bytes may change;
- writes the signature (request, position) of every slot an allocation handed out into that
  slot's KV bytes (the request is the allocation's step index, the position the slot's index
  in the result), through the side's write translation where it has one (``DATA-2``: a slot
  still live is never handed out, nor one whose translation is a live slot's place: its bytes
  still belong to another request);
- reads every live slot back through the same translation and requires its signature
  (``DATA-1``);
- after an allocation, where the target reaches a KV cache (``get_cpu_copy`` /
  ``load_cpu_copy``), copies the new slots out, overwrites their bytes, loads the copy back to
  the same slots and requires the signatures again (``DATA-3``, the retract-and-resume path).

A *side* (:class:`CheckedBuffer`) is one KV buffer: its store, the liveness of an allocation's
slot on it (from the spec model), and the translation from that slot to the store's index. The
single-pool family has one side; the hybrid family two (full by full index; SWA through the
target's ``translate_loc_from_full_to_swa``). A *store* is any object with
``write(slots, signatures)`` and ``read(slots) -> (n, 2) tensor``; :class:`TensorStore` is the
harness-owned default for targets without a KV buffer. A target whose ``_kvcache`` has no
``get_cpu_copy`` (none, or an attribute set to None) is given a :class:`HarnessKVCache` over the
plane's stores (every other attribute is its own cache's).
"""

from __future__ import annotations

import json
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
    "ENV", "CheckedBuffer", "DataPlane", "HarnessKVCache", "SlotStore", "TensorStore",
    "after_call", "live_slot", "live_slots_mask", "requested",
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
        self.rows.index_copy_(0, slots.long(), signatures.to(torch.int64).reshape(-1, 2))

    def read(self, slots: torch.Tensor) -> torch.Tensor:
        """A copy of rows ``slots``. Raises IndexError for a negative slot."""
        self._fit(slots)
        return self.rows.index_select(0, slots.long())

    def check_invariants(self) -> None:
        assert self.rows.dim() == 2 and self.rows.shape[1] == 2


@dataclass
class CheckedBuffer:
    """One KV buffer the plane checks (see the module docstring)."""

    name: str
    store: Any  # a SlotStore
    live: Callable[[int], bool]  # an allocation's slot is live on this side (the spec model)
    translate: Callable[[torch.Tensor], torch.Tensor] | None = None  # slot -> store index
    # ``live`` for a tensor of slots at once (a bool tensor), where the family can compute it
    live_mask: Callable[[torch.Tensor], torch.Tensor] | None = None
    kv: KVSignatures = field(default_factory=KVSignatures)
    _expected: tuple[torch.Tensor, torch.Tensor] | None = None  # kv.expected as tensors

    def locate(self, slots: Sequence[int] | torch.Tensor) -> torch.Tensor:
        """The store indices of ``slots`` (through the translation, if any)."""
        idx = torch.as_tensor(slots, dtype=torch.int64).reshape(-1)
        return self.translate(idx).to("cpu", torch.int64) if self.translate is not None else idx

    def expected(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The live slots and their signatures (``(n,)``, ``(n, 2)``), in ``kv.expected``'s
        order; rebuilt after a hand-out or a release."""
        if self._expected is None:
            exp = self.kv.expected
            self._expected = (torch.tensor(list(exp), dtype=torch.int64),
                              torch.tensor(list(exp.values()), dtype=torch.int64).reshape(-1, 2))
        return self._expected

    def release(self) -> None:
        """End the liveness of every recorded slot the spec model no longer holds."""
        if self.live_mask is None:
            gone = self.kv.release(self.live)
        else:
            slots, _ = self.expected()
            dead = set(slots[~self.live_mask(slots)].tolist()) if len(slots) else set()
            gone = self.kv.release(lambda s: s not in dead) if dead else []
        if gone:
            self._expected = None

    def live_of(self, slots: torch.Tensor) -> torch.Tensor:
        """Which of ``slots`` are live on this side (a bool tensor)."""
        if self.live_mask is not None:
            return self.live_mask(slots)
        return torch.tensor([self.live(int(s)) for s in slots.tolist()], dtype=torch.bool)

    def hand_out(self, slots: Sequence[int], request: int) -> None:
        """Record and write the signatures of ``slots`` (``DATA-2``: no slot is live, and on a
        side reached through a translation no slot's place is a live slot's)."""
        if self.translate is not None:
            live, _ = self.expected()
            places = self.locate(live).tolist() if len(live) else []
            live_places = {p: s for s, p in zip(live.tolist(), places) if p >= 0}
            self.kv.check_places(slots, self.locate(slots).tolist(), live_places, request)
        signatures = self.kv.hand_out(slots, request)
        self._expected = None
        self.write(slots, torch.tensor(signatures, dtype=torch.int64))

    def check(self, when: str) -> None:
        """Every live slot holds its signature (``DATA-1``): compared as tensors, the spec
        names the first slot that does not."""
        slots, want = self.expected()
        if not len(slots):
            return
        self._compare(slots, want, self.kv.check_read, f"{when}, {self.name} side")

    def check_restored(self, slots: list[int], when: str) -> None:
        """``slots`` (live) hold their signatures again after a CPU-copy round trip
        (``DATA-3``)."""
        want = torch.tensor([self.kv.expected[s] for s in slots], dtype=torch.int64)
        self._compare(torch.tensor(slots, dtype=torch.int64), want.reshape(-1, 2),
                      self.kv.check_restored, when)

    def _compare(self, slots: torch.Tensor, want: torch.Tensor,
                 judge: Callable[[Sequence[int], Sequence[tuple[int, int]], str], None],
                 when: str) -> None:
        """Read ``slots``; on a difference the spec's ``judge`` names the first wrong slot."""
        got = self.read_rows(slots)
        if not torch.equal(got, want):
            i = int((got != want).any(dim=1).nonzero()[0])
            judge([int(slots[i])], [(int(got[i, 0]), int(got[i, 1]))], when)

    def write(self, slots: Sequence[int] | torch.Tensor, rows: torch.Tensor) -> None:
        """Rows into the store at the slots' indices; a slot translated to a negative index
        (no KV there) is skipped, so reading it back fails."""
        loc = self.locate(slots)
        keep = loc >= 0
        if bool(keep.any()):
            self.store.write(loc[keep], rows[keep])

    def read_rows(self, slots: Sequence[int] | torch.Tensor) -> torch.Tensor:
        """The rows at the slots' indices (``(n, 2)``); ``(-1, -1)`` where one translates to a
        negative index."""
        loc = self.locate(slots)
        if self.translate is None:  # slot ids index the store: none is negative
            direct: torch.Tensor = self.store.read(loc).to("cpu", torch.int64).reshape(-1, 2)
            return direct
        keep = loc >= 0
        rows = torch.full((len(loc), 2), -1, dtype=torch.int64)
        if bool(keep.any()):
            rows[keep] = self.store.read(loc[keep]).to("cpu", torch.int64).reshape(-1, 2)
        return rows

    def read(self, slots: Sequence[int]) -> list[tuple[int, int]]:
        """:meth:`read_rows` as (request, position) pairs."""
        return [(int(r), int(p)) for r, p in self.read_rows(slots).tolist()]


def live_slot(model: Any, slot: int) -> bool:
    """Whether ``slot`` lies on a page ``model`` (an AllocatorModel) holds: owned or deferred."""
    page = slot // model.page_size
    return 1 <= page <= model.num_pages and model.status_of(page) not in (FREE, STAGED)


def live_slots_mask(model: Any, slots: torch.Tensor) -> torch.Tensor:
    """:func:`live_slot` of every slot in ``slots`` at once (a bool tensor)."""
    held = torch.ones(model.num_pages + 1, dtype=torch.bool)
    held[0] = False
    free = model.get_all_free_pages()
    if free:
        held[torch.tensor(free, dtype=torch.int64)] = False
    pages = slots // model.page_size
    inside = (pages >= 0) & (pages <= model.num_pages)
    live: torch.Tensor = inside & held[pages.clamp(0, model.num_pages)]
    return live


class HarnessKVCache:
    """The KV cache given to a target that has none: ``get_cpu_copy`` / ``load_cpu_copy`` over
    the plane's sides; any other attribute is the target's own cache object's (``inner``)."""

    def __init__(self, sides: Sequence[CheckedBuffer], inner: Any) -> None:
        self._sides, self._inner = list(sides), inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_inner"], name)

    def get_cpu_copy(self, indices: torch.Tensor, *args: Any, **kwargs: Any) -> list[Any]:
        """Per side: the positions in ``indices`` live on it and their rows."""
        slots = indices.to("cpu", torch.int64).reshape(-1)
        out = []
        for side in self._sides:
            where = side.live_of(slots).nonzero().flatten()
            out.append((where, side.read_rows(slots.index_select(0, where))))
        return out

    def load_cpu_copy(self, copy: list[Any], indices: torch.Tensor, *args: Any,
                      **kwargs: Any) -> None:
        """Write each side's rows back at the same positions of ``indices``."""
        slots = indices.to("cpu", torch.int64).reshape(-1)
        for side, (where, rows) in zip(self._sides, copy):
            side.write(slots.index_select(0, where), rows)


class DataPlane:
    """The signatures of one target's live slots, over its sides (see the module docstring).

    ``round_trips``: whether the target reaches a KV cache the plane can copy through: the
    harness's (stores of its own, a target whose ``_kvcache`` has no ``get_cpu_copy``) or the
    target's own, where the sides' stores are that cache's bytes (none a :class:`TensorStore`).
    """

    def __init__(self, target: Any, sides: Sequence[CheckedBuffer]) -> None:
        self.target, self.sides = target, list(sides)
        self.round_trips = False
        inner = getattr(target, "_kvcache", AttributeError)
        if inner is not AttributeError and hasattr(target, "get_cpu_copy"):
            if not callable(getattr(inner, "get_cpu_copy", None)):
                target._kvcache = HarnessKVCache(self.sides, inner)
                self.round_trips = True
            else:  # the target's own cache: only where the stores read its bytes
                self.round_trips = not any(isinstance(s.store, TensorStore) for s in self.sides)

    def after(self, request: int, call: str, handed_out: Sequence[int] | None,
              events: Counter[str]) -> None:
        """Release, write the new signatures, check every live slot, round-trip the new ones.

        Raises Divergence: ``DATA-2`` (a handed-out slot still live), ``DATA-1`` (a live slot's
        bytes changed), ``DATA-3`` (the CPU-copy round trip did not restore them)."""
        handed = torch.tensor(list(handed_out or ()), dtype=torch.int64)
        for side in self.sides:
            side.release()
            slots = handed[side.live_of(handed)].tolist() if len(handed) else []
            if slots:
                side.hand_out(slots, request)
                events["data.hand_out"] += 1
        self.check(f"after {call}")
        events["data.check"] += 1
        if handed_out and self.round_trips:
            self.round_trip(list(handed_out), call)
            events["data.round_trip"] += 1

    def check(self, when: str) -> None:
        """Every live slot of every side holds its signature (``DATA-1``)."""
        for side in self.sides:
            side.check(when)

    def round_trip(self, slots: list[int], call: str) -> None:
        """``get_cpu_copy(slots)``, the bytes overwritten, ``load_cpu_copy(copy, slots)``
        through the target; the signatures must be back (``DATA-3``)."""
        try:
            copy = self._through("get_cpu_copy", call, torch.tensor(slots, dtype=torch.int64),
                                 optional=True)
        except NotImplementedError:  # the target's cache has no CPU copy: no round trips
            self.round_trips = False
            return
        for side, mine in self._sides_holding(slots):
            side.write(mine, torch.full((len(mine), 2), POISON))
        self._through("load_cpu_copy", call, copy, torch.tensor(slots, dtype=torch.int64))
        for side, mine in self._sides_holding(slots):
            side.check_restored(mine, f"get_cpu_copy/load_cpu_copy of {call}'s slots, "
                                      f"{side.name} side")

    def _through(self, method: str, call: str, *args: Any, optional: bool = False) -> Any:
        """The target's ``method(*args)``; a raise breaks ``DATA-3``, except NotImplementedError
        from an ``optional`` method (passed on: the target has no such copy)."""
        try:
            return getattr(self.target, method)(*args)
        except NotImplementedError:
            if optional:
                raise
            raise Divergence("DATA-3", f"{method} of {call}'s slots is not implemented") from None
        except Exception as err:
            raise Divergence("DATA-3", f"{method} of {call}'s slots raised "
                                       f"{type(err).__name__}: {err}") from err

    def _sides_holding(self, slots: list[int]) -> list[tuple[Any, list[int]]]:
        """Each side with the ones of ``slots`` it holds signatures for (sides holding none
        left out)."""
        held = [(side, [s for s in slots if s in side.kv.expected]) for side in self.sides]
        return [(side, mine) for side, mine in held if mine]

    def check_invariants(self) -> None:
        for side in self.sides:
            side.kv.check_invariants()


def after_call(engine: Any, request: int, call: str, result: Any) -> None:
    """The engine's hook after a judged call (``engine.data_plane`` on): builds the plane for
    the engine's current target (its family's ``_data_sides()``) and runs :meth:`DataPlane.after`
    with the call's result when it is an allocation's slot list. Runs torch on one thread:
    its small gathers otherwise wait on a thread pool that a loaded machine starves."""
    plane = engine.plane
    if plane is None or plane.target is not engine.target:
        plane = engine.plane = DataPlane(engine.target, engine._data_sides())
    row = engine.calls.get(call)
    alloc = row is not None and row.kind == "alloc" and isinstance(result, list)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        plane.after(request, call, result if alloc else None, engine.events)
    finally:
        torch.set_num_threads(threads)


def repro_asserts(trace: Any) -> list[str]:
    """A ``DATA-*`` failure's repro lines: the replay of its trace with the plane on
    (:mod:`kvpool.oracle.engine.datarepro`, imported by the repro, not here)."""
    text = json.dumps(json.loads(trace.to_json()), separators=(",", ":"))
    return [
        f"# [{trace.clause}] the K/V bytes: the calls above, replayed with the data plane on",
        "from kvpool.oracle.engine.datarepro import replay_with_plane",
        f"data_failure = replay_with_plane({text!r}, factory)",
        "assert data_failure is None, data_failure",
    ]
