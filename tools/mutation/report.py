"""The run's results: the score table, the survivors, and the equivalents file it reads.

The equivalents file (``tools/mutation/equivalents.toml``) lists, once each, the mutants that
cannot change behaviour, by their line-number-free key, with the reason::

    [[equivalent]]
    key = "impl/freelist.py | PageRing._span | ... "
    reason = "..."

A survivor not in the file is a gap in the tests; an entry whose mutant no longer exists or no
longer survives is reported as stale so the file stays exact.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

EQUIVALENTS = Path(__file__).with_name("equivalents.toml")


def load_equivalents(path: Path = EQUIVALENTS) -> dict[str, str]:
    """key -> reason; a duplicate key or an entry without a reason is an error."""
    data = tomllib.loads(path.read_text()) if path.exists() else {}
    out: dict[str, str] = {}
    for entry in data.get("equivalent", []):
        key, reason = entry.get("key", ""), entry.get("reason", "").strip()
        if not key or not reason:
            raise ValueError(f"{path}: every equivalent needs a key and a reason: {entry!r}")
        if key in out:
            raise ValueError(f"{path}: {key!r} is listed twice")
        out[key] = reason
    return out


@dataclass
class FileScore:
    path: str
    tests: tuple[str, ...]
    mutants: int = 0
    killed: int = 0
    survivors: list[str] = field(default_factory=list)
    equivalent: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        """Killed over non-equivalent mutants (1.0 when every such mutant is killed)."""
        real = self.mutants - len(self.equivalent)
        return 1.0 if real == 0 else self.killed / real


def table(scores: Sequence[FileScore]) -> str:
    """The Markdown score table."""
    rows = ["| file (tests run) | mutants | killed | survived (equivalent) | score without "
            "equivalents |", "|---|---|---|---|---|"]
    for s in scores:
        survived = len(s.survivors) + len(s.equivalent)
        rows.append(f"| {s.path} ({' + '.join(s.tests)}) | {s.mutants} | {s.killed} | "
                    f"{survived} ({len(s.equivalent)}) | {100 * s.score:.1f}% |")
    total = FileScore("total", ())
    for s in scores:
        total.mutants += s.mutants
        total.killed += s.killed
        total.survivors += s.survivors
        total.equivalent += s.equivalent
    survived = len(total.survivors) + len(total.equivalent)
    rows.append(f"| **total** | {total.mutants} | {total.killed} | {survived} "
                f"({len(total.equivalent)}) | {100 * total.score:.1f}% |")
    return "\n".join(rows)


def write_report(out: Path, header: str, scores: Sequence[FileScore],
                 survivors: Sequence[Mapping[str, object]], equivalents: Mapping[str, str],
                 stale: Sequence[str]) -> str:
    """Write ``table.md`` and ``results.json`` under ``out``; return the Markdown."""
    lines = [header, "", table(scores), ""]
    real = [s for s in survivors if not s["equivalent"]]
    lines.append(f"## Survivors not in the equivalents file ({len(real)})")
    lines.append("")
    for s in real:
        lines.append(f"- `{s['key']}` (line {s['line']}): other runs: {s['reruns']}")
    lines += ["", f"## Equivalent survivors ({len(survivors) - len(real)})", ""]
    for s in survivors:
        if s["equivalent"]:
            lines.append(f"- `{s['key']}` (line {s['line']}): {equivalents[str(s['key'])]}")
    if stale:
        lines += ["", f"## Stale equivalents (no such surviving mutant) ({len(stale)})", ""]
        lines += [f"- `{k}`" for k in stale]
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(text)
    (out / "results.json").write_text(json.dumps(
        {"header": header, "files": [vars(s) for s in scores], "survivors": list(survivors),
         "stale_equivalents": list(stale)}, indent=1, default=str))
    return text
