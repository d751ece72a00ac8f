"""A unified target that declares nothing gets a hint naming the declarations it would pass
under: probes of fresh instances (:mod:`kvpool.oracle.families.unified.fits`) find them.

SGLang's composite, wrapped without a declaration (``undeclared_unified.py``), fails at once:
its census misses a page freed twice (``UNI-13`` at the constructor). The hint names every rule
its registry entries exclude beyond an undeclared target's defaults, and the run passes under
exactly those declarations. It runs in subprocesses (importing SGLang's runtime changes what
later tests of a process see); skipped when SGLang is not installed, unless ``CI`` is set
(the availability rule: ``kvpool.oracle.peers.availability``). The probes' decisions are
checked without SGLang too, on a stand-in factory and executor.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from kvpool.oracle.engine.families import family
from kvpool.oracle.engine.report import Failure, OracleFailure, latest_failure
from kvpool.oracle.engine.trace import Trace
from kvpool.oracle.families.unified.fits import fitting
from kvpool.oracle.families.unified.targets import UnifiedCapabilities, registered_for
from kvpool.oracle.peers.availability import raise_if_child_missing, require_installed
from test_oracle_cli import _run

SGLANG_CHECK = """\
from kvpool.oracle.families.unified.peer import load_unified
from kvpool.oracle.peers.availability import PeerUnavailable, exit_if_missing
try:
    load_unified()
except PeerUnavailable as err:
    exit_if_missing(err)
    raise
"""


def _load_sglang_in_a_child(cwd: Path) -> None:
    """SGLang's unified pools load in a child process; ``PeerNotInstalled`` (the availability
    rule's skip, outside CI) when SGLang is not installed, a failure when it does not load."""
    require_installed("sglang")
    r = _run(["-c", SGLANG_CHECK], cwd)
    raise_if_child_missing(r.returncode, r.stderr)
    assert r.returncode == 0, r.stderr[-2000:]


def _needed() -> set[str]:
    """What SGLang's registry entries exclude beyond what an undeclared target assumes."""
    undeclared = UnifiedCapabilities(checked=False)
    excluded = {(d.excludes[0], str(d.excludes[1]).lower()) for d in registered_for(
        "sglang-unified")}
    return {f"{n}={v}" for n, v in excluded if undeclared.value_text(n) != v}


@pytest.mark.peers
def test_an_undeclared_unified_target_is_told_the_declarations_that_fit(tmp_path: Path) -> None:
    _load_sglang_in_a_child(tmp_path)
    run = ["-m", "kvpool.oracle", "--family", "unified", "undeclared_unified:make",
           "--examples", "10", "--trace-dir", str(tmp_path)]
    first = _run(run, tmp_path, timeout=600)
    assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-3000:]
    summary = first.stdout.split("\nsummary\n")[1]
    assert "0 calls" in summary and "the constructor already diverges: UNI-13" in summary
    hints = re.findall(r"^hint: .*--declare (\S+)$", first.stdout, re.MULTILINE)
    assert len(hints) == first.stdout.count("FAIL UNI-13") // 2 == 3, first.stdout  # per config
    assert len(set(hints)) == 1
    assert set(hints[0].split(",")) == _needed() == {
        "census_tables=false", "decode_ps1=false", "free_any_order=false"}
    again = _run([*run, "--declare", hints[0]], tmp_path, timeout=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "conformant" in again.stdout.split("\nsummary\n")[1]


# -- the probes' decisions, without SGLang ------------------------------------------------------
class _Pool:
    """A stand-in instance whose census reports nothing, whatever state it is in."""

    def alloc(self, n: int) -> torch.Tensor:
        return torch.arange(1, n + 1)

    def free(self, ids: torch.Tensor) -> None:
        pass

    def verify_byte_accounting(self) -> list[str]:
        return []


def blind_census(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu",
                 need_sort: bool = False) -> Any:
    return _Pool()


def _failure(call: str) -> OracleFailure:
    trace = Trace("probe", 1, False, "cpu", "exact", family="unified")
    return OracleFailure(Failure("UNI-8", f"{call} diverges", trace, "", ""))


class _Executor:
    """A stand-in executor: ``alloc`` hands out ids from 1, ``broken`` calls diverge."""

    broken: tuple[str, ...] = ("alloc_decode",)

    def __init__(self, target: Any, config: Any) -> None:
        self.page_size = config.page_size
        self.model = SimpleNamespace(available_size=lambda: 8)

    def create(self, total_bytes: int, lazy: bool) -> None:
        pass

    def call(self, name: str, **args: Any) -> Any:
        if name in self.broken:
            raise _failure(name)
        return list(range(1, args["need_size"] + 1)) if name == "alloc" else None


class _AllocBroken(_Executor):
    broken = ("alloc",)


def test_probes_name_what_an_undeclared_target_does_not_follow() -> None:
    """The census probe that missed names its capability; of the undeclared behaviour
    capabilities, those whose sequence diverges only in their own form; probe failures are
    not kept as the run's failure."""
    undeclared = family("unified").target(blind_census).caps
    assert undeclared.source_of("decode_ps1") == "default"
    before = latest_failure()
    assert fitting(_Executor, blind_census, undeclared) == [
        "census_tables=false", "decode_ps1=false"]
    assert latest_failure() is before


def test_probes_leave_declared_capabilities_and_uninformative_sequences_alone() -> None:
    declared = UnifiedCapabilities(checked=False)  # decode_ps1=True declared: not probed
    assert fitting(_Executor, blind_census, declared) == ["census_tables=false"]
    undeclared = family("unified").target(blind_census).caps
    # every alloc diverges: the decode sequence fails in both forms and proves nothing
    assert fitting(_AllocBroken, blind_census, undeclared) == ["census_tables=false"]
