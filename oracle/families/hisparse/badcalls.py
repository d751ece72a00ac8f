"""The HiSparse scheduler model's caller errors (checked targets only): each kind of
:data:`~.coverage.BAD_CLAUSES` sent to its call, which the spec and the target must reject
alike, leaving the pair unchanged (``ERR-1``)."""

from __future__ import annotations

from typing import Any

from ...engine.draws import Draws
from ...engine.steps import action
from .coverage import BAD_KIND_CALLS, BAD_PAGED


class BadCalls:
    """A mixin of :class:`~.machine.HiSparseMachine`: the ``bad_call`` action."""

    ex: Any
    caps: Any
    ps: int
    rows: list[Any]

    def _free_logical_slot(self) -> int:
        m = self.ex.model
        free: list[int] = m.logical.get_all_free_pages()
        page: int = free[0] if free else m.logical.num_pages + 1
        return page * self.ps

    def _kinds(self) -> list[str]:
        m = self.ex.model
        kinds = [k for k, call in BAD_KIND_CALLS.items()
                 if self.caps.checks(call) and (self.ps > 1 or k not in BAD_PAGED)]
        if not any(r.row and len(r.row) % self.ps and r.row[-1] not in m.mapping
                   for r in self.rows):
            kinds = [k for k in kinds if k != "extend_unbound"]
        if not any(len(r.row) > 1 and r.row[1] in m.mapping for r in self.rows):
            kinds = [k for k in kinds if k != "free_partial"]
        if not self.rows:
            kinds = [k for k in kinds if k != "buffer_unaligned"]
        return kinds

    @action(lambda self: self.caps.checked, rank=2)
    def bad_call(self, data: Draws) -> None:
        """A call the spec rejects: ``alloc`` above page size 1, a prefix continued from an
        unbound slot mid-page, a device buffer of a size that is no page multiple or of slots
        not held, a double or partial ``free``, a device slot freed that no buffer holds, a
        ``last_loc`` past the mapping."""
        kinds = self._kinds()
        if not kinds:
            return
        kind = data.choice(kinds)
        m = self.ex.model
        ps = self.ps
        self.ex.note(f"bad.{kind}")
        if kind == "alloc_paged":
            self.ex.call_bad("alloc", need_size=ps)
        elif kind == "extend_unbound":
            r = next(r for r in self.rows if r.row and len(r.row) % ps
                     and r.row[-1] not in m.mapping)
            n = len(r.row)
            self.ex.call_bad("alloc_extend", prefix_lens=[n], seq_lens=[n + 1],
                             last_loc=[r.row[-1]])
        elif kind == "buffer_unaligned":
            r = self.rows[data.integer(0, len(self.rows) - 1)]
            self.ex.call_bad("alloc_device_buffer", slots=list(r.row),
                             need_size=ps * data.integer(0, 2) + data.integer(1, ps - 1))
        elif kind == "buffer_not_held":
            self.ex.call_bad("alloc_device_buffer", slots=[self._free_logical_slot()],
                             need_size=0)
        elif kind == "double_free":
            self.ex.call_bad("free", slots=[self._free_logical_slot()])
        elif kind == "free_partial":
            r = next(r for r in self.rows if len(r.row) > 1 and r.row[1] in m.mapping)
            self.ex.call_bad("free", slots=r.row[:1])
        elif kind == "free_device":
            free = m.device.get_all_free_pages()
            page = free[0] if free else m.device.num_pages + 1
            self.ex.call_bad("free_hisparse_indices", slots=[page * ps])
        else:
            end = len(m.mapping_list()) - 1
            self.ex.call_bad("get_last_loc_hisparse_device",
                             last_loc=[data.choice([end, end + 1, -2])])
