"""kvpool.spec is pure Python on the standard library only: anyone can run it without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROBE = """
import json, sys
before = set(sys.modules)
import kvpool.spec
loaded = sorted(set(sys.modules) - before)
print(json.dumps({"loaded": loaded, "stdlib": sorted(sys.stdlib_module_names)}))
"""


def test_import_loads_only_the_standard_library() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    report = json.loads(out)
    stdlib = set(report["stdlib"])
    loaded = report["loaded"]
    assert "kvpool.spec.model" in loaded  # the probe sees the import
    foreign = [name for name in loaded
               if name.split(".")[0] not in stdlib and name.split(".")[0] != "kvpool"]
    assert foreign == [], f"kvpool.spec imports non-stdlib modules: {foreign}"
    kvpool_modules = [name for name in loaded if name.split(".")[0] == "kvpool"]
    assert all(name == "kvpool" or name.startswith("kvpool.spec") for name in kvpool_modules), (
        kvpool_modules)


IDENTITY_PROBE = """
import spec, spec.errors, spec.rules
import kvpool.spec, kvpool.spec.errors, kvpool.spec.rules
assert spec is kvpool.spec, spec
assert spec.errors is kvpool.spec.errors and spec.rules is kvpool.spec.rules
assert spec.ContractViolation is kvpool.spec.ContractViolation
try:
    spec.rules.check_alloc(3, 2)
except kvpool.spec.ContractViolation as err:
    print(err.clause)
"""


def test_import_spec_from_the_root_is_kvpool_spec() -> None:
    """``import spec`` with the repository root on ``sys.path`` (``python -m pytest`` puts it
    there) gives kvpool.spec's modules, not a second copy: one ``ContractViolation`` class."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", IDENTITY_PROBE], check=True, capture_output=True,
                         text=True, timeout=60, cwd=root).stdout
    assert out.split() == ["ALLOC-1"]
