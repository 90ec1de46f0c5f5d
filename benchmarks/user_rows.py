"""Issue 28's table, every row of it, measured here: ours beside the published 0.33 in one run.

Every figure is a whole process (or a whole HTTP request), timed from spawn to exit on this
machine. Where two things are compared (ours and 0.33, barca's first run and the plain loop,
`barca --help` and a bare interpreter), their runs are taken in turn, the order reversed every
other round, so that a drift of a shared machine's speed weighs on both alike; each cell gives
the median, the min-max and the number of runs. The rows, numbered by the issue table's lines
(a line that names two measurements gets a row for each):

  1  one-key tick at the small N (--keys' first, 10,000), as a script runs it:
     `barca get scored pipeline.py > log` (JSON, the default when stdout is not a terminal),
     after one retailer's orders changed (TICK_GAP seconds before, untimed, for both tools).
     Ours with its warm pool up and quiet (started by the first run, as a tick minutes later
     finds it), 0.33 on its own project, in turn.
     Target: ours <= 0.5 x 0.33 (ratio of the medians). The log's size is noted.
  2  the same tick with `--pretty`. Target <= 0.12 s.
  3  one-key tick at the large N (--keys' last, 200,000), as a script runs it, taken in turn
     with the small N's tick; the JSON's size (past 1,000 keys `final_output` is a summary,
     `{"_barca_partitions": ...}`). Target <= 0.6 s and <= 3 x the small tick (the median of
     the pairs' ratios).
  4  `barca get scored pipeline.py -o path > paths` after one retailer changed, at both N.
     Target <= 0.2 s at 10,000 keys, <= 1 s at 200,000. Lines printed are noted: past 1,000
     keys 0.33 prints only the paths of the keys its run computed.
  5  first run of the seed at the small N, one key per call (`get scored pipeline.py > log`
     on a fresh project whose warehouse was built beforehand, untimed), in turn with THE
     PLAIN LOOP (benchmarks/plain_loop.py: one process, one read-only DuckDB connection, the
     seed's queries, a JSON file per key and asset) on the same warehouse; then the size of
     `.barca/` (disk blocks; files; metadata.db). Targets: ours <= 0.55 x the loop (0.5 is
     perfect on 2 cores), `.barca/` <= 10 MB. 0.33's column: the one first run that sets up
     its ticks (about 35 ms a key: 350 s at 10,000 keys).
  6  first run of --no-io keys (20,000) whose steps do nothing: keyed_partitions.py's no-I/O
     variant (two assets, a step per key and asset), steps per second. Target >= 8,000.
  7  `.barca/` after the large N's first run (that run's time is noted): disk blocks, files,
     metadata.db. Target <= 200 MB.
  8  `barca --help` in turn with `python -c pass` (the interpreter ours runs on) and 0.33's
     `--help`. Target: ours <= 2 x bare Python.
  9  `barca get pipeline.py --json` on core.py's 100-asset chain, fully cached, in turn with
     0.33 (core.py's Runner and environment: no warm pool). Target: ours <= 2 x 0.33.
  10 at the large N: `barca status pipeline.py > out`; on a fresh `barca serve --no-schedule`
     over loopback (its warm pool up before the request, as a few seconds after a start),
     the first `GET /state`; on another fresh server the first
     `GET /assets/pipeline.py:scored/partitions`. Targets <= 0.5 s, <= 0.5 s, <= 0.1 s.

The large N's rows run ours only unless --reference-large: 0.33's first run at 200,000 keys
takes about two hours. At the issue's sizes (the defaults) the whole run should take about 20
minutes on this machine when it is quiet (6 of them 0.33's first run at 10,000 keys, about 5
our first run at 200,000 keys and the removal of its files), more when it is busy;
--skip-large leaves out the large N (rows 3, 4's second, 7 and 10). Pass/fail is against the issue's targets, which are set for 10,000 and
200,000 keys: at other sizes they are only indicative.

    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/user_rows.py                 # the table
    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/user_rows.py --keys 300,2000 --repeat 3
    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/user_rows.py --write         # + RESULTS.md

The reference needs duckdb and pandas beside it (its workers run on the Python of its venv):

    /root/.pyenv/versions/3.12.1/bin/python -m venv /tmp/barca033
    /tmp/barca033/bin/pip install barca==0.33.0 duckdb pandas

Ours runs with its warm pool registry in a private directory (XDG_RUNTIME_DIR), so that the
pools of this run and those of other work on the machine do not evict one another, and with
BARCA_WARM_SECONDS=7200 so that the pools outlive the minutes between rows, as in
keyed_partitions.py, whose fixture, pipeline and helpers this script uses.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import http.client
import itertools
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import core  # noqa: E402
import keyed_partitions as kp  # noqa: E402
from serve import Server, _pool_pid  # noqa: E402

DEFAULT_REFERENCE = "/tmp/barca033/bin/barca"
TIMEOUT = 900  # seconds a tick, a status or a help may take before it is killed
FIRST_RUN_TIMEOUT = 4 * 3600
# a polling tick comes minutes after the last; taken back to back, ours would find its warm
# pool still busy from the previous one (it forks its spares after a second without requests)
TICK_GAP = 1.5
TICK = ["get", "scored", "pipeline.py"]
NODE = "pipeline.py:scored"
MB = 2**20


@dataclass
class Side:
    """One barca: the command that starts it and its environment."""
    name: str
    cmd: list[str]
    env: dict[str, str]


@dataclass
class Took:
    """One timed process: wall seconds, and the size and lines of what it printed."""
    wall: float
    out_bytes: int = 0
    out_lines: int = 0


@dataclass
class Row:
    """One line of the printed table; `num` is the issue table's line it measures."""
    num: str
    what: str
    ours: str
    ref: str = "—"
    ratio: str = "—"
    target: str = ""
    measured: str = ""
    verdict: str = "—"


def run(side: Side, args: list[str], cwd: Path, timeout: float = TIMEOUT) -> Took:
    """Time `side` running `args` in `cwd`, its stdout to a file (as `> log` does)."""
    sample, out, _ = core.run_once([*side.cmd, *args], cwd, timeout, side.env)
    return Took(sample.wall, len(out.encode()), out.count("\n"))


def in_turn(rounds: int, takes: dict[str, Callable[[], Took]]) -> dict[str, list[Took]]:
    """Each measurement once a round, in the given order, reversed every other round."""
    out: dict[str, list[Took]] = {name: [] for name in takes}
    for i in range(rounds):
        for name in (list(takes) if i % 2 == 0 else list(reversed(takes))):
            out[name].append(takes[name]())
    return out


def walls(took: list[Took]) -> list[float]:
    return [t.wall for t in took]


def med(values: list[float]) -> float:
    return statistics.median(values)


def spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{core.fmt_s(values[0])} (1 run)"
    return (f"{core.fmt_s(med(values))} ({core.fmt_s(min(values))}-{core.fmt_s(max(values))}, "
            f"{len(values)})")


def verdict(ok: bool | None) -> str:
    return "—" if ok is None else ("pass" if ok else "FAIL")


def size(n: float) -> str:
    if n >= 0.1 * MB:
        return f"{n / MB:.1f} MB"
    return f"{n / 1024:.0f} KB" if n >= 1024 else f"{n:.0f} bytes"


def lines(n: int) -> str:
    return f"{n:,} line" + ("" if n == 1 else "s")


def disk_use(barca_dir: Path) -> tuple[int, int, int]:
    """(bytes of disk blocks, files, bytes of blocks of metadata.db and its journal)."""
    blocks = files = meta = 0
    for root, _, names in os.walk(barca_dir):
        for name in names:
            try:
                used = os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
            blocks += used
            files += 1
            if root == str(barca_dir) and name.startswith("metadata.db"):
                meta += used
    return blocks, files, meta


def describe_disk(use: tuple[int, int, int]) -> str:
    blocks, files, meta = use
    return f"{size(blocks)} ({files:,} files; metadata.db {size(meta)})"


# --------------------------------------------------------------------------- projects and pools

def project(label: str, n: int) -> Path:
    """A fresh project: the example's warehouse of n retailers and the seed's pipeline,
    removed when the script ends."""
    directory = Path(tempfile.mkdtemp(prefix=f"barca-rows-{label}-{n}-"))
    kp.discard(directory)
    kp.build_warehouse(directory, n)
    (directory / "pipeline.py").write_text(kp.SEED_PIPELINE)
    return directory


class Pools:
    """Our warm pools, in this run's private registry: listed and stopped by pid."""

    def __init__(self, ours: Side) -> None:
        self.ours = ours

    def listed(self) -> list[dict]:
        done = subprocess.run([*self.ours.cmd, "pool", "--json"], env=self.ours.env,
                              capture_output=True, text=True)
        return json.loads(done.stdout or '{"pools": []}')["pools"]

    def stop(self, match: Callable[[str], bool] = lambda project: True) -> None:
        pids = [p["pid"] for p in self.listed() if match(p["project"])]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for pid in pids:
            wait_gone(pid)

    def stop_for(self, directory: Path) -> None:
        self.stop(lambda project: project == str(directory.resolve()))


def wait_gone(pid: int, timeout: float = 60) -> None:
    """Until process `pid` has exited (gone, or a zombie not ours to reap)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state == "Z":
            return
        time.sleep(0.05)


# --------------------------------------------------------------------------- measurements

class Measure:
    """The rows, section by section; a section's rows and notes are appended as it ends."""

    def __init__(self, args: argparse.Namespace, ours: Side, ref: Side | None,
                 ref_seed: str | None) -> None:
        self.args = args
        self.ours, self.ref = ours, ref
        self.ref_seed = ref_seed  # why the reference cannot run the seed, or None
        self.pools = Pools(ours)
        self.changes = itertools.count()
        self.rows: list[Row] = []
        self.notes: list[str] = []
        self.small_project: Path | None = None
        self.small_n = 0
        self.ref_first_wall = 0.0  # 0.33's first run at the small N, once taken

    def pool_up(self, directory: Path) -> None:
        """Wait until the warm pool a first run started answers, as a tick minutes later
        finds it; a minute without one is noted (the ticks then start it)."""
        try:
            kp.warm_pool_pid(directory, timeout=60, env=self.ours.env)
        except SystemExit:
            self.notes.append(f"no warm pool answered a minute after the first run in "
                              f"{directory.name}.")

    def tick(self, side: Side, directory: Path, n: int, *extra: str) -> Callable[[], Took]:
        def take() -> Took:
            kp.change_one_retailer(directory, n, next(self.changes))
            time.sleep(TICK_GAP)  # untimed: the pool quiet, as the next poll finds it
            return run(side, [*TICK, *extra], directory)
        return take

    # rows 8 and 9 ---------------------------------------------------------------------------
    def start_up(self) -> None:
        base = Path(tempfile.mkdtemp(prefix="barca-rows-core-"))
        try:
            self._start_up(base)
        finally:
            shutil.rmtree(base, ignore_errors=True)

    def _start_up(self, base: Path) -> None:
        rounds = 3 * self.args.repeat
        env = core.child_env("cached", base)
        python = core.python_of(self.ours.cmd) or sys.executable
        commands = {"ours": Side("ours", self.ours.cmd, env),
                    "python": Side("python", [python, "-c", "pass"], env)}
        if self.ref:
            commands["ref"] = Side("ref", self.ref.cmd, without_ours(env))
        runners = {name: core.Runner(side.cmd, base, TIMEOUT, side.env)
                   for name, side in commands.items() if name != "python"}
        for runner in runners.values():
            runner.warm_up()
        run(commands["python"], [], base)
        took = in_turn(rounds, {name: (lambda side=side: run(
            side, [] if side.name == "python" else ["--help"], base))
            for name, side in commands.items()})
        ours, bare = walls(took["ours"]), walls(took["python"])
        row = Row("8", "`barca --help` (yardstick: `python -c pass`, "
                  f"{spread(bare)})", spread(ours), target="≤ 2 × bare Python",
                  measured=f"{med(ours) / med(bare):.2f} × bare Python",
                  verdict=verdict(med(ours) <= 2 * med(bare)))
        if self.ref:
            ref = walls(took["ref"])
            row.ref, row.ratio = spread(ref), f"{med(ours) / med(ref):.2f}"
        self.rows.append(row)

        chain = next(s for s in core.SCENARIOS if s.name == "chain100-cached")
        for runner in runners.values():
            runner.prepare(chain)
        took = in_turn(rounds, {name: (lambda r=runner: Took(r.once(chain).wall))
                                for name, runner in runners.items()})
        ours = walls(took["ours"])
        row = Row("9", "`get` of a cached 100-asset chain (`barca get pipeline.py --json`)",
                  spread(ours), target="≤ 2 × 0.33")
        if self.ref:
            ref = walls(took["ref"])
            ratio = med(ours) / med(ref)
            row.ref, row.ratio = spread(ref), f"{ratio:.2f}"
            row.measured, row.verdict = f"{ratio:.2f} × 0.33", verdict(ratio <= 2)
        else:
            row.ref = "not run: no --reference"
        self.rows.append(row)

    # rows 5, 1, 2 and 4 at the small N ------------------------------------------------------
    def small(self, n: int) -> None:
        self.small_n = n
        barca, loop, disk = [], [], []
        for i in range(self.args.first_runs):
            directory = project("first", n)
            out = Path(tempfile.mkdtemp(prefix="barca-rows-loop-"))
            kp.discard(out)
            takes = {
                "barca": lambda: run(self.ours, TICK, directory, FIRST_RUN_TIMEOUT),
                "loop": lambda: Took(core.run_once(
                    [sys.executable, str(HERE / "plain_loop.py"), str(directory),
                     str(out / "out")], directory, FIRST_RUN_TIMEOUT, self.ours.env)[0].wall)}
            for name in (["barca", "loop"] if i % 2 == 0 else ["loop", "barca"]):
                (barca if name == "barca" else loop).append(takes[name]().wall)
            self.pool_up(directory)  # the run started it: its size once it is up
            disk.append(disk_use(directory / ".barca"))
            if i < self.args.first_runs - 1:  # the last one's stays for the ticks
                self.pools.stop_for(directory)
        self.small_project = directory
        ratio = med(barca) / med(loop)
        ref_first, ref_project = self.reference_first_run(n)
        row = Row("5", f"first run of the seed at {n:,} keys, one key per call "
                  f"(yardstick: the plain loop, {spread(loop)})", spread(barca),
                  target="≤ 0.55 × the plain loop", measured=f"{ratio:.2f} × the loop",
                  verdict=verdict(ratio <= 0.55))
        row.ref = ref_first
        if self.ref_first_wall:
            row.ratio = f"{med(barca) / self.ref_first_wall:.2f}"
        self.rows.append(row)
        blocks = [d[0] for d in disk]
        self.rows.append(Row("5", f"`.barca/` after that first run ({n:,} keys)",
                             describe_disk(disk[-1]), target="≤ 10 MB",
                             measured=size(max(blocks)),
                             verdict=verdict(max(blocks) <= 10 * MB)))
        self.small_ticks(n, ref_project)

    def reference_first_run(self, n: int) -> tuple[str, Path | None]:
        """0.33's first run on its own project (its ticks' project): the cell and the project."""
        if not self.ref:
            return "not run: no --reference", None
        if self.ref_seed:
            self.notes.append(f"0.33 not run on the seed: {self.ref_seed}.")
            return "not run: see below", None
        directory = project("ref", n)
        try:
            took = run(self.ref, TICK, directory, FIRST_RUN_TIMEOUT)
        except core.RunError as e:
            self.ref_seed = f"its first run failed: {str(e).splitlines()[-1][:300]}"
            self.notes.append(f"0.33 not run on the seed: {self.ref_seed}.")
            return "failed: see below", None
        self.notes.append(f"0.33's first run at {n:,} keys: {took.wall:.1f} s "
                          f"({1000 * took.wall / n:.1f} ms a key); `.barca/` "
                          f"{describe_disk(disk_use(directory / '.barca'))}.")
        self.ref_first_wall = took.wall
        return f"{core.fmt_s(took.wall)} (1 run)", directory

    def small_ticks(self, n: int, ref_project: Path | None) -> None:
        ours_dir = self.small_project
        kinds = {"script": (), "pretty": ("--pretty",), "path": ("-o", "path")}
        takes = {}
        for kind, extra in kinds.items():
            takes[f"ours {kind}"] = self.tick(self.ours, ours_dir, n, *extra)
            if ref_project:
                takes[f"ref {kind}"] = self.tick(self.ref, ref_project, n, *extra)
        took = in_turn(self.args.repeat, takes)
        why = "not run: " + ("see below" if self.ref_seed else "no --reference")

        def pair(kind: str) -> tuple[list[float], list[float] | None]:
            return (walls(took[f"ours {kind}"]),
                    walls(took[f"ref {kind}"]) if ref_project else None)

        ours, ref = pair("script")
        row = Row("1", f"one-key tick at {n:,} keys as a script runs it "
                  "(`barca get scored pipeline.py > log`)", spread(ours),
                  ref=spread(ref) if ref else why, target="≤ 0.5 × 0.33", measured="—")
        if ref:
            ratio = med(ours) / med(ref)
            row.ratio, row.measured = f"{ratio:.2f}", f"{ratio:.2f} × 0.33"
            row.verdict = verdict(ratio <= 0.5)
        self.rows.append(row)
        self.notes.append(printed(f"row 1 ({n:,} keys), the log", took, "ours script",
                                  "ref script" if ref_project else None))

        ours, ref = pair("pretty")
        self.rows.append(Row("2", f"the same tick with `--pretty` ({n:,} keys)", spread(ours),
                             ref=spread(ref) if ref else why,
                             ratio=f"{med(ours) / med(ref):.2f}" if ref else "—",
                             target="≤ 0.12 s", measured=core.fmt_s(med(ours)),
                             verdict=verdict(med(ours) <= 0.12)))

        ours, ref = pair("path")
        self.rows.append(Row("4", f"`barca get scored pipeline.py -o path` at {n:,} keys",
                             spread(ours), ref=spread(ref) if ref else why,
                             ratio=f"{med(ours) / med(ref):.2f}" if ref else "—",
                             target="≤ 0.2 s", measured=core.fmt_s(med(ours)),
                             verdict=verdict(med(ours) <= 0.2)))
        self.notes.append(printed(f"row 4 ({n:,} keys), `-o path`", took, "ours path",
                                  "ref path" if ref_project else None))

    # row 6 ----------------------------------------------------------------------------------
    def no_io(self, n: int) -> None:
        rates, walls_ = [], []
        for _ in range(self.args.first_runs):
            _, wall, _, steps, rate = kp.measure_no_io(n, self.ours.env)
            self.pools.stop(lambda project: "barca-noio-" in project)
            rates.append(rate)
            walls_.append(wall)
        rate = med(rates)
        self.rows.append(Row("6", f"first run of {n:,} keys whose steps do nothing "
                             f"({steps:,} steps; wall {spread(walls_)})",
                             f"{rate:,.0f} steps/s ({min(rates):,.0f}-{max(rates):,.0f}, "
                             f"{len(rates)})", ref="not run (issue: —)",
                             target="≥ 8,000 steps/s", measured=f"{rate:,.0f} steps/s",
                             verdict=verdict(rate >= 8000)))

    # rows 3, 4, 7 and 10 at the large N -----------------------------------------------------
    def large(self, small_n: int, n: int) -> None:
        big = project("large", n)
        first = run(self.ours, TICK, big, FIRST_RUN_TIMEOUT)
        self.pool_up(big)
        use = disk_use(big / ".barca")
        self.rows.append(Row("7", f"{n:,} small results on disk: `.barca/` after the first "
                             f"run (which took {core.fmt_s(first.wall)})", describe_disk(use),
                             ref="not run (issue: —)", target="≤ 200 MB",
                             measured=size(use[0]), verdict=verdict(use[0] <= 200 * MB)))
        ref_big, why = self.reference_large(n)

        takes = {"small": self.tick(self.ours, self.small_project, small_n),
                 "large": self.tick(self.ours, big, n)}
        if ref_big:
            takes["ref"] = self.tick(self.ref, ref_big, n)
        took = in_turn(self.args.repeat, takes)
        ours = walls(took["large"])
        pairs = [b / a for a, b in zip(walls(took["small"]), ours)]
        ok = med(ours) <= 0.6 and med(pairs) <= 3
        row = Row("3", f"one-key tick at {n:,} keys as a script runs it "
                  f"(in turn with the {small_n:,}-key tick: {spread(walls(took['small']))})",
                  spread(ours), ref=spread(walls(took["ref"])) if ref_big else why,
                  target=f"≤ 0.6 s and ≤ 3 × the {small_n:,}-key tick",
                  measured=f"{core.fmt_s(med(ours))}; {med(pairs):.2f} × (pairs' median)",
                  verdict=verdict(ok))
        if ref_big:
            row.ratio = f"{med(ours) / med(walls(took['ref'])):.2f}"
        self.rows.append(row)
        last = took["large"][-1]
        self.notes.append(f"row 3 ({n:,} keys), the log: ours printed {size(last.out_bytes)} "
                          "of JSON" + (f", 0.33 {size(took['ref'][-1].out_bytes)}"
                                       if ref_big else "") + ".")

        takes = {"ours": self.tick(self.ours, big, n, "-o", "path")}
        if ref_big:
            takes["ref"] = self.tick(self.ref, ref_big, n, "-o", "path")
        took = in_turn(self.args.repeat, takes)
        ours = walls(took["ours"])
        self.rows.append(Row("4", f"`barca get scored pipeline.py -o path` at {n:,} keys",
                             spread(ours), ref=spread(walls(took["ref"])) if ref_big else why,
                             ratio=f"{med(ours) / med(walls(took['ref'])):.2f}"
                             if ref_big else "—", target="≤ 1 s",
                             measured=core.fmt_s(med(ours)), verdict=verdict(med(ours) <= 1)))
        self.notes.append(printed(f"row 4 ({n:,} keys), `-o path`", took, "ours",
                                  "ref" if ref_big else None))

        takes = {"ours": lambda: run(self.ours, ["status", "pipeline.py"], big)}
        if ref_big:
            takes["ref"] = lambda: run(self.ref, ["status", "pipeline.py"], ref_big)
        took = in_turn(self.args.repeat, takes)
        ours = walls(took["ours"])
        self.rows.append(Row("10", f"`barca status pipeline.py` at {n:,} keys", spread(ours),
                             ref=spread(walls(took["ref"])) if ref_big else why,
                             ratio=f"{med(ours) / med(walls(took['ref'])):.2f}"
                             if ref_big else "—", target="≤ 0.5 s",
                             measured=core.fmt_s(med(ours)), verdict=verdict(med(ours) <= 0.5)))
        self.pools.stop_for(big)  # the servers start their own
        self.served(n, big, ref_big, why)

    def reference_large(self, n: int) -> tuple[Path | None, str]:
        if not self.ref:
            return None, "not run: no --reference"
        if self.ref_seed:
            return None, "not run: see below"
        if not self.args.reference_large:
            hours = (self.ref_first_wall / self.small_n if self.ref_first_wall else 0.035) \
                * n / 3600
            return None, (f"not run: its first run at {n:,} keys would take about "
                          f"{hours:.1f} h (--reference-large)")
        directory = project("ref-large", n)
        took = run(self.ref, TICK, directory, FIRST_RUN_TIMEOUT)
        self.notes.append(f"0.33's first run at {n:,} keys: {took.wall:.1f} s; `.barca/` "
                          f"{describe_disk(disk_use(directory / '.barca'))}.")
        return directory, ""

    def served(self, n: int, big: Path, ref_big: Path | None, why: str) -> None:
        paths = {"state": "/state",
                 "partitions": f"/assets/{quote(NODE, safe='')}/partitions"}
        takes: dict[str, Callable[[], Took]] = {}
        for name, path in paths.items():
            takes[f"ours {name}"] = lambda path=path: first_get_ours(big, path)
            if ref_big:
                takes[f"ref {name}"] = lambda path=path: first_get_ref(self.ref, ref_big, path)
        took = in_turn(self.args.repeat, takes)
        for name, target in (("state", 0.5), ("partitions", 0.1)):
            ours = walls(took[f"ours {name}"])
            ref_cell, ratio = why, "—"
            if ref_big:
                answers = took[f"ref {name}"]
                bad = [t for t in answers if t.out_lines != 200]
                ref_cell = (spread(walls(answers)) if not bad else
                            f"HTTP {bad[0].out_lines} (0.33 has no such route)")
                ratio = f"{med(ours) / med(walls(answers)):.2f}" if not bad else "—"
            self.rows.append(Row("10", f"first `GET {paths[name].replace('%3A', ':')}` of a "
                                 f"fresh `barca serve` at {n:,} keys", spread(ours),
                                 ref=ref_cell, ratio=ratio, target=f"≤ {target} s",
                                 measured=core.fmt_s(med(ours)),
                                 verdict=verdict(med(ours) <= target)))
        sizes = {name: took[f"ours {name}"][-1].out_bytes for name in paths}
        self.notes.append(f"row 10 ({n:,} keys): ours answered /state with "
                          f"{size(sizes['state'])} and the first partitions page with "
                          f"{size(sizes['partitions'])}.")


def printed(label: str, took: dict[str, list[Took]], ours: str, ref: str | None) -> str:
    """What the last run of each side printed: its size and lines."""
    def what(key: str) -> str:
        last = took[key][-1]
        return f"{size(last.out_bytes)} in {lines(last.out_lines)}"
    return f"{label}: ours printed {what(ours)}" + (f", 0.33 {what(ref)}" if ref else "") + "."


def get(port: int, path: str) -> Took:
    """One GET on a new loopback connection: wall seconds to the whole body; `out_lines` holds
    the status."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        t0 = time.perf_counter()
        conn.request("GET", path)
        answer = conn.getresponse()
        body = answer.read()
        wall = time.perf_counter() - t0
    finally:
        conn.close()
    return Took(wall, len(body), answer.status)


def first_get_ours(root: Path, path: str) -> Took:
    """Start `barca serve --no-schedule` on root, wait until its warm pool answers, time the
    first GET of `path`, stop it (and the pool it started)."""
    server = Server(root, "pipeline.py", "--no-schedule")
    try:
        pool = _pool_pid(root)
        took = get(server.port, path)
        if took.out_lines != 200:
            raise SystemExit(f"GET {path} answered {took.out_lines}")
    finally:
        server.stop()
    wait_gone(pool)
    return took


def first_get_ref(ref: Side, root: Path, path: str) -> Took:
    """The same on 0.33's server: its port chosen free, its start awaited on /health."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([*ref.cmd, "serve", "pipeline.py", "--no-schedule", "--port",
                             str(port)], cwd=root, env=ref.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if get(port, "/health").out_lines == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("0.33's barca serve did not answer /health")
            time.sleep(0.1)
        return get(port, path)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


# --------------------------------------------------------------------------- table and main

def render(rows: list[Row], notes: list[str]) -> str:
    lines = ["| # | what a user runs | ours | 0.33 | ours / 0.33 | target | measured | pass |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r.num} | {r.what} | {r.ours} | {r.ref} | {r.ratio} | {r.target} | "
              f"{r.measured} | {r.verdict} |" for r in rows]
    return "\n".join(lines + [""] + [f"- {note}" for note in notes])


def without_ours(env: dict[str, str]) -> dict[str, str]:
    """The reference's environment: without our sources on PYTHONPATH (its workers would
    import our barca) and without BARCA_ settings."""
    return {k: v for k, v in env.items() if k != "PYTHONPATH" and not k.startswith("BARCA_")}


def reference_side(command: str | None) -> tuple[Side | None, str | None]:
    """The reference, and why it cannot run the seed's pipeline (None if it can): its workers
    run on the Python of its venv, which must have duckdb and pandas."""
    if not command:
        return None, None
    cmd = shlex.split(command)
    if not shutil.which(cmd[0]):
        raise SystemExit(f"--reference: command not found: {cmd[0]}")
    side = Side("ref", cmd, without_ours(os.environ))
    python = core.sibling_python(cmd)
    if not python:
        return side, "no Python beside it for its workers"
    done = subprocess.run([python, "-c", "import duckdb, pandas"], capture_output=True)
    if done.returncode:
        return side, (f"its workers' Python lacks duckdb or pandas, which the seed imports "
                      f"(`{Path(python).parent / 'pip'} install duckdb pandas`)")
    return side, None


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", default="10000,200000",
                   help="the small and the large N, comma-separated (10000,200000)")
    p.add_argument("--skip-large", action="store_true",
                   help="leave out the large N's rows (3, 4's second, 7, 10)")
    p.add_argument("--no-io", type=int, default=20000, help="keys of row 6 (20000); 0 skips it")
    p.add_argument("--reference", metavar="CMD",
                   default=DEFAULT_REFERENCE if Path(DEFAULT_REFERENCE).exists() else None,
                   help="the published barca to run beside ours (default: "
                   f"{DEFAULT_REFERENCE} if it exists); '' for none")
    p.add_argument("--reference-large", action="store_true",
                   help="also run 0.33 at the large N (its first run: about 2 h at 200,000)")
    p.add_argument("--repeat", type=int, default=5,
                   help="runs per side of each tick, status and GET row (5); rows 8 and 9 take "
                   "3 times as many")
    p.add_argument("--first-runs", type=int, default=3,
                   help="first runs per side of rows 5 and 6 (3)")
    p.add_argument("--barca", default=core.default_barca(),
                   help="our barca command (default: as core.py's)")
    p.add_argument("--write", action="store_true",
                   help="record the table in benchmarks/RESULTS.md (machine, load, command)")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    sizes = [int(x) for x in args.keys.split(",")]
    small, large = sizes[0], (sizes[-1] if len(sizes) > 1 and not args.skip_large else None)
    registry = tempfile.mkdtemp(prefix="barca-rows-pools-")
    os.environ["XDG_RUNTIME_DIR"] = registry  # for serve.py's Server and its pool look-ups
    for name in [k for k in os.environ if k.startswith("BARCA_")]:
        del os.environ[name]
    kp.CHILD_ENV.clear()
    kp.CHILD_ENV.update(os.environ, BARCA_WARM_SECONDS="7200")
    kp.prepare_children()
    ours = Side("ours", shlex.split(args.barca), kp.CHILD_ENV)
    ref, ref_seed = reference_side(args.reference)
    where = subprocess.run([sys.executable, "-c", "import barca; print(barca.__file__)"],
                           env=kp.CHILD_ENV, capture_output=True, text=True).stdout.strip()
    header = [f"ours: `{shlex.join(ours.cmd)}`, {core.version_of(ours.cmd)} ({where})",
              (f"reference: `{shlex.join(ref.cmd)}`, {core.version_of(ref.cmd)}"
               + (f" (cannot run the seed: {ref_seed})" if ref_seed else "")) if ref
              else "reference: none"]
    print("\n".join(header), file=sys.stderr)
    load_before = core.load_average()
    measure = Measure(args, ours, ref, ref_seed)
    try:
        stage("rows 8, 9: start-up")
        measure.start_up()
        stage(f"rows 5, 1, 2, 4 at {small:,} keys")
        measure.small(small)
        if args.no_io:
            stage(f"row 6: {args.no_io:,} keys that do nothing")
            measure.no_io(args.no_io)
        if large:
            stage(f"rows 7, 3, 4, 10 at {large:,} keys")
            measure.large(small, large)
    finally:
        measure.pools.stop()
        kp.remove_discarded()
        shutil.rmtree(registry, ignore_errors=True)
    order = {num: i for i, num in enumerate("1 2 3 4 5 6 7 8 9 10".split())}
    rows = sorted(measure.rows, key=lambda r: order[r.num])  # stable: sub-rows keep their order
    if not large:
        rows.append(Row("3, 4, 7, 10", "the large N's rows", "not run (--skip-large or one N)"))
    notes = measure.notes + [f"load average (1/5/15 min) {load_before} before, "
                             f"{core.load_average()} after."]
    table = render(rows, notes)
    print(table)
    if args.write:
        write(header, table)


def stage(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr)


def write(header: list[str], table: str) -> None:
    now = _dt.datetime.now()
    heading = f"## Issue 28's rows ({now.strftime('%Y-%m-%d %H:%M')})"
    info = core.machine()
    head = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "unknown"
    command = shlex.join(["python", "benchmarks/user_rows.py", *sys.argv[1:]])
    section = "\n".join([
        heading, "",
        f"`{command}` (`benchmarks/user_rows.py`'s docstring says what each row measures)", "",
        f"- machine: CPUs {info['nproc']}, {info['cpu']}, {info['memory']} RAM, Linux "
        f"{info['kernel']}", f"- commit {head}; " + "; ".join(header), "", table, ""])
    core.write_results(section, heading)
    print(f"recorded in {core.RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
