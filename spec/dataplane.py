"""The allocator's contract with the KV bytes: what a live slot's bytes must hold (``DATA-1..3``).

An allocator never writes KV itself, but every slot it hands out is where a forward pass writes
that token's K/V, and every live request reads its K/V back from the slots it was given. So the
contract with the bytes is: a slot handed out belongs to one (request, position) until it is
freed; until then its bytes hold what was written there, whatever the allocator does with other
slots (``DATA-1``); an allocation never hands out a slot that is still live (``DATA-2``); and the
retract-and-resume path (``get_cpu_copy`` then ``load_cpu_copy``) puts every slot's bytes back
where the caller asks (``DATA-3``).

:class:`KVSignatures` is that contract over a *signature* per slot: the pair (request, position)
a harness writes into the slot's KV bytes when it is handed out. Slots are the ids an allocation
returns (a full-attention slot for a hybrid allocator; its SWA side is a second
:class:`KVSignatures` reached through the translation). Stdlib only, like the rest of the spec.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .contract import Divergence

Signature = tuple[int, int]  # (request, position): what a harness writes into a slot's KV bytes


class KVSignatures:
    """The signatures the live slots of one KV side must hold (see the module docstring).

    ``expected`` maps each live slot to its signature. A slot enters with :meth:`hand_out` and
    leaves with :meth:`release`; only then may its bytes change.
    """

    def __init__(self) -> None:
        self.expected: dict[int, Signature] = {}

    def release(self, still_live: Callable[[int], bool]) -> list[int]:
        """End the liveness of every slot for which ``still_live(slot)`` is False (freed, its
        window released, the pool cleared): from now on its bytes may change (``DATA-1``).
        Returns the released slots, ascending."""
        gone = sorted(s for s in self.expected if not still_live(s))
        for slot in gone:
            del self.expected[slot]
        return gone

    def hand_out(self, slots: Sequence[int], request: int) -> list[Signature]:
        """Record that position ``i`` of ``request`` owns ``slots[i]``; returns the signatures
        to write, in ``slots`` order.

        Raises Divergence (``DATA-2``) when a slot is still live (its bytes belong to another
        request) or appears twice; nothing is recorded then.

        >>> kv = KVSignatures(); kv.hand_out([5, 6], request=1)
        [(1, 0), (1, 1)]
        """
        seen: set[int] = set()
        for slot in slots:
            if slot in self.expected or slot in seen:
                owner = self.expected.get(slot, (request, list(slots).index(slot)))
                raise Divergence(
                    "DATA-2",
                    f"slot {slot} handed out to request {request} while still live "
                    f"(request {owner[0]}, position {owner[1]})",
                )
            seen.add(slot)
        signatures = [(request, i) for i in range(len(slots))]
        self.expected.update(zip(slots, signatures))
        return signatures

    def check_places(self, slots: Sequence[int], places: Sequence[int],
                     live_places: Mapping[int, int], request: int) -> None:
        """Before :meth:`hand_out` on a side whose bytes are reached through a translation:
        ``places[i]`` is where ``slots[i]``'s bytes go (negative: nowhere), ``live_places``
        maps the place of every slot live before this allocation to that slot.

        Raises Divergence (``DATA-2``) naming the first handed-out slot whose place is a live
        slot's (its bytes still belong to another request) or another slot's of the same
        allocation; the slot ids themselves may all be free.

        >>> kv = KVSignatures(); kv.hand_out([5], request=1)
        [(1, 0)]
        >>> for new, places in (([6], [50]), ([6, 7], [60, 60])):
        ...     try:
        ...         kv.check_places(new, places, {50: 5}, request=2)
        ...     except Divergence as err:
        ...         print(err.clause, err.detail.split(", where ")[1])
        DATA-2 live slot 5 (request 1, position 0) keeps its own
        DATA-2 slot 6 of the same allocation (position 0) puts its own
        """
        taken: dict[int, int] = {}
        for i, (slot, place) in enumerate(zip(slots, places)):
            owner = live_places.get(place)
            if owner is not None and owner != slot and owner in self.expected:
                sig = self.expected[owner]
                where = f"live slot {owner} (request {sig[0]}, position {sig[1]}) keeps its own"
            elif place in taken:
                other = taken[place]
                where = f"slot {slots[other]} of the same allocation (position {other}) puts its own"
            else:
                if place >= 0:
                    taken[place] = i
                continue
            raise Divergence("DATA-2", f"slot {slot} handed out to request {request} puts its "
                                       f"bytes at {place}, where {where}")

    def check_read(self, slots: Sequence[int], rows: Sequence[Signature], when: str) -> None:
        """The bytes read back from ``slots`` (``rows``, in order) are their signatures.

        Raises Divergence (``DATA-1``) naming the first slot whose bytes changed while it was
        live (overwritten, moved without its bytes, read through a wrong translation)."""
        self._compare(slots, rows, "DATA-1", when)

    def check_restored(self, slots: Sequence[int], rows: Sequence[Signature], when: str) -> None:
        """After ``get_cpu_copy(slots)``, the bytes overwritten, and ``load_cpu_copy(copy,
        slots)``: ``rows`` read back are the signatures again.

        Raises Divergence (``DATA-3``) naming the first slot not restored."""
        self._compare(slots, rows, "DATA-3", when)

    def _compare(self, slots: Sequence[int], rows: Sequence[Signature], clause: str,
                 when: str) -> None:
        for slot, row in zip(slots, rows):
            want = self.expected[slot]
            if tuple(row) != want:
                raise Divergence(
                    clause,
                    f"{when}: live slot {slot} holds {tuple(row)}, written as (request "
                    f"{want[0]}, position {want[1]})",
                )

    def check_invariants(self) -> None:
        """Every signature is a pair of ints, and slots are non-negative."""
        for slot, sig in self.expected.items():
            assert slot >= 0 and len(sig) == 2, (slot, sig)
