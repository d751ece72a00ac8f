"""The allocator families: one record each, everything about a family that code outside its
subpackage (``oracle/families/<name>/``) needs, as plain data.

A :class:`Registered` entry names the module that declares the family's ``FAMILY`` (its
scheduler model's module), its call table and a repro's extra import lines (``module:NAME``
paths, imported on first use), its target aliases and default target, its default budget and
its ``--help`` line. Kept apart from :mod:`kvpool.oracle.engine.families` so that naming a
family (the command line's ``--family`` check and ``--help``, the pytest plugin's options,
``--jobs`` / ``--rounds``) loads nothing else: Hypothesis draws integers partly from the
constants of the loaded local modules, so a run loads the modules of its own family only.
The command line, the pytest plugin, the call-table lookup (:mod:`.calltables`) and the
:class:`~kvpool.oracle.engine.families.Family` record read this; nothing else names a family.

A family from outside the package (its modules anywhere importable) is added by naming its
record in the environment variable ``KVPOOL_ORACLE_FAMILIES`` (``name=module:RECORD``, comma
separated), read when this module loads (:func:`register_from_env`), so the processes a run
starts know it too; or, within one process, by putting the record into :data:`FAMILIES`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_PKG = "kvpool.oracle.families"
_SINGLE = f"{_PKG}.single.targets"  # the single family's targets


@dataclass(frozen=True)
class Correct:
    """kvpool's own allocator of one shape, on which a printed repro must pass
    (:mod:`.reprocheck`): its factory in checked and in unchecked mode, and what it is."""

    checked: str  # ``module:factory``
    unchecked: str  # ``module:factory``
    name: str  # for the report's line: ``kvpool.impl's PagedTokenToKVPoolAllocator``


@dataclass(frozen=True)
class Registered:
    """One family as the registry holds it. Raises ValueError when ``default_target`` is not
    one of ``aliases`` or an alias names no factory."""

    module: str  # the module whose ``FAMILY`` is the family's record
    examples: int  # default Hypothesis examples per configuration
    steps: int  # default calls per example (rules; a rule may make several calls)
    about: str  # what the family runs, for ``--help``
    calls: str  # ``module:NAME`` of its call table (``name -> Call``)
    aliases: Mapping[str, tuple[str, ...]]  # target alias -> the ``module:factory`` it runs
    default_target: str  # the alias run when no target is named
    repro_imports: str = ""  # ``module:NAME`` of a repro's extra import lines ("": none)
    # "token" / "paged" (the shape a target was judged as; a trace's ``shape`` where the family
    # has others) -> kvpool's correct allocator of that shape (none: a repro is checked on the
    # target only)
    correct: Mapping[str, Correct] = field(default_factory=dict)
    # the module that writes a contract-order repro (``supported``, ``PRELUDE``, ``HELPERS``,
    # ``create_lines``, ``spec_lines``; "": repros are in exact order only)
    contract_repro: str = ""
    census_tensor: bool = False  # get_all_free_pages() is a tensor the caller may write into
    repro_reads_available: bool = False  # a repro asserts available_size() after every call

    def __post_init__(self) -> None:
        if self.default_target not in self.aliases:
            raise ValueError(f"default target {self.default_target!r} is not an alias "
                             f"(aliases: {', '.join(self.aliases)})")
        empty = [name for name, paths in self.aliases.items() if not paths]
        if empty:
            raise ValueError(f"alias {empty[0]!r} names no factory")


def _each(module: str, *aliases: str) -> dict[str, tuple[str, ...]]:
    """Aliases that run one factory each, of ``module``, named as the alias with ``_`` for
    ``-`` (``kvpool-swa`` -> ``module:kvpool_swa``)."""
    return {alias: (f"{module}:{alias.replace('-', '_')}",) for alias in aliases}


DEFAULT_FAMILY = "single"

FAMILIES: dict[str, Registered] = {
    "single": Registered(
        f"{_PKG}.single.machine", 150, 20,
        "single-pool token and paged allocators (SGLang's, vLLM's, kvcached)",
        calls=f"{_PKG}.single.calls:CALLS",
        aliases={
            "kvpool": (f"{_SINGLE}:kvpool_token", f"{_SINGLE}:kvpool_paged"),
            "kvpool-unchecked": (f"{_SINGLE}:kvpool_token_unchecked",
                                 f"{_SINGLE}:kvpool_paged_unchecked"),
            "sglang": (f"{_SINGLE}:sglang_token", f"{_SINGLE}:sglang_paged"),
            "sglang-token": (f"{_SINGLE}:sglang_token",),
            "sglang-paged": (f"{_SINGLE}:sglang_paged",),
            "vllm": (f"{_SINGLE}:vllm_block_pool",),
            "kvcached-token": (f"{_SINGLE}:kvcached_token",),
            "kvcached-paged": (f"{_SINGLE}:kvcached_paged",),
        },
        default_target="kvpool", contract_repro=f"{_PKG}.single.repro_spec", census_tensor=True,
        correct={
            "token": Correct(f"{_PKG}.single.targets:kvpool_token",
                             f"{_PKG}.single.targets:kvpool_token_unchecked",
                             "kvpool.impl's TokenToKVPoolAllocator"),
            "paged": Correct(f"{_PKG}.single.targets:kvpool_paged",
                             f"{_PKG}.single.targets:kvpool_paged_unchecked",
                             "kvpool.impl's PagedTokenToKVPoolAllocator"),
        },
    ),
    "hybrid": Registered(
        f"{_PKG}.hybrid.machine", 60, 30, "sliding-window allocators (SWATokenToKVPoolAllocator)",
        calls=f"{_PKG}.hybrid.calls:HYBRID_CALLS",
        aliases=_each(f"{_PKG}.hybrid.targets", "kvpool-swa", "kvpool-swa-unchecked", "sglang-swa",
                      "kvpool-pure-swa", "sglang-pure-swa"),
        default_target="kvpool-swa", repro_imports=f"{_PKG}.hybrid.calls:REPRO_IMPORTS",
        correct=dict.fromkeys(("token", "paged"), Correct(
            f"{_PKG}.hybrid.targets:kvpool_swa", f"{_PKG}.hybrid.targets:kvpool_swa_unchecked",
            "kvpool.impl's SWATokenToKVPoolAllocator")),
    ),
    "unified": Registered(
        f"{_PKG}.unified.machine", 30, 30,
        "unified memory pools: full + SWA in one byte buffer (UnifiedSWATokenToKVPoolAllocator)",
        calls=f"{_PKG}.unified.calls:UNIFIED_CALLS",
        aliases=_each(f"{_PKG}.unified.targets", "sglang-unified-swa", "sglang-unified-swa-eager",
                      "sglang-unified-swa-lazy", "sglang-unified-tri") | _each(
            f"{_PKG}.unified.kvpool_target", "kvpool-unified", "kvpool-unified-eager",
            "kvpool-unified-lazy", "kvpool-unified-tri", "kvpool-unified-tri-eager",
            "kvpool-unified-tri-lazy", "kvpool-unified-in-sglang",
            "kvpool-unified-tri-in-sglang"),
        default_target="kvpool-unified", repro_imports=f"{_PKG}.unified.calls:REPRO_IMPORTS",
        repro_reads_available=True,  # the oracle reads the capacity views after every call
        correct={
            "full-swa": Correct(f"{_PKG}.unified.kvpool_target:kvpool_unified",
                                f"{_PKG}.unified.kvpool_target:kvpool_unified",
                                "kvpool.impl's UnifiedSWAAllocator"),
            "tri": Correct(f"{_PKG}.unified.kvpool_target:kvpool_unified_tri",
                           f"{_PKG}.unified.kvpool_target:kvpool_unified_tri",
                           "kvpool.impl's UnifiedMambaSWAAllocator"),
        },
    ),
    "mamba_slot": Registered(
        f"{_PKG}.mamba_slot.machine", 100, 20,
        "Mamba state slots of hybrid linear-attention models (MambaSlotAllocator)",
        calls=f"{_PKG}.mamba_slot.calls:MAMBA_SLOT_CALLS",
        aliases=_each(f"{_PKG}.mamba_slot.targets", "kvpool-mamba-slot", "sglang-mamba-slot"),
        default_target="kvpool-mamba-slot", repro_reads_available=True,
        correct=dict.fromkeys(("token", "paged"), Correct(
            f"{_PKG}.mamba_slot.targets:kvpool_mamba_slot",
            f"{_PKG}.mamba_slot.targets:kvpool_mamba_slot",
            "kvpool.impl's MambaSlotAllocator")),
    ),
    "unified_mamba": Registered(
        f"{_PKG}.unified_mamba.machine", 30, 30,
        "unified full + Mamba pools in one byte buffer (UnifiedMambaTokenToKVPoolAllocator)",
        calls=f"{_PKG}.unified_mamba.calls:UNIFIED_MAMBA_CALLS",
        aliases=_each(f"{_PKG}.unified_mamba.targets", "kvpool-unified-mamba",
                      "kvpool-unified-mamba-eager", "kvpool-unified-mamba-lazy",
                      "sglang-unified-mamba", "sglang-unified-mamba-eager",
                      "sglang-unified-mamba-lazy", "kvpool-unified-mamba-in-sglang"),
        default_target="kvpool-unified-mamba",
        repro_imports=f"{_PKG}.unified_mamba.calls:REPRO_IMPORTS", repro_reads_available=True,
        correct=dict.fromkeys(("token", "paged"), Correct(
            f"{_PKG}.unified_mamba.targets:kvpool_unified_mamba",
            f"{_PKG}.unified_mamba.targets:kvpool_unified_mamba",
            "kvpool.impl's UnifiedMambaAllocator")),
    ),
    "page_interleave": Registered(
        f"{_PKG}.page_interleave.machine", 40, 20,
        "logical-page KV sharding over N ranks (PageInterleavePoolAllocator)",
        calls=f"{_PKG}.page_interleave.calls:PAGE_INTERLEAVE_CALLS",
        aliases=_each(f"{_PKG}.page_interleave.targets", "kvpool-page-interleave",
                      "sglang-page-interleave"),
        default_target="kvpool-page-interleave", repro_reads_available=True,
        repro_imports=f"{_PKG}.page_interleave.calls:REPRO_IMPORTS",
        correct=dict.fromkeys(("token", "paged"), Correct(
            f"{_PKG}.page_interleave.targets:kvpool_page_interleave",
            f"{_PKG}.page_interleave.targets:kvpool_page_interleave",
            "kvpool.impl's PageInterleavePoolAllocator")),
    ),
    "hisparse": Registered(
        f"{_PKG}.hisparse.machine", 60, 25,
        "HiSparse logical + device-buffer pools (HiSparseTokenToKVPoolAllocator, DeepSeek V4's)",
        calls=f"{_PKG}.hisparse.calls:HISPARSE_CALLS",
        aliases=_each(f"{_PKG}.hisparse.targets", "kvpool-hisparse", "sglang-hisparse",
                      "kvpool-hisparse-dsv4", "sglang-hisparse-dsv4"),
        default_target="kvpool-hisparse", repro_reads_available=True,
        correct=dict.fromkeys(("token", "paged"), Correct(
            f"{_PKG}.hisparse.targets:kvpool_hisparse",
            f"{_PKG}.hisparse.targets:kvpool_hisparse",
            "kvpool.impl's HiSparse allocator (DeepSeekV4HiSparseAllocator for DeepSeek V4 "
            "sizes)")),
    ),
}

# the built-in families (a family added by ``KVPOOL_ORACLE_FAMILIES`` or a test is not here:
# the clause accounting against SPEC.md, ``families.all_mapped``, covers these)
FAMILY_MODULES: dict[str, str] = {name: r.module for name, r in FAMILIES.items()}

ENV = "KVPOOL_ORACLE_FAMILIES"  # more families: ``name=module:RECORD``, comma-separated


def register_from_env(value: str | None) -> list[str]:
    """Add to :data:`FAMILIES` each family that ``value`` names (``KVPOOL_ORACLE_FAMILIES``'s
    form: ``name=module:RECORD[,name=module:RECORD...]``, ``RECORD`` a :class:`Registered` in
    an importable module); returns the names added. The registry reads the variable when it is
    imported, so a child process (``--jobs``' workers, a subprocess) that inherits the
    environment knows the same families. Empty or None: nothing. Raises ValueError for an
    entry without ``=``, a built-in family's name or a path that names no record, ImportError
    / AttributeError (naming the variable) when a path does not import."""
    added = []
    for entry in filter(None, (part.strip() for part in (value or "").split(","))):
        name, sep, path = entry.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"{ENV}: {entry!r} is not name=module:RECORD")
        if name in FAMILY_MODULES:
            raise ValueError(f"{ENV}: {name!r} is a built-in family")
        try:
            record = load(path.strip())
        except (ImportError, AttributeError) as err:
            raise type(err)(f"{ENV}: {entry!r}: {err}") from err
        if not isinstance(record, Registered):
            raise ValueError(f"{ENV}: {path.strip()!r} is not a Registered record")
        FAMILIES[name] = record
        added.append(name)
    return added


def registered(name: str) -> Registered:
    """The registry's record of family ``name``. Raises ValueError for an unknown family
    (naming the known ones)."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown allocator family {name!r}; known: {sorted(FAMILIES)}") from None


def load(path: str) -> Any:
    """The object a ``module:NAME`` path names (``NAME`` may be dotted), its module imported.
    Raises ValueError for a path without ``:``, ImportError / AttributeError as importing and
    looking it up raise them."""
    module, sep, name = path.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"{path!r} is not of the form module:NAME")
    found: Any = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part)
    return found


register_from_env(os.environ.get(ENV))


def budget_text(name: str) -> str:
    """``name``'s default budget in words: ``30 examples, 30 steps``. Raises ValueError for an
    unknown family."""
    r = registered(name)
    return f"{r.examples} examples, {r.steps} steps"


def targets_text(name: str) -> str:
    """``name``'s target aliases, its default first: ``targets: kvpool (default), sglang``.
    Raises ValueError for an unknown family."""
    r = registered(name)
    others = [alias for alias in r.aliases if alias != r.default_target]
    return f"targets: {r.default_target} (default){''.join(', ' + a for a in others)}"


def family_help(*, one_line: bool = False) -> str:
    """Every registered family with its default budget, what it runs and its targets, for
    ``--help``: two lines a family under a heading, or (``one_line``) all of them in one line."""
    if one_line:
        return f"allocator family (default {DEFAULT_FAMILY}); " + "; ".join(
            f"{name}: {budget_text(name)} by default, target {r.default_target}"
            for name, r in FAMILIES.items())
    width = max(map(len, FAMILIES))
    rows = []
    for name, r in FAMILIES.items():
        rows += [f"  {name:{width}s} {budget_text(name)}: {r.about}",
                 f"  {'':{width}s} {targets_text(name)}"]
    return "\n".join([f"allocator family (default {DEFAULT_FAMILY}):", *rows])


def target_help(family_option: str) -> str:
    """The aliases of every family in one line (each family's default first), for the help of
    a target option beside ``family_option``: ``module:factory or an alias of the
    --kvpool-family (single: kvpool (default), ...; ...)``."""
    per_family = "; ".join(f"{name}: {targets_text(name).removeprefix('targets: ')}"
                           for name in FAMILIES)
    return f"module:factory or an alias of the {family_option} ({per_family})"
