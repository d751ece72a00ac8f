"""How many examples reach the events the coverage gate found missing: an honest estimate.

When ``--require-coverage`` fails, the configurations that can reach a missing event run again
with the same seed and doubled budgets (2x, 4x, 8x the run's ``--examples``; the cap), and the
report says the first budget that reached each event, or that none up to the cap did. Nothing
is extrapolated: every budget printed was run.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..engine.runner import Result, run_config
from ..engine.target import Target

CAP_FACTOR = 8  # the largest budget tried, as a multiple of the run's examples


def missing_events(pairs: list[tuple[Result, Target]], cmap: Any) -> list[str]:
    """Events some configuration of one target can reach that none reached (the gate's)."""
    reached: Counter[str] = Counter()
    needed: set[str] = set()
    for r, t in pairs:
        reached.update(r.coverage)
        needed.update(cmap.required(t.caps, r.config.page_size, r.config.need_sort))
    return [name for name in cmap.events if name in needed and not reached.get(name)]


def estimate(
    results: list[Result],
    targets: list[Target],
    cmap: Any,
    *,
    examples: int,
    seed: int | None,
    step_count: int,
    cap_factor: int = CAP_FACTOR,
) -> list[str]:
    """Per target, one line per budget that reached missing events (which), and one for those
    the cap did not reach. ``results[i]`` ran ``targets[i]``."""
    by_target: dict[str, list[tuple[Result, Target]]] = {}
    for r, t in zip(results, targets):
        by_target.setdefault(r.target, []).append((r, t))
    lines = []
    for path, pairs in by_target.items():
        left = set(missing_events(pairs, cmap))
        budget = examples
        while left and budget < examples * cap_factor:
            budget *= 2
            found: set[str] = set()
            for r, t in pairs:
                need = left & set(cmap.required(t.caps, r.config.page_size, r.config.need_sort))
                if need:
                    again = run_config(
                        t, r.config, max_examples=budget, seed=seed, step_count=step_count
                    )
                    found |= {e for e in need if again.coverage.get(e)}
            if found:
                lines.append(f"  coverage gate: {path}: --examples {budget} reaches "
                             f"{', '.join(sorted(found))}")
            left -= found
        if left:
            lines.append(f"  coverage gate: {path}: --examples {budget} does not reach "
                         f"{', '.join(sorted(left))} (check the capabilities declared)")
    return lines
