"""Traces: the calls of one run at the spec level, and their JSON form.

A :class:`TraceStep` is one call in the spec's signature (plain ints and lists), its expected
result under the spec (``expect``) or the clause of the ContractViolation it must raise
(``raises``), and the expected ``available_size()`` / free census after it. Any implementation
can replay the JSON form (:mod:`kvpool.oracle.engine.replay`);
:func:`kvpool.oracle.engine.repro.to_pytest` prints the steps as plain torch calls. A trace
recorded before the oracle's subpackages names its modules by their flat paths; reading it
maps them to the current ones (:mod:`.trace_paths`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from .registry import DEFAULT_FAMILY
from .trace_paths import current_path

TRACE_FORMAT = 1


@dataclass
class TraceStep:
    """One call. ``args`` maps argument names to plain values (see ``Executor.call``)."""

    call: str
    args: dict[str, Any] = field(default_factory=dict)
    expect: Any = None
    raises: str | None = None
    clobber: bool = False  # the caller overwrote its input tensor(s) right after the call
    raised: str | None = None  # what the target raised on this valid call ("Type: message")
    short_raised: str | None = None  # the declared type it raised for a None (shortage_raises)
    probe: bool = False  # the caller then wrote into the result and the census (ALIAS-3)
    evicted: int | None = None  # the spec's cache evictions where a CAP-1 repro checks them
    available_after: int | None = None
    census_after: list[int] | None = None  # sorted multiset of get_all_free_pages()
    free_after: list[int] | None = None  # exact get_all_free_pages() (reference order only)


@dataclass
class Trace:
    """The steps of one run plus what is needed to rebuild the target."""

    target: str
    page_size: int
    need_sort: bool
    device: str
    order: str
    steps: list[TraceStep] = field(default_factory=list)
    clause: str | None = None
    detail: str | None = None
    failing_step: int | None = None
    final_asserts: list[str] = field(default_factory=list)  # python lines checking the failure
    failing_setup: list[str] = field(default_factory=list)  # lines run just before its call
    error_types: list[str] = field(default_factory=list)  # checked mode's types (dotted names)
    shortage_types: list[str] = field(default_factory=list)  # shortage_raises (dotted names)
    family: str = DEFAULT_FAMILY  # the allocator family whose call table the steps use (calltables)
    data_plane: bool = False  # KV signatures were checked (kvpool.oracle.engine.dataplane)
    # the single family: the target was judged as a paged allocator (at page size 1 too);
    # None in traces written before it was recorded: paged when page_size > 1
    paged: bool | None = None
    # families with allocators of several shapes (unified: "full-swa" or "tri"): the one the
    # target was judged as, the key of its family's correct allocator (None: token / paged)
    shape: str | None = None

    def to_json(self) -> str:
        data = asdict(self)
        data["kvpool_trace"] = TRACE_FORMAT
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str) -> Trace:
        """The trace ``to_json`` wrote, any version of format 1: fields written by earlier
        versions and never read are dropped, and the module paths it records (``target``,
        ``error_types``, ``shortage_types``) are mapped from the oracle's flat paths to the
        current ones (:func:`.trace_paths.current_path`). Raises ValueError for text that is
        not a kvpool trace or a path under ``kvpool.oracle`` that names no module of it, now
        or before; TypeError for unknown or missing fields."""
        data = json.loads(text)
        if data.pop("kvpool_trace", None) != TRACE_FORMAT:
            raise ValueError("not a kvpool trace (missing or unknown 'kvpool_trace' format)")
        data.pop("got", None)  # written by earlier versions, never read
        if isinstance(data.get("target"), str):
            data["target"] = current_path(data["target"])
        for key in ("error_types", "shortage_types"):
            if isinstance(data.get(key), list):
                data[key] = [current_path(n) if isinstance(n, str) else n for n in data[key]]
        steps = [TraceStep(**s) for s in data.pop("steps")]
        return cls(steps=steps, **data)

    def num_calls(self) -> int:
        """Calls up to the failing step (or all), not counting the constructor."""
        end = len(self.steps) if self.failing_step is None else self.failing_step + 1
        return sum(1 for s in self.steps[:end] if s.call != "create")
