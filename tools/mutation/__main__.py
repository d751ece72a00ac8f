"""``python -m tools.mutation``: the mutation score of spec/, impl/ and the oracle's comparisons.

Every mutant of every file in :data:`~tools.mutation.config.TARGETS` runs against that file's
tests (fixed Hypothesis seed under the ``dev`` profile, or ``--profile ci``); each survivor is
re-run with the other seeds and the other profile. Writes ``table.md`` and ``results.json``
under ``--out`` and exits 1 when a survivor is not in the equivalents file (or an entry there
is stale), 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from . import config
from .coverage import CoverageMap
from .operators import Mutant, mutants_of
from .report import FileScore, load_equivalents, write_report
from .runner import KILLED, SURVIVED, TIMEOUT, Outcome, Pool, Run, preload


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tools.mutation", description=__doc__)
    p.add_argument("--profile", choices=("dev", "ci"), default="dev",
                   help="dev: Hypothesis seed fixed (default); ci: the derandomized ci profile")
    p.add_argument("--files", nargs="*", default=None, help="a subset of the targets")
    p.add_argument("--jobs", type=int, default=2, choices=(1, 2), help="parallel runs (<= 2)")
    p.add_argument("--out", type=Path, default=None,
                   help="where table.md and results.json go (default mutation-results/PROFILE)")
    p.add_argument("--no-rerun", action="store_true", help="skip re-running the survivors")
    p.add_argument("--list", action="store_true", help="list the mutants and exit")
    p.add_argument("--match", nargs="*", default=None, metavar="TEXT",
                   help="only the mutants whose key contains one of these (a survivor's line)")
    p.add_argument("--tests", nargs="*", default=None, metavar="PATH",
                   help="run these tests against every mutant instead of the traced selection "
                        "(quick check of a new test; not for the score)")
    p.add_argument("--rescore", type=Path, default=None, metavar="DIR",
                   help="re-read the equivalents file and rewrite DIR's table; runs nothing")
    return p.parse_args(argv)


def _runs_for(profile: str, seed: int | None) -> tuple[str, int | None]:
    return (profile, None) if profile == "ci" else (profile, seed)


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(f"stopped by signal {signum}")  # unwinds: children killed, sandboxes removed


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    signal.signal(signal.SIGTERM, _stop)
    if args.rescore is not None:
        return _rescore(args.rescore)
    root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True,
                               capture_output=True, text=True).stdout.strip())
    files = args.files or list(config.TARGETS)
    unknown = [f for f in files if f not in config.TARGETS]
    if unknown:
        print(f"not a mutation target: {unknown}; targets: {list(config.TARGETS)}")
        return 2
    mutants: dict[str, list[Mutant]] = {}
    originals: dict[str, bytes] = {}
    for f in files:
        originals[f] = (root / f).read_bytes()
        mutants[f] = [m for m in mutants_of(f, originals[f]) if _compiles(m.apply(originals[f]))
                      and (not args.match or any(text in m.key for text in args.match))]
    if args.list:
        for f in files:
            for m in mutants[f]:
                print(f"{m.line:4d} {m.key}")
        return 0
    equivalents = load_equivalents()
    commit = _commit(root)  # what the sandboxes copy: the tree as it is when the run starts
    profile, seed = _runs_for(args.profile, config.FIXED_SEED)
    out = args.out or root / "mutation-results" / args.profile
    started = time.monotonic()
    preload()
    with tempfile.TemporaryDirectory(prefix="kvpool-mutation-") as work:
        pool = Pool(root, Path(work), args.jobs)
        if args.tests:
            timeouts, coverage = dict.fromkeys(files, 1800.0), None
        else:
            timeouts, coverage = _baselines(pool, files, originals, profile, seed)
        runs, unreached = [], []
        for f in files:
            for m in mutants[f]:
                lines = range(m.line, m.end_line + 1)
                selected = None if coverage is None else coverage[f].select(f, lines)
                if selected == []:
                    unreached.append(Outcome(Run(f, b"", (), profile, seed, 0, m), SURVIVED, 0, ""))
                    continue
                tests = tuple(args.tests or ()) or (
                    config.TARGETS[f] if selected is None else tuple(selected))
                limit = timeouts[f] if coverage is None or selected is None else \
                    coverage[f].timeout_s(selected, timeouts[f])
                runs.append(Run(f, m.apply(originals[f]), tests, profile, seed, limit, m))
        print(f"{len(runs) + len(unreached)} mutants in {len(files)} files ({len(unreached)} on "
              f"lines no test reaches), profile {profile}, seed {seed}", flush=True)
        done = [0]
        out.mkdir(parents=True, exist_ok=True)
        log = (out / "progress.jsonl").open("w")

        finished: list[Outcome] = []  # unreached ones first, then runs as they end

        def progress(o: Outcome) -> None:
            finished.append(o)
            done[0] += 1
            m = o.run.tag
            assert isinstance(m, Mutant)
            log.write(json.dumps({"path": m.path, "key": m.key, "line": m.line,
                                  "status": o.status, "seconds": round(o.seconds, 2)}) + "\n")
            log.flush()
            if o.status == SURVIVED:
                mark = "equivalent" if m.key in equivalents else "SURVIVED"
                print(f"  {mark}: {m.key} (line {m.line})", flush=True)
            if done[0] % 50 == 0:
                print(f"  {done[0]}/{len(runs)} ({time.monotonic() - started:.0f} s)", flush=True)

        for o in unreached:
            progress(o)
        done[0] = 0
        stopped = ""
        try:
            outcomes = unreached + pool.run_all(runs, progress)
        except SystemExit as stop:  # SIGTERM: score the files whose mutants all ran
            outcomes, stopped = finished, str(stop)
        log.close()
        equivalents = load_equivalents()  # read again: entries added while the run went on count
        # an equivalent cannot be killed by another seed: re-run only the real survivors
        survivors = [o for o in outcomes if o.status == SURVIVED
                     and isinstance(o.run.tag, Mutant) and o.run.tag.key not in equivalents]
        reruns = {} if args.no_rerun or stopped else _rerun(pool, survivors, args.profile,
                                                            originals)
    elapsed = time.monotonic() - started
    if stopped:
        ran = {f: sum(o.run.path == f for o in outcomes) for f in files}
        partial = [f"{f} ({ran[f]} of {len(mutants[f])})" for f in files
                   if ran[f] != len(mutants[f])]
        files = [f for f in files if ran[f] == len(mutants[f])]
        outcomes = [o for o in outcomes if o.run.path in files]
        stopped = f"; {stopped}, not scored: {', '.join(partial) or 'none'}"
    scores, survivor_rows = _score(files, outcomes, equivalents, reruns)
    live_keys = {row["key"] for row in survivor_rows}
    stale = [] if args.match or args.tests else [  # a partial run cannot tell
        k for k in equivalents if k.split(" | ")[0] in files and k not in live_keys]
    header = (f"# Mutation run: profile `{args.profile}`"
              f"{f', Hypothesis seed {seed}' if seed is not None else ' (derandomized)'}\n\n"
              f"commit {commit}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
              f"{len(outcomes)} mutants, {args.jobs} parallel runs, {elapsed:.0f} s "
              + ("(no re-runs)" if args.no_rerun or stopped else "(survivors not in the "
                 f"equivalents file re-run with {_rerun_desc(args.profile)})") + stopped)
    text = write_report(out, header, scores, survivor_rows, equivalents, stale)
    print(text)
    real = [r for r in survivor_rows if not r["equivalent"]]
    return 1 if real or stale else 0


def _rescore(out: Path) -> int:
    """Rewrite ``out``'s table from its ``results.json`` with the equivalents file as it is
    (a run killed before it wrote one: from ``progress.jsonl``, see :func:`_from_progress`)."""
    if not (out / "results.json").exists():
        _from_progress(out)
    data = json.loads((out / "results.json").read_text())
    equivalents = load_equivalents()
    scores = []
    for entry in data["files"]:
        s = FileScore(entry["path"], tuple(entry["tests"]), entry["mutants"], entry["killed"])
        for key in entry["survivors"] + entry["equivalent"]:
            (s.equivalent if key in equivalents else s.survivors).append(key)
        scores.append(s)
    rows = data["survivors"]
    for row in rows:
        row["equivalent"] = row["key"] in equivalents
    paths = {s.path for s in scores}
    live = {row["key"] for row in rows}
    stale = [k for k in equivalents if k.split(" | ")[0] in paths and k not in live]
    print(write_report(out, data["header"], scores, rows, equivalents, stale))
    return 1 if stale or any(not row["equivalent"] for row in rows) else 0


def _commit(root: Path) -> str:
    """HEAD's short hash, marked when the tree differs from it (the run scores the tree)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True,
                              text=True).stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=normal")
    return git("rev-parse", "--short", "HEAD") + (" + uncommitted changes" if dirty else "")


def _from_progress(out: Path) -> None:
    """Write ``results.json`` from the outcomes a killed run logged: only the files whose
    mutants (as the tree lists them now, so it must be the tree that run copied) all ended."""
    rows = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True,
                               capture_output=True, text=True).stdout.strip())
    scores, survivors, partial = [], [], []
    for f in dict.fromkeys(r["path"] for r in rows):
        source = (root / f).read_bytes()
        keys = {m.key for m in mutants_of(f, source) if _compiles(m.apply(source))}
        ended = {r["key"]: r for r in rows if r["path"] == f}
        if set(ended) != keys:
            partial.append(f"{f} ({len(keys & set(ended))} of {len(keys)})")
            continue
        s = FileScore(f, config.TARGETS[f], len(keys))
        for r in ended.values():
            if r["status"] == SURVIVED:
                s.survivors.append(r["key"])
                survivors.append({"key": r["key"], "line": r["line"], "equivalent": False,
                                  "reruns": {}})
            else:
                s.killed += 1
        scores.append(s)
    header = (f"# Mutation run read back from {out / 'progress.jsonl'} (stopped before its "
              f"report; no re-runs); not scored: {', '.join(partial) or 'none'}")
    (out / "results.json").write_text(json.dumps(
        {"header": header, "files": [vars(s) for s in scores], "survivors": survivors}))


def _compiles(source: bytes) -> bool:
    try:
        compile(source, "<mutant>", "exec")
    except SyntaxError:
        return False
    return True


def _baselines(pool: Pool, files: list[str], originals: dict[str, bytes], profile: str,
               seed: int | None) -> tuple[dict[str, float], dict[str, CoverageMap]]:
    """Run each distinct test set once unmutated, tracing its files' lines: it must pass; its
    time sets the timeout, its trace which tests each mutant runs."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for f in files:
        groups.setdefault(config.TARGETS[f], []).append(f)
    runs = [Run(fs[0], originals[fs[0]], tests, profile, seed, 3600.0, trace=tuple(fs))
            for tests, fs in groups.items()]
    limits: dict[str, float] = {}
    coverage: dict[str, CoverageMap] = {}
    for o in pool.run_all(runs):
        if o.status != SURVIVED or o.trace is None:
            raise SystemExit(f"the unmutated tests fail ({' '.join(o.run.tests)}):\n{o.log_tail}")
        cov = CoverageMap(o.trace)
        for f in groups[o.run.tests]:
            limits[f] = 3 * o.seconds + 60
            coverage[f] = cov
        print(f"baseline {' + '.join(o.run.tests)}: {o.seconds:.1f} s (traced), "
              f"{len(cov.order)} tests", flush=True)
    return limits, coverage


def _rerun_desc(profile: str) -> str:
    other = ", ".join(f"seed {s}" for s in config.RERUN_SEEDS)
    return f"{other} and the ci profile" if profile == "dev" else \
        f"the dev profile at seeds {config.FIXED_SEED}, {other}"


def _rerun(pool: Pool, survivors: list[Outcome], profile: str,
           originals: dict[str, bytes]) -> dict[str, dict[str, str]]:
    """Each survivor under the other seeds and the other profile: key -> {run: status}."""
    variants: list[tuple[str, str, int | None]] = (
        [(f"seed {s}", "dev", s) for s in config.RERUN_SEEDS] + [("ci", "ci", None)]
        if profile == "dev" else
        [(f"seed {s}", "dev", s) for s in (config.FIXED_SEED, *config.RERUN_SEEDS)])
    runs = []
    for o in survivors:
        m = o.run.tag
        assert isinstance(m, Mutant)
        source = m.apply(originals[m.path])
        tests = _rerun_tests(o.run.tests) or config.TARGETS[m.path]
        runs += [Run(m.path, source, tests, p, s, 1800.0, (m, name)) for name, p, s in variants]
    if runs:
        print(f"re-running {len(survivors)} survivors ({len(runs)} runs)", flush=True)
    result: dict[str, dict[str, str]] = {}
    for o in pool.run_all(runs):
        tag = o.run.tag
        assert isinstance(tag, tuple)
        m, name = tag
        status = "killed" if o.status in (KILLED, TIMEOUT) else o.status
        result.setdefault(m.key, {})[name] = status
    return result


def _rerun_tests(selected: tuple[str, ...]) -> tuple[str, ...]:
    """The test modules of a survivor's selected tests: other seeds may take other paths
    through the same tests (empty: the whole set, for a mutant no test reached)."""
    return tuple(dict.fromkeys(t.split("::")[0] for t in selected))


def _score(files: list[str], outcomes: list[Outcome], equivalents: dict[str, str],
           reruns: dict[str, dict[str, str]]) -> tuple[list[FileScore], list[dict[str, object]]]:
    scores = {f: FileScore(f, config.TARGETS[f]) for f in files}
    rows: list[dict[str, object]] = []
    for o in outcomes:
        m = o.run.tag
        assert isinstance(m, Mutant)
        s = scores[m.path]
        s.mutants += 1
        if o.status == SURVIVED:
            eq = m.key in equivalents
            (s.equivalent if eq else s.survivors).append(m.key)
            rows.append({"key": m.key, "line": m.line, "equivalent": eq,
                         "reruns": reruns.get(m.key, {})})
        else:
            s.killed += 1  # killed, timed out, or broke the import (error)
    return list(scores.values()), rows


if __name__ == "__main__":
    sys.exit(main())
