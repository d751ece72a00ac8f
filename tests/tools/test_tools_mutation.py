"""The mutation driver (``python -m tools.mutation``): what it mutates, its keys, its files.

Fast checks only; the mutation run itself is on demand (``.ci/mutation``, CONTRIBUTING).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools.mutation import config  # noqa: E402
from tools.mutation.coverage import IMPORT, CoverageMap  # noqa: E402
from tools.mutation.operators import mutants_of  # noqa: E402
from tools.mutation.report import load_equivalents  # noqa: E402

SAMPLE = '''"""Module docstring: 1 + 2 is not code."""
LIMIT: int | None = 3


def f(a: int, b: int | None = None) -> int:
    """Docstring with 4 < 5."""
    if a < b and not a:
        raise ValueError(f"{a + 1}")
    x = min(a, b) + a * 2
    x += 1
    for _ in range(a):
        continue
    return x  # pragma: no mutate: a - b
'''


def _descs(source: str) -> list[str]:
    return [m.description for m in mutants_of("s.py", source.encode())]


def test_operators_and_what_they_skip() -> None:
    descs = _descs(SAMPLE)
    assert "compare < -> <= (#0)" in descs and "boolop and -> or" in descs
    assert "not removed" in descs and "raise removed" in descs
    assert "minmax min -> max" in descs and "binop * -> //" in descs
    assert "binop += -> -=" in descs and "stmt removed" in descs
    assert "continue -> break" in descs and "const 2 -> 3" in descs
    # docstrings, annotations (int | None), f-strings and the pragma line are left alone
    assert "binop | -> &" not in descs and "binop - -> +" not in descs
    assert descs.count("const 3 -> 4") == 1  # LIMIT's value, not the docstring's digits
    assert "binop + -> -" in descs  # min(a, b) + a * 2, not the f-string's a + 1
    assert sum(d == "binop + -> -" for d in descs) == 1


def test_every_mutant_compiles_and_changes_the_code() -> None:
    source = SAMPLE.encode()
    tree = ast.dump(ast.parse(source))
    for m in mutants_of("s.py", source):
        mutated = m.apply(source)
        assert ast.dump(ast.parse(mutated)) != tree, m.key


def test_keys_survive_edits_elsewhere_and_are_unique() -> None:
    keys = [m.key for m in mutants_of("s.py", SAMPLE.encode())]
    shifted = [m.key for m in mutants_of("s.py", ("# a new first line\n" + SAMPLE).encode())]
    assert keys == shifted and len(set(keys)) == len(keys)


def test_coverage_map_selects_by_line() -> None:
    dump = {"order": ["t::a", "t::b", "t::c"],
            "lines": {IMPORT: [["s.py", 1]], "t::a": [["s.py", 5]], "t::b": [],
                      "t::c": [["s.py", 5], ["s.py", 6]]}}
    cov = CoverageMap(dump)
    assert cov.select("s.py", [5]) == ["t::a", "t::c"]
    assert cov.select("s.py", [6, 7]) == ["t::c"]
    assert cov.select("s.py", [9]) == []
    assert cov.select("s.py", [1, 5]) is None  # runs at import: the whole test set


def test_coverage_map_times_a_run_by_its_tests() -> None:
    """A run's limit: five times its tests' traced seconds plus a minute, capped by the
    whole set's limit (an old dump without timings: the minute)."""
    dump = {"order": ["t::a", "t::b"], "seconds": {"t::a": 2.0, "t::b": 30.0},
            "lines": {IMPORT: [], "t::a": [["s.py", 5]], "t::b": [["s.py", 5]]}}
    cov = CoverageMap(dump)
    assert cov.timeout_s(["t::a"], 500.0) == 70.0
    assert cov.timeout_s(["t::a", "t::b"], 150.0) == 150.0
    del dump["seconds"]
    assert CoverageMap(dump).timeout_s(["t::a"], 500.0) == 60.0


def test_coverage_map_runs_quick_modules_first() -> None:
    """The same tests, the modules by ascending traced time, each module's order kept."""
    dump = {"order": ["slow.py::x", "slow.py::y", "quick.py::z", "quick.py::w"],
            "seconds": {"slow.py::x": 9.0, "slow.py::y": 0.1, "quick.py::z": 1.0,
                        "quick.py::w": 0.5},
            "lines": {IMPORT: [], **{t: [["s.py", 5]] for t in
                                     ("slow.py::x", "slow.py::y", "quick.py::z", "quick.py::w")}}}
    assert CoverageMap(dump).select("s.py", [5]) == [
        "quick.py::z", "quick.py::w", "slow.py::x", "slow.py::y"]


def test_equivalents_file_names_targets_with_reasons() -> None:
    """Each entry: a target file, a change the operators make, a reason. (Whether the mutant
    still exists and survives is the mutation run's check: it reports stale entries.)"""
    descriptions = ("binop ", "compare ", "boolop ", "not removed", "const ", "minmax ",
                    "stmt removed", "raise removed", "continue -> break", "break -> continue")
    for key, reason in load_equivalents().items():
        path, _, change, *_ = key.split(" | ")
        assert path in config.TARGETS, key
        assert change.startswith(descriptions), key
        assert len(reason) > 20, key


def test_targets_exist_and_name_existing_tests() -> None:
    for path, tests in config.TARGETS.items():
        assert (ROOT / path).is_file(), path
        assert all((ROOT / t).exists() for t in tests), tests
