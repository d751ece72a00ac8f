"""Deliberate breaks of mirroring, for the multi-rank run (:mod:`.ranks`) to catch: each wraps
one rank's allocator (kvpool's or SGLang's; a proxy, the allocator's own code untouched) so
that its state stops being a pure function of the mirrored call stream (``PINTER-12``).

- ``free_order``: this rank puts freed pages at the back of their class lists, not the front;
- ``tie_break``: this rank breaks a least-full tie toward the highest class id, not the lowest;
- ``unstable_sort``: freed pages reach their lists in an order drawn from a process-local
  generator (seeded by the process id), as a sort or set iteration whose order depends on the
  process would: nondeterministic on every rank that has it.
"""

from __future__ import annotations

import os
import random
from typing import Any

import torch
from kvpool.spec.page_interleave import class_counts

BREAKS = ("free_order", "tie_break", "unstable_sort")


class MirrorBreak:
    """A proxy for one rank's allocator that breaks mirroring by ``kind`` (``BREAKS``); every
    other attribute is the allocator's."""

    def __init__(self, inner: Any, kind: str) -> None:
        if kind not in BREAKS:
            raise ValueError(f"unknown mirroring break {kind!r} (one of {', '.join(BREAKS)})")
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "rng", random.Random(os.getpid()))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _lists(self) -> list[torch.Tensor]:
        x = self.inner
        lists: list[torch.Tensor] = x.class_release_pages if x.need_sort else x.class_free_pages
        return lists

    def _after_release(self, before: list[int]) -> None:
        """Reorder what the last release prepended to each class list."""
        lists = self._lists()
        for r, old in enumerate(before):
            added = len(lists[r]) - old
            if added <= 0:
                continue
            fresh, rest = lists[r][:added], lists[r][added:]
            if self.kind == "free_order":
                lists[r] = torch.cat((rest, fresh))
            elif self.kind == "unstable_sort" and added > 1:
                lists[r] = torch.cat((fresh[torch.tensor(self.rng.sample(range(added), added))],
                                      rest))

    def free(self, free_index: torch.Tensor) -> None:
        before = [len(x) for x in self._lists()]
        self.inner.free(free_index)
        self._after_release(before)

    def free_group_end(self) -> None:
        before = [len(x) for x in self._lists()]
        self.inner.free_group_end()
        self._after_release(before)

    def alloc_extend(self, *args: Any, rotation_bases: list[int | None] | None = None,
                     **kwargs: Any) -> Any:
        if self.kind != "tie_break" or rotation_bases is None:
            return self.inner.alloc_extend(*args, rotation_bases=rotation_bases, **kwargs)
        prefix = [int(p) for p in kwargs["prefix_lens_cpu"]]
        seq = [int(s) for s in kwargs["seq_lens_cpu"]]
        n, ps = self.inner.shard_size, self.inner.page_size
        sim = list(self.inner.class_free_page_counts())
        for i, base in enumerate(rotation_bases):
            if base is None:  # the most free pages, highest id on a tie
                base = rotation_bases[i] = max(range(n), key=lambda r: (sim[r], r))
            opened = -(-seq[i] // ps) - prefix[i] // ps
            first = (base + prefix[i] // ps) % n
            sim = [s - k for s, k in zip(sim, class_counts(first, max(opened, 0), n))]
        return self.inner.alloc_extend(*args, rotation_bases=rotation_bases, **kwargs)
