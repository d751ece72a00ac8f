"""Adversarial calls on every public method of the three allocators, each in a forked child.

The default run takes the first ``SAMPLE_CASES`` seeds; ``pytest -m fuzz tests/fuzz`` runs the
first ``KVPOOL_FUZZ_CASES`` (default 3000, the sample's included). Each case runs on kvpool's
numpy and compiled CPU backends and on SGLang 0.5.23 (reference only);
:func:`fuzz_judge.problems` states the rules.
A failure prints the case and a command that replays it in a fresh process.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from fuzz_cases import case_for
from fuzz_judge import problems, repro, sglang_summary
from fuzz_server import ForkServer
from kvpool.impl.native_ops import native_available

SAMPLE_CASES = 200
FULL_CASES = int(os.environ.get("KVPOOL_FUZZ_CASES", "3000"))
TARGETS = ("numpy", "native") if native_available() else ("numpy",)
# SGLang beside kvpool, for the failure reports (KVPOOL_FUZZ_SGLANG=0 leaves it out: the
# sanitizer run, where it adds only time)
PEERS = ("sglang",) if os.environ.get("KVPOOL_FUZZ_SGLANG", "1") != "0" else ()


def check_seed(server: ForkServer, seed: int) -> None:
    """Runs the case of ``seed`` on every target and fails with a replayable report."""
    case = case_for(seed)
    answers: dict[str, Any] = {t: server.run(case, t) for t in (*TARGETS, *PEERS)}
    found = problems(case, answers)
    if "native" in TARGETS and answers["native"]["status"] == "ok":
        assert answers["native"]["verdict"].get("backend") in ("NativeOps", "NoneType"), \
            "the native child did not run the compiled backend"
    assert not found, (
        f"seed {seed} ({case['scenario']}, {case['alloc']}): " + "\n".join(found)
        + f"\nSGLang 0.5.23: {sglang_summary(answers.get('sglang'))}"
        + f"\ncase: {json.dumps(case)}\nreplay: {repro(case, 'native')}")


@pytest.mark.parametrize("seed", range(SAMPLE_CASES))
def test_fuzz_sample(fork_server: ForkServer, seed: int) -> None:
    """The fast sample of the default run."""
    check_seed(fork_server, seed)


@pytest.mark.fuzz
@pytest.mark.parametrize("seed", range(FULL_CASES))
def test_fuzz_full(fork_server: ForkServer, seed: int) -> None:
    """The whole suite (``-m fuzz``)."""
    check_seed(fork_server, seed)
