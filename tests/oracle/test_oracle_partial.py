"""Partial declarations: a target checked for some calls only, capabilities merged with
inference, and the hint that lists every capability whose methods are missing."""

from __future__ import annotations

import pytest
from kvpool.oracle.engine.capabilities import PAGED, UNDECLARED, Capabilities
from kvpool.oracle.engine.declaration import parse_declaration
from kvpool.oracle.engine.families import family
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config
from kvpool.oracle.entry.plan import plan
from kvpool.oracle.families.hybrid.targets import FULL, HybridCapabilities
from kvpool.oracle.families.single.badcalls import BAD_CALLS
from kvpool.oracle.families.single.badkinds import BAD_KIND_CALLS, kind_checked
from kvpool.oracle.families.single.coverage import EVENTS
from kvpool.oracle.families.single.targets import load_target
from partial_allocator import AllocatorError

EXAMPLES = 60


def _run(factory: str, page_size: int) -> object:
    target = load_target(f"partial_allocator:{factory}")
    result = run_config(target, Config(page_size, False, "cpu", "contract"), max_examples=EXAMPLES)
    assert result.error is None, result.error
    return result


@pytest.mark.parametrize("page_size", [1, 4])
def test_oracle_partially_checked_allocator_passes_with_the_partial_declaration(
    page_size: int,
) -> None:
    result = _run("make_partial", page_size)
    assert result.failure is None, result.failure.report()  # type: ignore[attr-defined]
    sent = {e for e, n in result.coverage.items() if e.startswith("bad.") and n}  # type: ignore[attr-defined]
    assert sent and all(BAD_KIND_CALLS[e[4:]] in ("alloc", "free") for e in sent), sent
    assert "bad.nested_group" not in sent


def test_oracle_free_page_ids_is_checked_with_free() -> None:
    """A page id named twice goes through ``free_page_ids``; a declaration for ``free``
    covers it: the target's own error is accepted as the rejection (and required)."""
    caps = load_target("partial_allocator:make_page_ids").caps
    assert caps.page_ids and caps.checks("free_page_ids")
    assert caps.error_types_for("free_page_ids") == (AllocatorError,)
    result = _run("make_page_ids", 4)
    assert result.failure is None, result.failure.report()  # type: ignore[attr-defined]
    assert result.coverage["bad.page_ids_twice"], result.coverage  # type: ignore[attr-defined]
    unchecked = PAGED.replace(checked={("alloc",): AllocatorError})
    assert not unchecked.checks("free_page_ids") and not unchecked.error_types_for("free_page_ids")


def test_oracle_partially_checked_allocator_fails_a_full_declaration_under_group_1() -> None:
    result = _run("make_all_checked", 4)
    failure = result.failure  # type: ignore[attr-defined]
    assert failure is not None and failure.clause == "GROUP-1", failure
    assert "accepted the call" in failure.detail
    assert "checked=alloc+free:partial_allocator.AllocatorError" in failure.hint, failure.hint


def test_oracle_factory_declaring_only_checked_gets_the_rest_inferred() -> None:
    caps = load_target("partial_allocator:make_partial").caps
    assert caps.checks("alloc") and caps.checks("free") and not caps.checks("free_group_begin")
    assert caps.error_types_for("free") == (AllocatorError,)
    assert caps.error_types_for("alloc_extend") == ()
    assert caps.groups and not caps.extend and caps.segments == "none" and not caps.resize
    sources = {name: caps.source_of(name) for name in ("checked", "groups", "extend", "segments")}
    assert sources == {
        "checked": "declared",
        "groups": "inferred",
        "extend": "inferred",
        "segments": "inferred",
    }
    assert caps.source_of("reference_order") == "default" and not caps.reference_order
    line = caps.in_force("p")
    assert "checked=alloc+free:partial_allocator.AllocatorError (declared)" in line
    assert "extend=false (inferred)" in line and "page_sizes=1+4+16 (default)" in line


def test_oracle_declared_fields_are_the_constructor_call_s() -> None:
    partial = Capabilities(checked=ValueError, page_sizes=(16,))
    assert partial.declared_fields == {"checked", "page_sizes"} and not partial.complete
    assert Capabilities().declared_fields == frozenset()
    assert PAGED.complete and PAGED.replace(checked=False).complete
    grown = partial.replace(groups=False)
    assert grown.declared_fields == {"checked", "page_sizes", "groups"}


def test_oracle_declare_option_takes_the_per_call_form() -> None:
    caps = parse_declaration("checked=alloc+free:ValueError/alloc_extend:KeyError", UNDECLARED)
    assert caps.checked_calls == (
        ("alloc", (ValueError,)),
        ("alloc_extend", (KeyError,)),
        ("free", (ValueError,)),
    )
    assert set(caps.error_types) == {ValueError, KeyError}
    assert caps.error_types_for("alloc_extend") == (KeyError,) and not caps.checks("alloc_decode")
    assert caps.source_of("checked") == "option"
    text = caps.value_text("checked")
    assert parse_declaration(f"checked={text}", UNDECLARED).checked_calls == caps.checked_calls
    # a plain value replaces the per-call form
    assert parse_declaration("checked=ValueError", caps).checked_calls == ()
    for bad in ("checked=alocc:ValueError", "checked=alloc:", "checked=:ValueError"):
        with pytest.raises(ValueError, match="checked"):
            parse_declaration(bad, UNDECLARED)


def test_oracle_bad_kinds_are_sent_only_to_checked_calls() -> None:
    assert set(BAD_KIND_CALLS) == set(BAD_CALLS)
    partial = PAGED.replace(checked={("alloc", "free"): ValueError})
    full = PAGED.replace(checked=ValueError)
    for kind, call in BAD_KIND_CALLS.items():
        assert kind_checked(kind, full)
        assert kind_checked(kind, partial) == (call in ("alloc", "free")), kind
        needs = EVENTS[f"bad.{kind}"].needs
        if call not in ("alloc", "free"):
            assert not needs(partial, 4, False), kind  # the coverage gate does not require it


def test_oracle_hint_lists_every_capability_whose_methods_are_missing() -> None:
    """A full declaration on an allocator without most methods: the run fails on the first
    missing method, and the hint names every capability to switch off at once."""
    import partial_allocator as mod

    def make_full(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> object:
        return mod.LowestFirstAllocator(size, page_size, device)

    make_full.kvpool_capabilities = PAGED.replace(checked=False, reference_order=False)  # type: ignore[attr-defined]
    mod.make_full = make_full  # type: ignore[attr-defined]
    try:
        [planned] = plan("partial_allocator:make_full", page_sizes=[4], need_sort=[False])
    finally:
        del mod.make_full  # type: ignore[attr-defined]
    lacking = planned.target.caps.lacking
    for declaration in ("extend=false", "segments=none", "page_ids=false", "base_api=false",
                        "resize=false", "clear=false", "merge=false", "need_sort=false",
                        "capacity_hooks=false"):
        assert declaration in lacking, lacking
    result = run_config(planned.target, planned.configs[0], max_examples=20)
    failure = result.failure
    assert failure is not None and "AttributeError" in failure.detail, failure
    assert failure.hint is not None and ",".join(lacking) in failure.hint, failure.hint


def test_oracle_hybrid_partial_declaration_takes_the_undeclared_default() -> None:
    def make(**kwargs: object) -> None:
        raise AssertionError("not built")

    make.kvpool_hybrid_capabilities = HybridCapabilities(  # type: ignore[attr-defined]
        checked={("free", "free_swa"): ValueError}, page_sizes=(4,)
    )
    caps = family("hybrid").target(make).caps
    assert caps.complete and caps.page_sizes == (4,) and caps.checks("free_swa")
    assert not caps.checks("free_full") and caps.groups and caps.resize_grow
    assert caps.source_of("groups") == "default" and caps.source_of("checked") == "declared"
    assert FULL.complete and FULL.replace(checked=False).complete


def test_oracle_cli_declare_takes_the_per_call_form() -> None:
    """``--declare checked=alloc+free:ValueError`` on an undeclared factory."""
    [planned] = plan("minimal_allocator:make_checked", declare="checked=alloc+free:ValueError")
    caps = planned.target.caps
    assert caps.checks("free") and caps.checks("alloc") and not caps.checks("alloc_extend")
    assert "checked=alloc+free:ValueError (option)" in planned.in_force()
