"""A failing coverage gate says, in plain words, how many examples reach each missing event.

The estimate is run, not extrapolated: each budget it names is checked here by running the
configuration with that budget and finding the events it says that budget reaches.
"""

from __future__ import annotations

import re

import pytest
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config
from kvpool.oracle.entry.cli import main
from kvpool.oracle.families.single.targets import load_target

PATH = "kvpool.oracle.families.single.targets:kvpool_paged"


def test_the_gate_names_the_budget_that_reaches_each_missing_event(
    tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [PATH, "--examples", "2", "--page-sizes", "4", "--need-sort", "false",
            "--require-coverage", "--trace-dir", str(tmp_path)]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "0! = it can, no configuration did" in out  # the legend, in plain words
    assert "how many examples reach them" in out
    reached = re.findall(rf"coverage gate: {re.escape(PATH)}: --examples (\d+) reaches (.+)", out)
    assert reached, out
    budget, events = int(reached[0][0]), reached[0][1].split(", ")
    again = run_config(load_target(PATH), Config(4, False), max_examples=budget)
    assert all(again.coverage.get(e) for e in events), (events, again.coverage)
    before = run_config(load_target(PATH), Config(4, False), max_examples=2)
    assert not any(before.coverage.get(e) for e in events)
