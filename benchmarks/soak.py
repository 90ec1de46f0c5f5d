"""Soak: the reliability trials of tests/reliability/, longer.

- Kill trials (tests/reliability/kill_trials.py): `kill -9` of the command, its process group,
  the run forked from the warm pool, a worker, the pool, or a run without the pool, at a
  random moment of a run over 300 keys; then a rerun that must give the right values from an
  intact database without rerunning any step recorded before the kill.
- Fuzz cases (tests/reliability/fuzz_corpus.py): malformed pipeline definitions, sensor
  outputs, command lines and settings; each must end with exit 2 naming the cause, or a failed
  step naming it, and never a traceback through barca's own code.

Prints a table per part; `--write` adds it to benchmarks/RESULTS.md. Exit 1 if any trial or
case failed.

    .venv/bin/python benchmarks/soak.py                       # 200 kills, 1,000 fuzz cases
    .venv/bin/python benchmarks/soak.py --kills 30 --fuzz 100 # a shorter run
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "reliability"), str(HERE.parent / "tests")]

import kill_trials  # noqa: E402


def run_kills(count: int, seed: int) -> tuple[list[str], int]:
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="soak"))
    state = Path(tempfile.mkdtemp(prefix="bs"))
    root = work / "project"
    root.mkdir()
    (root / "barca.toml").write_text("")
    by_target: dict[str, list] = defaultdict(list)
    failures = 0
    started = time.monotonic()
    try:
        for salt in range(count):
            target = kill_trials.TARGETS[salt % len(kill_trials.TARGETS)]
            outcome = kill_trials.trial(root, state, target, salt, rng)
            by_target[target].append(outcome)
            if not outcome.ok:
                failures += 1
                print(f"FAILED trial {salt} ({target}, kill at {outcome.delay:.2f}s): "
                      f"{outcome}", file=sys.stderr)
            if (salt + 1) % 20 == 0:
                print(f"  {salt + 1}/{count} kill trials, {failures} failed", file=sys.stderr)
    finally:
        kill_trials.stop_pools(root)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)
    elapsed = time.monotonic() - started
    rows = ["| killed | trials | kill landed mid-run | failed | recorded before kill (median) "
            "| rerun executed (median / max) |",
            "|---|---:|---:|---:|---:|---:|"]
    for target in kill_trials.TARGETS:
        outcomes = by_target[target]
        if not outcomes:
            continue
        landed = [o for o in outcomes if o.killed]
        reruns = [o.rerun for o in landed] or [0]
        rows.append(f"| {target} | {len(outcomes)} | {len(landed)} | "
                    f"{sum(not o.ok for o in outcomes)} | "
                    f"{statistics.median([o.recorded_before for o in landed] or [0]):.0f} | "
                    f"{statistics.median(reruns):.0f} / {max(reruns)} |")
    rows.append(f"\n{count} kill trials in {elapsed:.0f} s; a failed trial is a wrong or "
                "missing value, a database that fails `PRAGMA integrity_check`, a recorded "
                "step run again, or a rerun that does not exit 0.")
    return rows, failures


def run_fuzz(count: int, seed: int) -> tuple[list[str], int]:
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    import fuzz_corpus

    cases = fuzz_corpus.make_cases(count, seed)
    work = Path(tempfile.mkdtemp(prefix="soakfuzz"))
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("BARCA_")}
    base_env["BARCA_WARM_SECONDS"] = "0"  # a pool per case would outlive the soak

    def answer(indexed):
        i, case = indexed
        root = case.write(work / f"c{i:04d}")
        proc = subprocess.run([*kill_trials.CLI, *case.args], cwd=root,
                              env={**base_env, **case.env}, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=120)
        shutil.rmtree(work / f"c{i:04d}", ignore_errors=True)
        return case, proc.returncode, fuzz_corpus.problems(case, proc.returncode,
                                                           proc.stdout, proc.stderr)

    started = time.monotonic()
    try:
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(answer, enumerate(cases)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.monotonic() - started
    by_kind: dict[str, list] = defaultdict(list)
    for case, code, wrong in answers:
        by_kind[case.id.split("/")[0]].append((code, wrong))
        if wrong:
            print(f"FAILED fuzz case {case.id}: {wrong}", file=sys.stderr)
    failures = sum(bool(wrong) for _, _, wrong in answers)
    rows = ["| kind of case | cases | exit 2 | failed step (exit 1) | ran (exit 0) | failed |",
            "|---|---:|---:|---:|---:|---:|"]
    for kind, group in sorted(by_kind.items()):
        rows.append(f"| {kind} | {len(group)} | {sum(c == 2 for c, _ in group)} | "
                    f"{sum(c == 1 for c, _ in group)} | {sum(c == 0 for c, _ in group)} | "
                    f"{sum(bool(w) for _, w in group)} |")
    rows.append(f"\n{len(answers)} fuzz cases in {elapsed:.0f} s, two at a time; a failed "
                "case is a traceback through barca's own code, an exit code other than the "
                "case expects, or an error that does not name the cause.")
    return rows, failures


def machine() -> str:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{os.cpu_count()} CPUs, {platform.machine()}, Linux {platform.release()}, "
            f"Python {platform.python_version()}; load average {load} at the start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200, help="kill trials (default 200)")
    parser.add_argument("--fuzz", type=int, default=1000, help="fuzz cases (default 1000)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--write", action="store_true", help="append to RESULTS.md")
    args = parser.parse_args()
    header = [f"## Soak ({time.strftime('%Y-%m-%d %H:%M')})", "",
              "```", f".venv/bin/python benchmarks/soak.py --kills {args.kills} "
              f"--fuzz {args.fuzz} --seed {args.seed}", "```", "", f"- machine: {machine()}", ""]
    failures = 0
    body: list[str] = []
    if args.kills:
        rows, failed = run_kills(args.kills, args.seed)
        body += ["### Kill trials", "", *rows, ""]
        failures += failed
    if args.fuzz:
        rows, failed = run_fuzz(args.fuzz, args.seed)
        body += ["### Fuzz cases", "", *rows, ""]
        failures += failed
    text = "\n".join(header + body)
    print(text)
    if args.write:
        with open(HERE / "RESULTS.md", "a") as results:
            results.write("\n" + text + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
