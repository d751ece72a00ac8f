"""The unified family judges a target through the introspection protocol
(``kvpool.spec.unified_state``) and the public allocator API alone: no module of the family but
its peer adapter (``peer.py``, ``peer_state.py``) reads a private attribute or one of SGLang
0.5.23's sub-pool fields; ``state_of`` / ``plant_fault`` / ``set_state_slots`` take a target's
own protocol methods, and refuse a target that offers neither them nor SGLang's composite with
an error naming the protocol. Runs without SGLang."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from kvpool.oracle.engine.report import OracleError
from kvpool.oracle.families.unified import float_views, peer_state
from kvpool.spec.unified_state import PLANTABLE, SubPoolState, UnifiedState

FAMILY = Path(peer_state.__file__).parent
ADAPTER = {"peer.py", "peer_state.py"}
# SGLang 0.5.23's composite and sub-pool fields the family once read directly
SGLANG_FIELDS = (
    "_free_phys_pages", "_pending_reuse_pages_cpu", "watermark_physical", "grow_direction",
    "virtual_to_physical", "physical_to_virtual", "low_wm_page", "high_wm_page",
    "min_page_index", "entry_bytes_per_page", "unified_buffer", "full_attn_allocator",
    "swa_attn_allocator", "mamba_allocator", "_full_max_total_num_tokens",
    "_swa_max_total_num_tokens", "allocated_count", "lazy_compaction", "live_page_count",
    "free_virtual_ids", "prepare_mamba_allocation", "sub_pool_name")
WORD = re.compile(r"\b(" + "|".join(map(re.escape, SGLANG_FIELDS)) + r")\b")


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of every docstring node (module, class, function)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _own(value: ast.expr) -> bool:
    """``self.x`` / ``cls.x`` / ``super().x``: an object's own attribute."""
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls")
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id == "super")


def reads_of(source: str) -> list[str]:
    """Where ``source`` reads a private attribute of another object or names an SGLang field
    (an attribute, or a string outside docstrings: ``getattr`` names, repro lines)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            private = node.attr.startswith("_") and not node.attr.startswith("__")
            if node.attr in SGLANG_FIELDS or (private and not _own(node.value)):
                out.append(f"line {node.lineno}: .{node.attr}")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in docs and WORD.search(node.value)):
            out.append(f"line {node.lineno}: {node.value[:60]!r}")
    return out


def test_the_scan_finds_what_it_looks_for() -> None:
    assert reads_of("x = a.full_attn_allocator.watermark_physical") != []
    assert reads_of("n = sub._free_phys_pages.numel()") != []
    assert reads_of("line = f'a.swa_attn_allocator.low_wm_page = {n}'") != []
    assert reads_of("getattr(a, 'mamba_allocator')") != []
    assert reads_of('def f(self):\n    """reads _free_phys_pages"""\n    return self._x') == []
    assert reads_of("class A(B):\n    def f(self):\n        return super()._hint()") == []


@pytest.mark.parametrize("module", sorted(p.name for p in FAMILY.glob("*.py")
                                          if p.name not in ADAPTER))
def test_only_the_peer_adapter_reads_sglang_fields(module: str) -> None:
    assert reads_of((FAMILY / module).read_text()) == []


def _sub(name: str, grow: str, low: int, high: int, **kw: Any) -> SubPoolState:
    return SubPoolState(name, grow, 128, 40, 1, low, high, **kw)


STATE = UnifiedState(4, 5120, {"full": _sub("full", "down", 38, 40, bindings={1: 38, 2: 39}),
                               "swa": _sub("swa", "up", 1, 3, bindings={1: 1, 2: 2})},
                     tuple(range(3, 40)), 400, 400)


class Protocol:
    """A target that provides the protocol and both optional hooks, recording their calls."""

    def __init__(self) -> None:
        self.planted: list[str] = []
        self.slots: list[int] = []

    def unified_state(self) -> UnifiedState:
        return STATE

    def unified_plant(self, fault: str) -> bool:
        self.planted.append(fault)
        return fault != "frontier_cross"

    def set_state_slots(self, count: int) -> None:
        self.slots.append(count)


def test_a_protocol_target_is_read_and_driven_through_its_own_methods() -> None:
    target = Protocol()
    assert peer_state.state_of(target) is STATE
    assert [peer_state.plant_fault(target, f) for f in PLANTABLE] == [True, True, False]
    assert target.planted == list(PLANTABLE)
    peer_state.set_state_slots(target, 2)
    assert target.slots == [2]
    with pytest.raises(ValueError, match="unknown fault"):
        peer_state.plant_fault(target, "no_such_fault")


def test_a_target_without_the_protocol_is_refused_naming_it() -> None:
    class Bare:
        def available_size(self) -> int:
            return 0

    with pytest.raises(OracleError, match=r"unified_state\(\).*kvpool\.spec\.unified_state"):
        peer_state.state_of(Bare())
    assert peer_state.plant_fault(Bare(), "stale_binding:full") is False  # probe skipped
    with pytest.raises(OracleError, match="set_state_slots"):
        peer_state.set_state_slots(Bare(), 1)

    class Wrong:
        def unified_state(self) -> dict[str, int]:
            return {}

    with pytest.raises(OracleError, match=r"not kvpool\.spec\.unified_state\.UnifiedState"):
        peer_state.state_of(Wrong())


def test_the_float_chain_needs_a_state_end_below_an_swa_float_UNI_14() -> None:
    with pytest.raises(OracleError, match="float_chain needs sub-pools"):
        float_views.chain_from(STATE)
    tri = UnifiedState(4, 9000, {
        "state": SubPoolState("state", "up", 176, 20, 1, 1, 3, bindings={1: 1, 2: 2}),
        "swa": SubPoolState("swa", "float", 128, 70, 2, 30, 33, holes=(31,),
                            bindings={5: 30, 6: 32}),
        "full": SubPoolState("full", "down", 128, 70, 2, 68, 70, holes=(68,), held_back=(68,),
                             bindings={5: 69}, lazy=True)}, (), 400, 400)
    chain = float_views.chain_from(tri)
    assert (chain.state_high_byte, chain.swa_low_page, chain.swa_high_page) == (3 * 176, 30, 33)
    assert (chain.swa_holes, chain.swa_live_pages) == (1, 2)
    assert (chain.full_low_byte, chain.full_span_pages, chain.full_holes) == (68 * 128, 2, 0)
    assert (chain.full_live_tokens, chain.swa_live_tokens) == (4, 8)
