"""AllocatorModel's PEP 316 contracts, evaluated at run time on random call sequences.

CrossHair cannot finish on the class (state explosion, see SPEC.md appendix A), so its ``inv:``
and method ``pre:``/``post:``/``raises:`` lines are read from the docstrings here and checked
around every call of Hypothesis-generated sequences: the class invariants (INV-1..4, MODEL-3)
after each call, each postcondition with ``__old__`` a deep copy taken before the call, and for a
declared exception that nothing changed (ERR-1). Calls are mostly valid (rows grown by extend and
decode, freed whole or in segments, inside and outside groups) with some invalid ones mixed in.
"""

from __future__ import annotations

import inspect
import itertools
import re
import sys
from collections import Counter
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kvpool.spec import AllocatorModel, ContractViolation, ResizeConfig

LINE = re.compile(r"^\s*(pre|post|inv|raises):\s*(.+?)\s*$")
NAMESPACE = vars(sys.modules[AllocatorModel.__module__])


def contract(obj: object) -> dict[str, list[str]]:
    """``{"pre": [...], "post": [...], "inv": [...], "raises": [...]}`` from a docstring."""
    out: dict[str, list[str]] = {"pre": [], "post": [], "inv": [], "raises": []}
    for line in (inspect.getdoc(obj) or "").splitlines():
        m = LINE.match(line)
        if m:
            out[m[1]].append(m[2])
    return out


CLASS_INV = contract(AllocatorModel)["inv"]
# the model's own methods and its mixins' (kvpool.spec.model_segments), each contract evaluated
# in the namespace of the module that defines it
METHODS = {name: {**contract(fn), "namespace": vars(sys.modules[cls.__module__])}
           for cls in reversed(AllocatorModel.__mro__) if cls.__module__.startswith("kvpool.spec")
           for name, fn in vars(cls).items()
           if callable(fn) and not name.startswith("_") and contract(fn)["post"]}
checked: Counter[str] = Counter()


def check_inv(model: AllocatorModel) -> None:
    for expr in CLASS_INV:
        ok = eval(expr, {**NAMESPACE, "self": model})
        assert ok, f"inv broken: {expr}\n{model.debug_print()}"


def call(model: AllocatorModel, name: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``model.name`` with its contract checked; returns the result (None on an error)."""
    spec = METHODS.get(name, {"pre": [], "post": [], "raises": [], "namespace": NAMESPACE})
    namespace: dict[str, Any] = spec["namespace"]
    bound = inspect.signature(getattr(AllocatorModel, name)).bind(model, *args, **kwargs)
    bound.apply_defaults()
    env = dict(bound.arguments)
    if not all(eval(expr, {**namespace, **env}) for expr in spec["pre"]):
        return None
    old = model.copy()
    env["__old__"] = SimpleNamespace(self=old)
    allowed = tuple(eval(x.strip(), namespace) for r in spec["raises"] for x in r.split(","))
    try:
        env["__return__"] = getattr(model, name)(*args, **kwargs)
    except allowed:
        assert model.snapshot() == old.snapshot(), f"ERR-1: {name} changed the state"
        checked[f"{name}:raised"] += 1
        return None
    for expr in spec["post"]:
        assert eval(expr, {**namespace, **env}), f"{name}{args}{kwargs}: post broken: {expr}"
    check_inv(model)
    checked[name] += 1
    return env["__return__"]


def run_sequence(rng: Any, page_size: int, paged: bool, need_sort: bool) -> None:
    model = AllocatorModel(page_size * rng.randint(2, 12), page_size, paged=paged,
                           need_sort=need_sort)
    check_inv(model)
    ps = page_size
    rows: list[list[int]] = []
    for _ in range(40):
        op = rng.choice(["alloc", "extend", "extend", "decode", "free", "segments", "group",
                         "merge", "misc", "bad"])
        if op == "alloc":
            out = call(model, "alloc", ps * rng.randint(0, 3))
            if out and rng.random() < 0.3:
                call(model, "free", out)
            elif out:
                rows.append(out)  # whole pages: a row that decode and extend may continue
        elif op == "extend" and paged:
            picks = rng.sample(range(len(rows)), min(len(rows), rng.randint(0, 2)))
            picks = [i for i in picks if len(rows[i]) % ps == 0 or rows[i]]
            prefix = [len(rows[i]) for i in picks] + [0]
            seq = [p + rng.randint(0, 2 * ps) for p in prefix]
            last = [rows[i][-1] if rows[i] else -1 for i in picks] + [-1]
            if any(p and last[k] == -1 for k, p in enumerate(prefix)):
                continue
            out = call(model, "alloc_extend", prefix, seq, last, sum(seq) - sum(prefix))
            if out is not None:
                rows.append([])
                k = 0
                for i, p, s in zip([*picks, len(rows) - 1], prefix, seq):
                    rows[i] += out[k:k + s - p]
                    k += s - p
        elif op == "decode" and paged:
            picks = [i for i in range(len(rows)) if rows[i]][: rng.randint(1, 3)]
            seq = [len(rows[i]) + 1 for i in picks]
            out = call(model, "alloc_decode", seq, [rows[i][-1] for i in picks])
            if out is not None:
                for i, slot in zip(picks, out):
                    rows[i].append(slot)
        elif op == "free" and rows:
            row = rows.pop(rng.randrange(len(rows)))
            name = rng.choice(["free", "free_full", "free_page_ids"])
            pages = list(dict.fromkeys(s // ps for s in row))  # FREE-8 takes page ids
            call(model, name, pages if name == "free_page_ids" else row)
        elif op == "segments" and rows:
            row = rows.pop(rng.randrange(len(rows)))
            cuts = sorted(rng.sample(range(len(row) + 1), min(len(row) + 1, 2)))
            bounds = [0, *cuts, len(row)]
            segs = [(row[a:b], a) for a, b in itertools.pairwise(bounds)]
            if len(segs) == 1 or rng.random() < 0.5:
                call(model, "free_segments", segs)
            else:
                call(model, "free_segment", row, start_pos=0)
        elif op == "group":
            call(model, rng.choice(["free_group_begin", "free_group_end"]))
        elif op == "merge":
            call(model, "merge_and_sort_free")
        elif op == "misc":
            name = rng.choice(["clear", "resize", "check_decode_capacity", "translate",
                               "available_size", "get_all_free_pages"])
            if name == "clear":
                call(model, "clear")
                rows = []
            elif name == "resize":
                call(model, "resize", ResizeConfig(ps * rng.randint(0, 10)))
                rows = []
            elif name == "check_decode_capacity":
                call(model, name, num_tokens=rng.randint(0, 20), tree_cache=None)
            elif name == "translate":
                call(model, "translate_kv_indices_for_transfer", [1, 5, 2])
            else:
                call(model, name)
        elif op == "bad":
            bad = rng.choice([[0], [ps * (model.num_pages + 1)], [ps]])
            call(model, "free", bad)
            call(model, "alloc", ps + 1 if ps > 1 else -1)
            if model.free_group is not None:
                call(model, "free_group_begin")


def test_model_contracts_hold_at_run_time_INV_1_ERR_1() -> None:
    """INV-1..4, ERR-1 and every method contract of AllocatorModel on random sequences."""
    checked.clear()

    @settings(deadline=None)
    @given(st.randoms(use_true_random=False), st.sampled_from([
        (1, False, False), (1, True, False), (1, False, True), (2, True, False),
        (4, True, False), (4, True, True), (3, True, True),
    ]))
    def sequences(rng: Any, config: tuple[int, bool, bool]) -> None:
        run_sequence(rng, *config)

    sequences()
    assert isinstance(ContractViolation("X-1", "d"), ValueError)
    unchecked = sorted(name for name in METHODS if checked[name] == 0)
    assert not unchecked, f"contracts never exercised: {unchecked}; counts {dict(checked)}"
    assert checked["alloc:raised"] and checked["free:raised"]
