"""What kvpool and SGLang 0.5.23 do with the fuzz cases, tallied per scenario and outcome.

``python tests/fuzz/fuzz_report.py [num_cases]`` (default 300) runs seeds ``0..num_cases-1``
through the fork server on kvpool's two CPU backends and SGLang and prints one line per
(scenario, whether the case names a guard clause, kvpool's outcome, SGLang's outcome) with its
count. An outcome is per call: ``accepted``, the exception class, or how the child died.
Informational: the tests judge kvpool alone (:mod:`fuzz_judge`); SGLang is not required to
reject anything.
"""

from __future__ import annotations

import sys
from collections import Counter

from fuzz_cases import case_for
from fuzz_judge import sglang_summary
from fuzz_server import ForkServer


def tally(num_cases: int) -> Counter[tuple[str, str, str, str, str]]:
    """Counts of (scenario, guard clause or '-', numpy, native, SGLang) outcomes."""
    server = ForkServer()
    counts: Counter[tuple[str, str, str, str, str]] = Counter()
    try:
        for seed in range(num_cases):
            case = case_for(seed)
            numpy, native, sglang = (sglang_summary(server.run(case, t))
                                     for t in ("numpy", "native", "sglang"))
            guard = case.get("guard", {}).get("clause", "-")
            counts[(case["scenario"], guard, numpy, native, sglang)] += 1
    finally:
        server.close()
    return counts


if __name__ == "__main__":
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    print("count | scenario | guard | kvpool numpy | kvpool native | SGLang 0.5.23")
    for (scenario, guard, numpy, native, sglang), n in sorted(tally(total).items()):
        print(f"{n} | {scenario} | {guard} | {numpy} | {native} | {sglang}")
