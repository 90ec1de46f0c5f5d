"""Core benchmarks of the `barca` command, timed as whole processes on this machine.

What it measures
----------------
Each scenario is one `barca` invocation, started and timed as a whole process the way a
user or a script would run it (interpreter start, imports, discovery, planning, workers,
writing `.barca/`, printing the result):

  help            `barca --help`
  chain100-cold   `barca get pipeline.py --json` on a 100-asset linear chain
                  (a000 <- a001 <- ... <- a099), in a fresh directory with no `.barca/`
  chain100-cached the same command again on the already computed directory (0 steps)
  fanout500-cold  one root asset and 500 leaves reading it (501 steps), fresh directory
  fanout500-cached the same command again (0 steps)

The pipelines use only `from barca import asset`, so the same files run on our barca and
on the published one. Every run's JSON output is checked: `status` must be `success` and
`steps_executed` must be 100 / 501 when cold and 0 when cached, otherwise the scenario is
reported as an error instead of a time.

For each scenario and command it reports:

  wall      time.perf_counter() around the child process, from spawn to reap; the median
            and the minimum over --repeat runs (--cold-repeat for cold runs). The median is
            compared with the target.
  cpu       user + system CPU seconds of the process and of the descendants it reaped
            (its workers), median over the runs.
  peak RSS  `ru_maxrss` from os.wait4() on the child: the largest resident set of any
            SINGLE process in the tree (the coordinator, or one worker, whichever peaked
            highest), not the sum of the tree. Maximum over the runs.
  tree RSS  (only with --tree-rss) the peak of the SUM of resident sets of the child and all
            its live descendants, sampled from /proc every 5 ms during one extra run that is
            not timed (sampling costs CPU). Sampling can miss short peaks, so it is a lower
            bound of the true tree peak.

"Cold" means no `.barca/` state and no compiled bytecode of the pipeline; barca's own
bytecode and the OS page cache are warm (each command is warmed up once, untimed, before
timing). Bytecode: by default (--bytecode cached) the children run with
PYTHONPYCACHEPREFIX pointing into the benchmark's temporary directory and without
PYTHONDONTWRITEBYTECODE, so they use compiled bytecode like a normal install does, whatever
the calling shell sets, and nothing is written under src/. --bytecode off measures the
case where every process compiles barca's modules from source (an editable checkout under
PYTHONDONTWRITEBYTECODE=1, as in some sandboxes).
With --reference the two commands run interleaved (ours, reference, ours, ...) so that
drift on the machine hits both alike, and the table adds the reference's figures and the
ratio ours / reference of the median wall times (below 1 means ours is faster).

Worker pool size is whatever each command picks by default (both use every core); set
BARCA_POOL_SIZE in the environment to pin it for both. Our warm pool is off here
(BARCA_WARM_SECONDS=0): these scenarios measure a command started from nothing; ticks with the
pool are measured by keyed_partitions.py.

How to run
----------
    .venv/bin/python benchmarks/core.py                      # ours only, print the table
    .venv/bin/python benchmarks/core.py --importtime         # + top imports by cumulative time
    python3.12 -m venv /tmp/barca033 && /tmp/barca033/bin/pip install barca==0.33.0
    .venv/bin/python benchmarks/core.py --reference /tmp/barca033/bin/barca --tree-rss --importtime --write

--write records the machine, the exact command and the table as a dated section of
benchmarks/RESULTS.md (a section with the same date and --label is replaced). Standard library only; any
Python >= 3.9 on Linux can run it (the barca under test is the repository's .venv/bin/barca,
else one next to the running interpreter, else on PATH; --barca overrides).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


# --------------------------------------------------------------------------- pipelines

def chain_source(n: int = 100) -> str:
    lines = ["from barca import asset", "", "",
             "@asset()", "def a000() -> dict:", '    return {"i": 0, "tag": "a000"}', ""]
    for i in range(1, n):
        lines += ["",
                  f"@asset(inputs={{\"prev\": a{i - 1:03d}}})",
                  f"def a{i:03d}(prev: dict) -> dict:",
                  f'    return {{"i": prev["i"] + 1, "tag": "a{i:03d}"}}', ""]
    return "\n".join(lines)


def fanout_source(n: int = 500) -> str:
    lines = ["from barca import asset", "", "",
             "@asset()", "def root() -> dict:", '    return {"base": 1}', ""]
    for i in range(n):
        lines += ["",
                  "@asset(inputs={\"root\": root})",
                  f"def leaf{i:03d}(root: dict) -> dict:",
                  f'    return {{"leaf": {i}, "value": root["base"] + {i}}}', ""]
    return "\n".join(lines)


TINY = chain_source(2)


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str            # "help", "cold" or "cached"
    source: str | None   # pipeline file text (None for help)
    steps: int | None    # expected steps_executed
    target: float | None  # seconds, compared with the median wall time


SCENARIOS = [
    Scenario("help", "help", None, None, 0.15),
    Scenario("chain100-cold", "cold", chain_source(100), 100, 0.6),
    Scenario("chain100-cached", "cached", chain_source(100), 0, 0.2),
    Scenario("fanout500-cold", "cold", fanout_source(500), 501, 1.5),
    Scenario("fanout500-cached", "cached", fanout_source(500), 0, None),
]


# --------------------------------------------------------------------------- running

class RunError(Exception):
    pass


@dataclass
class Sample:
    wall: float
    cpu: float
    maxrss_kib: int
    tree_peak_bytes: int | None = None


@dataclass
class Result:
    samples: list[Sample] = field(default_factory=list)
    tree_peak_bytes: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.samples)

    def median(self) -> float:
        return statistics.median(s.wall for s in self.samples)

    def minimum(self) -> float:
        return min(s.wall for s in self.samples)

    def cpu(self) -> float:
        return statistics.median(s.cpu for s in self.samples)

    def maxrss_mib(self) -> float:
        return max(s.maxrss_kib for s in self.samples) / 1024


def _tree_rss(root: int) -> int:
    """Sum of resident bytes of `root` and every live descendant (found through /proc ppids;
    barca's workers start their own sessions, so session ids would miss them)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # after the ")": state ppid pgrp session ...; rss (pages) is stat field 24, index 21 here
        pid = int(name)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * PAGE_SIZE
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total


def run_once(argv: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None,
             sample_tree: bool = False) -> tuple[Sample, str, str]:
    """Run argv in cwd as a new session; return its Sample, stdout and stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        peak = [0]
        stop = threading.Event()
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                env=env, start_new_session=True)
        sampler = None
        if sample_tree:
            def sample() -> None:
                while not stop.is_set():
                    peak[0] = max(peak[0], _tree_rss(proc.pid))
                    stop.wait(0.005)
            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
        killer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        finally:
            wall = time.perf_counter() - start
            killer.cancel()
            stop.set()
        if sampler:
            sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by us, tell Popen
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    if proc.returncode != 0:
        tail = "\n".join(stderr.strip().splitlines()[-5:])
        raise RunError(f"{shlex.join(argv)} exited {proc.returncode} in {cwd}:\n{tail}")
    sample_ = Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss,
                     peak[0] if sample_tree else None)
    return sample_, stdout, stderr


def check_get_output(stdout: str, expected_steps: int) -> None:
    lines = [line for line in stdout.splitlines() if line.strip().startswith("{")]
    if not lines:
        raise RunError(f"no JSON on stdout: {stdout[:200]!r}")
    doc = json.loads(lines[-1])
    if doc.get("status") != "success":
        raise RunError(f"status {doc.get('status')!r}, expected 'success'")
    if doc.get("steps_executed") != expected_steps:
        raise RunError(f"steps_executed {doc.get('steps_executed')!r}, expected {expected_steps}")


class Runner:
    """Runs one scenario for one barca command in fresh temporary directories."""

    def __init__(self, command: list[str], base: Path, timeout: float, env: dict[str, str]):
        self.command = command
        self.base = base
        self.timeout = timeout
        self.env = env
        self._cached_dirs: dict[str, Path] = {}

    def _fresh_dir(self, source: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix="run-", dir=self.base))
        (path / "pipeline.py").write_text(source)
        return path

    def get_argv(self) -> list[str]:
        return [*self.command, "get", "pipeline.py", "--json"]

    def warm_up(self) -> None:
        run_once([*self.command, "--help"], self.base, self.timeout, self.env)
        directory = self._fresh_dir(TINY)
        _, stdout, _ = run_once(self.get_argv(), directory, self.timeout, self.env)
        check_get_output(stdout, 2)
        shutil.rmtree(directory, ignore_errors=True)

    def prepare(self, sc: Scenario) -> None:
        """For a cached scenario: compute the pipeline once, untimed."""
        if sc.kind == "cached":
            directory = self._fresh_dir(sc.source)
            _, stdout, _ = run_once(self.get_argv(), directory, self.timeout, self.env)
            check_get_output(stdout, _cold_steps(sc))
            self._cached_dirs[sc.name] = directory

    def once(self, sc: Scenario, sample_tree: bool = False) -> Sample:
        if sc.kind == "help":
            sample, _, _ = run_once([*self.command, "--help"], self.base, self.timeout, self.env,
                                    sample_tree)
            return sample
        if sc.kind == "cold":
            directory = self._fresh_dir(sc.source)
        else:
            directory = self._cached_dirs[sc.name]
        sample, stdout, _ = run_once(self.get_argv(), directory, self.timeout, self.env,
                                     sample_tree)
        check_get_output(stdout, sc.steps)
        if sc.kind == "cold":
            shutil.rmtree(directory, ignore_errors=True)
        return sample


def _cold_steps(sc: Scenario) -> int:
    cold = next(s for s in SCENARIOS if s.kind == "cold" and s.source == sc.source)
    return cold.steps


def measure(runners: list[Runner], scenarios: list[Scenario], repeat: int, cold_repeat: int,
            tree_rss: bool) -> dict[tuple[str, int], Result]:
    """Interleave the commands run by run; one Result per (scenario, runner index)."""
    results: dict[tuple[str, int], Result] = {}
    for sc in scenarios:
        for i, runner in enumerate(runners):
            result = results[(sc.name, i)] = Result()
            try:
                runner.prepare(sc)
            except RunError as e:
                result.error = str(e)
        n = cold_repeat if sc.kind == "cold" else repeat
        for _ in range(n):
            for i, runner in enumerate(runners):
                result = results[(sc.name, i)]
                if result.error:
                    continue
                try:
                    result.samples.append(runner.once(sc))
                except RunError as e:
                    result.error = str(e)
        if tree_rss:
            for i, runner in enumerate(runners):
                result = results[(sc.name, i)]
                if result.error:
                    continue
                try:
                    result.tree_peak_bytes = runner.once(sc, sample_tree=True).tree_peak_bytes
                except RunError as e:
                    result.error = str(e)
        for i in range(len(runners)):
            r = results[(sc.name, i)]
            state = f"median {r.median():.3f}s" if r.ok else f"ERROR {r.error.splitlines()[0]}"
            print(f"  {sc.name:<17} [{'ours' if i == 0 else 'reference'}] {state}", file=sys.stderr)
    return results


# --------------------------------------------------------------------------- reporting

def fmt_s(x: float) -> str:
    return f"{x:.3f} s" if x >= 1 else f"{x * 1000:.0f} ms"


def table(scenarios: list[Scenario], results: dict, with_ref: bool, tree_rss: bool) -> str:
    head = ["scenario", "target", "ours median", "ours min", "ours cpu", "ours peak RSS"]
    if tree_rss:
        head.append("ours tree RSS")
    head.append("pass")
    if with_ref:
        head += ["ref median", "ref min", "ref peak RSS"]
        if tree_rss:
            head.append("ref tree RSS")
        head.append("ours/ref")
    rows = []
    for sc in scenarios:
        ours = results[(sc.name, 0)]
        row = [sc.name, f"<= {fmt_s(sc.target)}" if sc.target else "-"]
        if ours.ok:
            row += [fmt_s(ours.median()), fmt_s(ours.minimum()), fmt_s(ours.cpu()),
                    f"{ours.maxrss_mib():.0f} MiB"]
            if tree_rss:
                row.append(f"{ours.tree_peak_bytes / 2**20:.0f} MiB" if ours.tree_peak_bytes else "-")
            row.append(("PASS" if ours.median() <= sc.target else "FAIL") if sc.target else "-")
        else:
            row += ["error"] * 4 + (["error"] if tree_rss else []) + ["FAIL" if sc.target else "-"]
        if with_ref:
            ref = results[(sc.name, 1)]
            if ref.ok:
                row += [fmt_s(ref.median()), fmt_s(ref.minimum()), f"{ref.maxrss_mib():.0f} MiB"]
                if tree_rss:
                    row.append(f"{ref.tree_peak_bytes / 2**20:.0f} MiB" if ref.tree_peak_bytes else "-")
                row.append(f"{ours.median() / ref.median():.2f}x" if ours.ok else "-")
            else:
                row += ["error"] * 3 + (["error"] if tree_rss else []) + ["-"]
        rows.append(row)
    widths = [max(len(r[c]) for r in [head, *rows]) for c in range(len(head))]
    right = [c >= 1 and head[c] != "pass" for c in range(len(head))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if r else c.ljust(w)
                                 for c, w, r in zip(cells, widths, right)) + " |"
    sep = "|" + "|".join(("-" * (w + 1) + ":") if r else ("-" * (w + 2))
                         for w, r in zip(widths, right)) + "|"
    return "\n".join([line(head), sep, *(line(r) for r in rows)])


def errors_text(scenarios: list[Scenario], results: dict, with_ref: bool) -> str:
    out = []
    for sc in scenarios:
        for i in range(2 if with_ref else 1):
            r = results[(sc.name, i)]
            if r.error:
                out.append(f"- {sc.name} ({'ours' if i == 0 else 'reference'}): {r.error}")
    return "\n".join(out)


def repo_head() -> str:
    """The commit checked out in this repository, read from .git without running git."""
    git = REPO / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head[:12]
        ref = head[5:]
        if (git / ref).exists():
            return f"{(git / ref).read_text().strip()[:12]} ({ref.rsplit('/', 1)[-1]})"
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return f"{line[:12]} ({ref.rsplit('/', 1)[-1]})"
    except OSError:
        pass
    return "unknown"


def pyc_beside_sources() -> str:
    """How many of the repository's barca modules have a .pyc next to them (any Python)."""
    sources = list((REPO / "src" / "barca").rglob("*.py"))
    compiled = sum(1 for py in sources
                   if any((py.parent / "__pycache__").glob(py.stem + ".cpython-*.pyc")))
    return f"{compiled} of {len(sources)}"


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def machine() -> dict[str, str]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    mem = ""
    try:
        kib = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f"{kib / 2**20:.1f} GiB"
    except (OSError, AttributeError):
        pass
    return {"nproc": f"{usable} usable (os.cpu_count() {os.cpu_count()})", "load": load_average(), "cpu": model, "memory": mem,
            "kernel": platform.release(), "pool": os.environ.get("BARCA_POOL_SIZE", "default (every core)")}


def version_of(command: list[str]) -> str:
    try:
        done = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=30)
        return (done.stdout or done.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def python_of(command: list[str]) -> str | None:
    """The interpreter behind a console script (its shebang), if the command is one."""
    path = shutil.which(command[0])
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            first = f.readline()
    except OSError:
        return None
    if first.startswith(b"#!") and b"python" in first:
        return first[2:].decode().strip().split()[0]
    return None


def sibling_python(command: list[str]) -> str | None:
    """The Python installed next to a binary (where a published barca finds its workers')."""
    path = shutil.which(command[0])
    if path:
        for name in ("python3", "python"):
            candidate = Path(path).parent / name
            if candidate.exists():
                return str(candidate)
    return None


def python_version(python: str | None) -> str:
    if not python:
        return "n/a (not a Python console script)"
    done = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                          capture_output=True, text=True)
    return f"{done.stdout.strip()} ({python})"


def importtime(python: str, code: list[str], top: int, env: dict[str, str],
               runs: int = 3) -> tuple[str, float]:
    """Top modules by cumulative import time; each module's minimum over `runs` runs."""
    best: dict[str, tuple[int, int]] = {}
    totals = []
    for _ in range(runs):
        done = subprocess.run([python, "-X", "importtime", *code], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, cwd=tempfile.gettempdir(), env=env)
        total = 0
        for line in done.stderr.splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)", line)
            if not m:
                continue
            self_us, cum_us, indent, name = int(m[1]), int(m[2]), m[3], m[4]
            if not indent:
                total += cum_us
            old = best.get(name)
            if old is None or cum_us < old[1]:
                best[name] = (self_us, cum_us)
        totals.append(total)
    rows = sorted(best.items(), key=lambda kv: kv[1][1], reverse=True)[:top]
    lines = [f"  {'cumulative':>10}  {'self':>8}  module"]
    lines += [f"  {c / 1000:8.1f}ms  {s / 1000:6.1f}ms  {name}" for name, (s, c) in rows]
    return "\n".join(lines), min(totals) / 1e6


def write_results(section: str, heading: str) -> None:
    header = ("# Benchmark results\n\n"
              "Written by `benchmarks/core.py --write` (see its docstring and `--help` for what\n"
              "each column means). One section per date (and --label); a rerun on the same date\n"
              "with the same label replaces it.\n")
    text = RESULTS.read_text() if RESULTS.exists() else header
    pattern = re.compile(rf"^{re.escape(heading)}[ \t]*$.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section.rstrip() + "\n\n", text, count=1)
    else:
        text = text.rstrip() + "\n\n" + section.rstrip() + "\n"
    RESULTS.write_text(text.rstrip() + "\n")


# --------------------------------------------------------------------------- main

BYTECODE = {
    "cached": "compiled bytecode is used as after a normal install: PYTHONPYCACHEPREFIX=<temp "
              "dir>, PYTHONDONTWRITEBYTECODE unset; the warm-up fills it, nothing is written "
              "under src/",
    "off": "PYTHONDONTWRITEBYTECODE=1 and no PYTHONPYCACHEPREFIX: every process compiles from "
           "source each module that has no .pyc beside it (an editable src/ checkout)",
    "inherit": "the environment as inherited",
}


def child_env(mode: str, base: Path) -> dict[str, str]:
    # every scenario starts its processes fresh: a warm pool left by one cold run would serve
    # the next runs and keep importing in the background while they are timed
    env = dict(os.environ, BARCA_WARM_SECONDS="0")
    if mode == "cached":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(base / "pycache")
    elif mode == "off":
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    return env


def default_barca() -> str:
    candidates = [REPO / ".venv" / "bin" / "barca", Path(sys.executable).parent / "barca"]
    for c in candidates:
        if c.exists():
            return str(c)
    return shutil.which("barca") or "barca"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Time barca's core scenarios (help, 100-asset chain, 500-asset fan-out; "
                    "cold and cached) as whole processes; optionally side by side with another "
                    "barca command.",
        epilog="Example: .venv/bin/python benchmarks/core.py --reference /tmp/barca033/bin/barca "
               "--tree-rss --write")
    p.add_argument("--barca", default=default_barca(),
                   help="our barca command (default: the repository's .venv/bin/barca, then one next to "
                        "this Python, then PATH); split like a shell would")
    p.add_argument("--reference", metavar="CMD",
                   help="another barca command to run the same scenarios, e.g. /tmp/barca033/bin/barca")
    p.add_argument("--repeat", type=int, default=5, help="timed runs of help and cached scenarios (5)")
    p.add_argument("--cold-repeat", type=int, default=3, help="timed runs of cold scenarios (3)")
    p.add_argument("--only", metavar="NAME[,NAME]", help="run only these scenarios: "
                   + ", ".join(s.name for s in SCENARIOS))
    p.add_argument("--tree-rss", action="store_true",
                   help="one extra untimed run per scenario sampling the summed RSS of the tree")
    p.add_argument("--importtime", action="store_true",
                   help="print the top imports of `import barca.cli.main` and of `barca --help`")
    p.add_argument("--top", type=int, default=10, help="rows of --importtime output (10)")
    p.add_argument("--bytecode", choices=sorted(BYTECODE), default="cached",
                   help="Python bytecode caching in the children: " + "; ".join(
                       f"{k}: {v}" for k, v in BYTECODE.items()) + " (default: cached)")
    p.add_argument("--timeout", type=float, default=300, help="seconds before a run is killed (300)")
    p.add_argument("--write", action="store_true", help="record the table in benchmarks/RESULTS.md")
    p.add_argument("--note", default="", help="a sentence recorded with --write under the table")
    p.add_argument("--label", default="", help="with --write: a label after the date in the section "
                   "heading; a section with the same date and label is replaced")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    scenarios = SCENARIOS
    if args.only:
        names = args.only.split(",")
        unknown = set(names) - {s.name for s in SCENARIOS}
        if unknown:
            sys.exit(f"unknown scenario(s) {sorted(unknown)}; choose from {[s.name for s in SCENARIOS]}")
        scenarios = [s for s in SCENARIOS if s.name in names]
    commands = [shlex.split(args.barca)] + ([shlex.split(args.reference)] if args.reference else [])
    for c in commands:
        if not shutil.which(c[0]):
            sys.exit(f"command not found: {c[0]}")

    info = machine()
    ours_python = python_of(commands[0])
    print(f"ours:      {shlex.join(commands[0])}  ({version_of(commands[0])}, "
          f"Python {python_version(ours_python)})", file=sys.stderr)
    if args.reference:
        print(f"reference: {shlex.join(commands[1])}  ({version_of(commands[1])})", file=sys.stderr)
    print(f"machine:   CPUs {info['nproc']}, {info['cpu']}, {info['memory']}, "
          f"load {info['load']}", file=sys.stderr)

    base = Path(tempfile.mkdtemp(prefix="barca-bench-"))
    try:
        return _measure_and_report(args, scenarios, commands, info, ours_python, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _measure_and_report(args: argparse.Namespace, scenarios: list[Scenario], commands: list[list[str]],
                        info: dict[str, str], ours_python: str | None, base: Path) -> int:
    env = child_env(args.bytecode, base)
    runners = [Runner(c, base, args.timeout, env) for c in commands]
    for r in runners:
        try:
            r.warm_up()
        except RunError as e:
            sys.exit(f"error: the warm-up run of {shlex.join(r.command)} failed, nothing measured:\n{e}")
    results = measure(runners, scenarios, args.repeat, args.cold_repeat, args.tree_rss)

    with_ref = bool(args.reference)
    tab = table(scenarios, results, with_ref, args.tree_rss)
    errs = errors_text(scenarios, results, with_ref)
    print(tab)
    if errs:
        print("\nErrors:\n" + errs)

    imports = ""
    if args.importtime:
        python = ours_python or sys.executable
        top1, total1 = importtime(python, ["-c", "import barca.cli.main"], args.top, env)
        script = shutil.which(commands[0][0])
        top2, total2 = (importtime(python, [script, "--help"], args.top, env) if ours_python
                        else ("", 0.0))
        imports = (f"`python -X importtime -c \"import barca.cli.main\"`: {total1 * 1000:.0f} ms of "
                   f"imports (min of 3), top {args.top} by cumulative time:\n\n```\n{top1}\n```\n")
        if top2:
            imports += (f"\n`python -X importtime {script} --help` (the whole `barca --help` "
                        f"process): {total2 * 1000:.0f} ms of imports, top "
                        f"{args.top}:\n\n```\n{top2}\n```\n")
        print("\n" + imports)

    if args.write:
        now = _dt.datetime.now()
        date = now.strftime("%Y-%m-%d")
        cmd = shlex.join([os.path.relpath(sys.executable) if sys.executable.startswith(str(REPO))
                          else Path(sys.executable).name, os.path.relpath(__file__), *sys.argv[1:]])
        heading = f"## {date}" + (f" ({args.label})" if args.label else "")
        parts = [
            heading,
            "",
            f"Measured {now.strftime('%Y-%m-%d %H:%M')} with:",
            "",
            f"```\n{cmd}\n```",
            "",
            f"- machine: CPUs {info['nproc']}, {info['cpu']}, {info['memory']} RAM, "
            f"Linux {info['kernel']}; load average (1/5/15 min) {info['load']} before and "
            f"{load_average()} after the run (other work on the machine adds noise)",
            f"- ours: `{shlex.join(commands[0])}`, {version_of(commands[0])}, "
            f"Python {python_version(ours_python)}; repository HEAD {repo_head()} "
            "(uncommitted changes, if any, are not recorded)",
        ]
        if with_ref:
            ref_python = python_of(commands[1])
            workers = "" if ref_python else (
                f" (a native binary; the Python next to it: {python_version(sibling_python(commands[1]))})")
            parts.append(f"- reference: `{shlex.join(commands[1])}`, {version_of(commands[1])}"
                         + (f", Python {python_version(ref_python)}" if ref_python else workers))
        parts += [
            f"- bytecode: {args.bytecode}: {BYTECODE[args.bytecode]}"
            + ("" if args.bytecode == "cached" else
               f" (barca modules in src/ with a .pyc beside them: {pyc_beside_sources()})"),
            f"- worker pool: {info['pool']}; runs: {args.cold_repeat} per cold scenario, "
            f"{args.repeat} per help/cached scenario (after one untimed warm-up per command)",
            "- wall = median / min of the timed runs, pass = median <= target; cpu = median user+sys "
            "of the process and its reaped workers; peak RSS = largest single process "
            "(ru_maxrss via os.wait4), max over runs"
            + ("; tree RSS = sampled peak of the summed RSS of the whole process tree (one "
               "extra untimed run)"
               if args.tree_rss else ""),
            "",
            tab,
            "",
        ]
        if errs:
            parts += ["Errors:", "", errs, ""]
        if args.note:
            parts += [args.note, ""]
        if imports:
            parts += [imports]
        write_results("\n".join(parts), heading)
        print(f"\nrecorded in {os.path.relpath(RESULTS)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
