"""Hostile calls of every ``kvpool.impl._native`` function, each in a forked child.

The cases are :func:`fuzz_native.native_case_for`'s: the table of every entry point with one
argument replaced by each hostile value of its role, then seeded mixes. A case passes when its
child exits normally and the call raised a Python exception with nothing written, or gave the
result the loop documents (:func:`fuzz_native.run_call`); a signal (SIGFPE, SIGSEGV, a
sanitizer's abort) or a wrong result fails it with a command that replays it. The default run
takes every ``SAMPLE_EVERY``-th case of the table; ``pytest -m fuzz tests/fuzz`` runs the whole
table and ``KVPOOL_FUZZ_NATIVE_MIXES`` (default 600) mixes.

Skipped where the extension is not built; under ``KVPOOL_REQUIRE_NATIVE=1`` that fails.
"""

from __future__ import annotations

import json
import os

import pytest
from fuzz_judge import repro
from fuzz_native import BASELINES, TABLE, native_case_for
from fuzz_server import ForkServer
from kvpool.impl.native_ops import native_available

SAMPLE_EVERY = 12
MIXES = int(os.environ.get("KVPOOL_FUZZ_NATIVE_MIXES", "600"))
FULL = len(TABLE) + MIXES


@pytest.fixture(autouse=True)
def _extension_built() -> None:
    """Skip where the extension is not built, unless it is required."""
    if not native_available():
        if os.environ.get("KVPOOL_REQUIRE_NATIVE") == "1":
            pytest.fail("kvpool.impl._native is not built (KVPOOL_REQUIRE_NATIVE=1)")
        pytest.skip("kvpool.impl._native is not built")


def check_native_case(server: ForkServer, index: int) -> None:
    """Runs case ``index`` in a child and fails with a replayable report."""
    case = native_case_for(index)
    answer = server.run(case, "entry")
    where = f"case {index} ({case['entry']}, {case['label']})"
    replay = f"\ncase: {json.dumps(case)}\nreplay: {repro(case, 'entry')}"
    if answer["status"] == "signal":
        pytest.fail(f"{where}: killed by {answer['signal_name']}\n{answer['stderr'][-800:]}"
                    + replay)
    assert answer["status"] == "ok", f"{where}: exit {answer.get('code')}\n" \
        f"{answer['stderr'][-800:]}{replay}"
    verdict = answer["verdict"]
    assert "error" not in verdict, f"{where}: the case did not run: {verdict['error']}{replay}"
    assert not verdict["problems"], f"{where}: {verdict}{replay}"


def test_the_table_covers_every_entry_point() -> None:
    """Every exported function has a valid call and hostile variants of each argument."""
    from kvpool.impl import _native  # type: ignore[attr-defined]

    exported = {n for n in dir(_native) if not n.startswith("_") and callable(getattr(_native, n))}
    assert exported == set(BASELINES)
    for name, args in BASELINES.items():
        labels = {c["label"] for c in TABLE if c["entry"] == name}
        assert {f"arg {i} variant 0" for i in range(len(args))} <= labels, name


@pytest.mark.parametrize("index", range(0, len(TABLE), SAMPLE_EVERY))
def test_native_sample(fork_server: ForkServer, index: int) -> None:
    """The default run's sample of the table."""
    check_native_case(fork_server, index)


@pytest.mark.fuzz
@pytest.mark.parametrize("index", range(FULL))
def test_native_full(fork_server: ForkServer, index: int) -> None:
    """The whole table and the seeded mixes (``-m fuzz``)."""
    check_native_case(fork_server, index)


def _planted(monkeypatch: pytest.MonkeyPatch, name: str, fake: object) -> list[str]:
    """The judge's problems for the valid call of ``name`` answered by ``fake`` instead."""
    from fuzz_native import run_call
    from kvpool.impl import _native  # type: ignore[attr-defined]

    monkeypatch.setattr(_native, name, fake)
    problems: list[str] = run_call(native_case_for(list(BASELINES).index(name)))["problems"]
    return problems


def test_the_judge_flags_planted_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong value, a write past the buffer, a raise after a write, a SystemError and a None
    that wrote are each a problem; the valid calls themselves pass."""
    from fuzz_native import run_call

    for index in range(len(BASELINES)):
        assert run_call(native_case_for(index))["problems"] == [], index

    def off_by_one(slots: object, ps: int, out: object) -> bool:
        out[:] = [v // ps + 1 for v in slots.tolist()]  # type: ignore[attr-defined,index]
        return True

    def past_the_end(buf: object, start: int, src: object) -> bool:
        buf.base[-1] = 0  # type: ignore[attr-defined]  # the margin after the view
        return True

    def raise_after_sorting(values: object) -> bool:
        values.sort()  # type: ignore[attr-defined]
        raise ValueError("planted")

    def system_error(*args: object) -> None:
        raise SystemError("planted")

    def none_after_writing(pages: object) -> None:
        pages[0] = 99  # type: ignore[index]

    assert any("arrays" in p for p in _planted(monkeypatch, "page_ids", off_by_one))
    assert any("sentinel" in p for p in _planted(monkeypatch, "write_at", past_the_end))
    assert _planted(monkeypatch, "sort_values", raise_after_sorting) == ["raised after writing"]
    assert any("SystemError" in p for p in _planted(monkeypatch, "decode_count", system_error))
    assert _planted(monkeypatch, "distinct_runs", none_after_writing)
