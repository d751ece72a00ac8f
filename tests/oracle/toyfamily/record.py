"""The toy family's registry record, as ``KVPOOL_ORACLE_FAMILIES=toy=toyfamily.record:TOY``
names it (or a test puts it into ``registry.FAMILIES``). Imports only the registry, so that
reading the variable while the registry loads pulls in nothing else."""

from __future__ import annotations

from kvpool.oracle.engine.registry import Correct, Registered

_T = "toyfamily.targets"
TOY = Registered(
    "toyfamily.machine", 20, 10, "request slots (a toy family registered from the tests)",
    calls="toyfamily.calls:TOY_CALLS",
    aliases={"toy": (f"{_T}:toy",), "toy-lifo": (f"{_T}:toy_lifo",),
             "toy-unchecked-free": (f"{_T}:toy_unchecked_free",)},
    default_target="toy",
    # a printed repro must pass on the correct allocator (the toy has one shape, always checked)
    correct=dict.fromkeys(("token", "paged"),
                          Correct(f"{_T}:toy", f"{_T}:toy", "the toy SlotAllocator")),
)
