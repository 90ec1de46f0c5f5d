"""Keyed partitions: the seed's pipeline over N retailers, first run and ticks, as whole processes.

For each N it builds a DuckDB warehouse of orders (three rows per retailer, sorted by
retailer) and copies the seed's pipeline unchanged (a `retailer_versions` sensor, `cleaned`
and `scored` with `partitions_from`), both from examples/keyed_partitions/, and times
`barca get scored pipeline.py --pretty` (as typed in a terminal; piped, it would print every
key's value, a file read per key):

    first run        cold, every key of both assets
    no-change tick   nothing changed: the sensor runs, every key is cached
    one-key tick     one retailer's orders changed: the sensor and that key of each asset

Ticks are measured twice: with the warm pool (the default: a background process per project,
started by the first run, keeps the pipeline's libraries imported and forks the workers of
every run; the benchmark waits until it answers after the first run, as a tick minutes later
would find it) and with BARCA_WARM_SECONDS=0 (every worker a fresh interpreter). Each row gives
wall time and the peak RSS of the largest process of the run: the coordinator and fresh
workers from wait4's rusage of the process tree, forked workers from the peak RSS they
recorded for their steps, and for the first run also the pool's own peak (VmHWM, read once it
answers). The pool's resident memory after the ticks is printed below the table.

The one-key tick ratio of the largest to the smallest N is also measured paired: the two
projects and their pools are kept (BARCA_WARM_SECONDS=7200, so that they outlive the first
runs in between), and their ticks are taken alternately, so that both sides of the ratio see
the same minutes of a shared machine, whose speed drifts by a quarter or more over the
minutes between the per-N rows. A variant whose steps do
no I/O (static keys, trivial bodies) gives first-run steps per second.

    .venv/bin/python benchmarks/keyed_partitions.py                 # N = 10000
    .venv/bin/python benchmarks/keyed_partitions.py --keys 10000,50000,200000 --write

`--against SRC` compares this checkout with another one (its `src` directory, put on
PYTHONPATH for that side's processes) at the first N, side by side on a shared machine: the
first runs and the no-I/O first runs in the order this, other, other, this (so that a drift of
the machine's speed weighs on both sides alike), then one-key and no-change ticks with the
warm pool, taken alternately. It prints medians per side and their ratio:

    .venv/bin/python benchmarks/keyed_partitions.py --keys 10000 --against /tmp/before/src

`--variant batch-all` and `--variant batch-1000` run the same work in the batch form
(`batch="all"`, `batch=1000`; `barca docs batch`): one DuckDB query per call instead of one per
key, every key still cached on its own.

`--split ROWS` measures instead one batch call that returns a 4-column table of ROWS rows (a
DuckDB relation) split into one parquet artifact per key, at the first N (fresh workers, a
fresh project per run). Its peak RSS is also given over that of the same call returning no rows
(the worker's interpreter and DuckDB, and N empty files): what the table's split adds.

    .venv/bin/python benchmarks/keyed_partitions.py --keys 10000 --split 1000000

`--variant fetchall` runs the same pipeline with `.fetchall()` in place of `.df()`, which
leaves pandas out of the worker: pandas' import alone takes about 0.7 s on a 2-core machine and
is paid by every tick in which a key of `cleaned` runs.

Projects are removed when the script ends, not between measurements, and the script is best
started a few minutes after anything deleted many files (its own previous run included): on
this machine's disk, files created within minutes of a mass deletion cost 5 to 10 times more
(see `discard`).

Child processes find bytecode as an installed barca does: pip compiled the libraries when it
installed them, and the benchmark compiles barca's own package first (an editable install has
none yet, and a sandbox that sets PYTHONDONTWRITEBYTECODE would recompile barca in every
process). PYTHONPYCACHEPREFIX is unset for them: with it, every library would be compiled
from source again at its first import, in the first run's processes.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BARCA = [sys.executable, "-m", "barca.cli.main"]
# a tick as the seed's user types it in a terminal: the run, and the first keys' values shown
# (--json would read every key's value: a read per key, which is output, not the tick)
TICK = [*BARCA, "get", "scored", "pipeline.py", "--pretty"]
CHILD_ENV = dict(os.environ)
REPORT_WITHOUT_VALUE = """
import orjson
from barca.engine.driver import run
from barca.views.run_report import RunReport
result = run("get", "orders", ["pipeline.py"])
print(orjson.dumps(RunReport(result, "get", "orders", values="none").to_json()).decode())
"""
POOL_RSS: dict[int, float] = {}  # N -> resident MB of the warm pool after the ticks
KEPT: dict[int, tuple[Path, int, int]] = {}  # N -> project, pool pid, ticks taken so far
DISCARDED: list[Path] = []  # projects removed when the script ends


def discard(directory: Path) -> None:
    """Remove a project when the script ends, not now. ext4 without a journal (this machine's
    disk) will not reuse an inode deleted in the last 1 to 6 minutes, and scans past each such
    inode whenever it creates a file: a first run right after a 400,000-file project was
    deleted created its files 5 to 10 times slower (kernel time in `recently_deleted`)."""
    DISCARDED.append(directory)


def remove_discarded() -> None:
    for directory in DISCARDED:
        shutil.rmtree(directory, ignore_errors=True)

EXAMPLE = HERE.parent / "examples" / "keyed_partitions"
SEED_PIPELINE = (EXAMPLE / "pipeline.py").read_text()  # the user's example, unchanged

NO_IO_PIPELINE = '''from barca import asset, partitions

KEYS = [f"k{{i:06d}}" for i in range({n})]


@asset(partitions={{"k": partitions(KEYS)}})
def first(k: str) -> dict:
    return {{"k": k}}


@asset(partitions={{"k": partitions(KEYS)}}, inputs={{"first": first}})
def second(k: str, first: dict) -> dict:
    return {{"k": k, "n": len(first)}}
'''


BATCHED_PIPELINE = '''import duckdb
from barca import Schedule, asset, partitions_from, sensor


@sensor(freshness=Schedule("*/5 * * * *"))
def retailer_versions() -> dict:
    rows = duckdb.connect("warehouse.duckdb", read_only=True).execute(
        "select retailer, max(updated_at)::varchar from orders group by retailer"
    ).fetchall()
    return dict(rows)


@asset(partitions={{"retailer": partitions_from(retailer_versions)}}, batch={batch})
def cleaned(retailer: list[str], retailer_versions: dict) -> dict:
    rows = dict(duckdb.connect("warehouse.duckdb", read_only=True).execute(
        "select retailer, count(*) from orders "
        "where retailer in (select unnest(?::varchar[])) group by retailer", [retailer]
    ).fetchall())
    return {{r: {{"retailer": r, "rows": rows.get(r, 0), "as_of": retailer_versions[r]}}
            for r in retailer}}


@asset(partitions={{"retailer": partitions_from(cleaned)}}, batch={batch})
def scored(retailer: list[str], cleaned: dict[str, dict]) -> dict:
    return {{r: {{**cleaned[r], "score": cleaned[r]["rows"] * 0.1}} for r in retailer}}
'''  # the seed's pipeline in the batch form: one query per call instead of one per key

VARIANTS = ("seed", "fetchall", "batch-all", "batch-1000")

SPLIT_PIPELINE = '''import duckdb
from barca import asset, partitions

KEYS = [f"r{{i:06d}}" for i in range({n})]


@asset(partitions={{"retailer": partitions(KEYS)}}, batch="all")
def orders(retailer: list[str]) -> duckdb.DuckDBPyRelation:
    return duckdb.sql(
        "select 'r' || lpad((i % {n})::varchar, 6, '0') as retailer, i as id, "
        "(i * 7919) % 1000 as amount, i::double / 3 as price from range({rows}) t(i)")
'''  # one call returns a 4-column table of `rows` rows, split into one parquet per key




def pipeline_source(variant: str) -> str:
    if variant == "fetchall":
        return SEED_PIPELINE.replace(".df()", ".fetchall()")
    if variant.startswith("batch-"):
        size = variant.removeprefix("batch-")
        return BATCHED_PIPELINE.format(batch=repr(size) if size == "all" else size)
    return SEED_PIPELINE


def _warehouse_module():
    spec = importlib.util.spec_from_file_location("keyed_example_warehouse",
                                                  EXAMPLE / "warehouse.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WAREHOUSE = _warehouse_module()


def build_warehouse(directory: Path, n: int) -> None:
    WAREHOUSE.build(directory, n)


def change_one_retailer(directory: Path, n: int, tick: int) -> None:
    WAREHOUSE.touch(directory, WAREHOUSE.retailer((n // 2 + tick) % n))


def timed(args: list[str], cwd: Path, pool: int | None = None) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MB of the largest process in the tree, and stdout.

    With a warm pool, the command and its workers are the pool's children, not ours: a
    sampler reads their peak RSS (VmHWM, which only grows) every 5 ms while the command runs."""
    sampled = [0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for pid in descendants(pool):
                sampled[0] = max(sampled[0], status_mb(pid))
            done.wait(0.005)

    sampler = threading.Thread(target=sample) if pool else None
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=CHILD_ENV)
    if sampler:
        sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    if sampler:
        sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{err.decode()[-2000:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return wall, max(peak, sampled[0]), out.decode()


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        try:
            children = Path(f"/proc/{todo.pop()}/task").glob("*/children")
            found = [int(c) for path in children for c in path.read_text().split()]
        except OSError:
            continue
        out += found
        todo += found
    return out


def status_mb(pid: int, field: str = "VmHWM") -> float:
    """A memory figure of a live process from /proc/PID/status (VmHWM: peak resident)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run_isolated(args: list[str], cwd: Path, env: dict[str, str] | None = None,
                 pool: int | None = None) -> tuple[float, float, str]:
    """Run in a fresh child so RUSAGE_CHILDREN's max covers only this command's tree."""
    code = ("import sys, json; sys.path.insert(0, %r); import keyed_partitions as k; "
            "from pathlib import Path; w, p, o = k.timed(%r, Path(%r), %r); "
            "print(json.dumps([w, p, o]))") % (str(HERE), args, str(cwd), pool)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env or CHILD_ENV)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    import json

    wall, peak, stdout = json.loads(out.stdout)
    return wall, peak, stdout


def steps_executed(directory: Path) -> int:
    """The newest run's executed steps, from its record."""
    import sqlite3

    conn = sqlite3.connect(f"file:{directory / '.barca' / 'metadata.db'}?mode=ro", uri=True)
    try:
        return conn.execute("select steps_executed from runs order by started_at desc "
                            "limit 1").fetchone()[0]
    finally:
        conn.close()


def recorded(directory: Path) -> tuple[float, float]:
    """From the newest run's records: the largest peak RSS a step recorded (covers workers
    forked by the pool), and the seconds of the sensor step (the seed's query plus packing
    its keys)."""
    import sqlite3

    conn = sqlite3.connect(f"file:{directory / '.barca' / 'metadata.db'}?mode=ro", uri=True)
    try:
        run_id = conn.execute("select run_id from runs order by started_at desc "
                              "limit 1").fetchone()[0]
        peak, sensor = conn.execute(
            "select max(max_rss_bytes), sum(case when node_id = 'pipeline.py:retailer_versions'"
            " then elapsed_seconds end) from materializations where run_id = ?",
            [run_id]).fetchone()
    finally:
        conn.close()
    return (peak or 0) / 2**20, sensor or 0.0


def timed_run(cmd: list[str], directory: Path, env: dict[str, str], pool: int | None = None
              ) -> tuple[float, float, str, float]:
    """Wall seconds, peak RSS in MB, stdout and the sensor step's seconds."""
    wall, peak, out = run_isolated(cmd, directory, env, pool)
    worker_peak, sensor = recorded(directory)
    return wall, max(peak, worker_peak), out, sensor


def warm_pool_pid(directory: Path, timeout: float = 300, env: dict[str, str] | None = None
                  ) -> int:
    """Wait until the project's warm pool answers and has settled (it imports the rest of
    barca once the run that started it is over), as a tick minutes later finds it; its pid.
    `env`: that of the barca that started it."""
    probe = ("import sys, time; from pathlib import Path; "
             "from barca.engine.local.warm_pool import WarmPool; "
             "root = Path(sys.argv[1]); deadline = time.monotonic() + float(sys.argv[2])\n"
             "while WarmPool.connect(root) is None:\n"
             "    if time.monotonic() > deadline: sys.exit('no warm pool')\n"
             "    time.sleep(0.2)")
    if subprocess.run([sys.executable, "-c", probe, str(directory), str(timeout)],
                      env=env or CHILD_ENV).returncode:
        raise SystemExit(f"no warm pool answered in {directory} within {timeout:.0f} s")
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"barca.cli.warm_launcher" in argv and str(directory).encode() in argv:
            return _settled(int(entry.name), timeout)
    raise SystemExit("the warm pool answered but its process was not found")


def _settled(pid: int, timeout: float, still: float = 1.0) -> int:
    """`pid`, once its CPU time has not moved for `still` seconds (or after `timeout`)."""
    def cpu() -> str:
        try:
            return " ".join(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13])
        except OSError:
            return ""
    deadline, last, since = time.monotonic() + timeout, cpu(), time.monotonic()
    while time.monotonic() - since < still and time.monotonic() < deadline:
        time.sleep(0.1)
        now = cpu()
        if now != last:
            last, since = now, time.monotonic()
    return pid




def measure_keyed(n: int, ticks: int, variant: str, keep: bool = False) -> list[tuple]:
    """The rows for N keys; with `keep`, the project and its warm pool stay for paired ticks
    (in KEPT)."""
    rows = []
    directory = Path(tempfile.mkdtemp(prefix=f"barca-keyed-{n}-"))
    kept = False
    try:
        build_warehouse(directory, n)
        (directory / "pipeline.py").write_text(pipeline_source(variant))
        cmd = TICK
        batched = variant.startswith("batch-")
        wall, peak, out, sensor = timed_run(cmd, directory, CHILD_ENV)
        pool = warm_pool_pid(directory)
        peak = max(peak, status_mb(pool))  # the pool this run started is one of its processes
        rows.append((n, "first run", wall, peak, steps_executed(directory), sensor))
        fresh = dict(CHILD_ENV, BARCA_WARM_SECONDS="0")
        for label, env in (("", CHILD_ENV), (" (fresh workers)", fresh)):
            watch = None if label else pool
            for _ in range(ticks):
                wall, peak, out, sensor = timed_run(cmd, directory, env, watch)
                rows.append((n, "no-change tick" + label, wall, peak, steps_executed(directory),
                             sensor))
            for tick in range(ticks):
                change_one_retailer(directory, n, tick + (ticks if label else 0))
                wall, peak, out, sensor = timed_run(cmd, directory, env, watch)
                rows.append((n, "one-key tick" + label, wall, peak, steps_executed(directory),
                             sensor))
                if batched and not label:  # the same tick one key per call, taken in turn
                    change_one_retailer(directory, n, 2 * ticks + tick)
                    wall, peak, out, sensor = timed_run([*cmd, "--batch", "none"], directory,
                                                        env, watch)
                    rows.append((n, "one-key tick (--batch none)", wall, peak,
                                 steps_executed(directory), sensor))
        POOL_RSS[n] = status_mb(pool, "VmRSS")
        if keep:
            KEPT[n] = (directory, pool, 3 * ticks)
            kept = True
        else:
            os.kill(pool, signal.SIGTERM)
    finally:
        if not kept:
            discard(directory)
    return rows


def measure_paired(small: int, large: int, pairs: int) -> list[tuple[float, float]]:
    """One-key ticks of the smallest and largest N taken alternately, so that both sides of
    the ratio see the same minutes of this shared machine; (small, large) wall per pair."""
    cmd = TICK
    out = []
    try:
        for i in range(pairs):
            walls = []
            for n in (small, large):
                directory, pool, done = KEPT[n]
                change_one_retailer(directory, n, done + i)
                walls.append(timed_run(cmd, directory, CHILD_ENV, pool)[0])
            out.append((walls[0], walls[1]))
    finally:
        for directory, pool, _ in KEPT.values():
            try:
                os.kill(pool, signal.SIGTERM)
            except ProcessLookupError:
                pass
            discard(directory)
    return out


def measure_against(n: int, pairs: int, variant: str, no_io_n: int, other_src: str
                    ) -> list[tuple[str, list[float], list[float]]]:
    """(scenario, walls of this checkout, walls of the other) for N keys, side by side."""
    envs = {"this": CHILD_ENV, "other": dict(CHILD_ENV, PYTHONPATH=other_src)}
    walls: dict[str, dict[str, list[float]]] = {}
    projects: dict[str, tuple[Path, int]] = {}
    cmd = TICK

    def take(scenario: str, side: str, wall: float) -> None:
        walls.setdefault(scenario, {"this": [], "other": []})[side].append(wall)

    try:
        for side in ("this", "other", "other", "this"):
            directory = Path(tempfile.mkdtemp(prefix=f"barca-against-{side}-{n}-"))
            build_warehouse(directory, n)
            (directory / "pipeline.py").write_text(pipeline_source(variant))
            take(f"first run, {n:,} keys", side, timed_run(cmd, directory, envs[side])[0])
            pool = warm_pool_pid(directory, env=envs[side])
            if side in projects:  # the second first run of a side: only timed
                os.kill(pool, signal.SIGTERM)
                discard(directory)
            else:
                projects[side] = (directory, pool)
            if no_io_n:
                take(f"no-I/O first run, {no_io_n:,} keys", side,
                     measure_no_io(no_io_n, envs[side])[1])
        for i in range(pairs):
            for side in ("this", "other") if i % 2 == 0 else ("other", "this"):
                directory, pool = projects[side]
                take("no-change tick", side,
                     timed_run(cmd, directory, envs[side], pool)[0])
                change_one_retailer(directory, n, i)
                take("one-key tick", side, timed_run(cmd, directory, envs[side], pool)[0])
    finally:
        for directory, pool in projects.values():
            try:
                os.kill(pool, signal.SIGTERM)
            except ProcessLookupError:
                pass
            discard(directory)
    return [(scenario, sides["this"], sides["other"]) for scenario, sides in walls.items()]


def render_against(rows: list[tuple[str, list[float], list[float]]], other_src: str) -> str:
    lines = [f"Side by side with `{other_src}` (\"other\"):", "",
             "| scenario | runs per side | this median | other median | this / other |",
             "|---|---|---|---|---|"]
    for scenario, this, other in rows:
        lines.append(f"| {scenario} | {len(this)} | {median(this):.3f} s | "
                     f"{median(other):.3f} s | {median(this) / median(other):.2f} |")
    return "\n".join(lines)


def measure_split(n: int, rows: int, runs: int) -> tuple[list[tuple], float]:
    """A batch call returning a `rows` x 4 table (a DuckDB relation) split into N keys:
    (wall, peak RSS MB, the table's size in Arrow memory MB, the batch line) per run, each on
    a fresh project; and the peak RSS MB of the same call returning no rows (the worker's
    interpreter, DuckDB and N empty files), which the table's split adds to."""
    import duckdb

    table_mb = duckdb.sql(
        f"select 'r' || lpad((i % {n})::varchar, 6, '0') as retailer, i as id, "
        f"(i * 7919) % 1000 as amount, i::double / 3 as price from range({rows}) t(i)"
    ).to_arrow_table().nbytes / 2**20
    measured = [_split_run(n, rows) for _ in range(runs)]
    return [(wall, peak, table_mb, execution) for wall, peak, execution in measured], \
        _split_run(n, 0)[1]


def _split_run(n: int, rows: int) -> tuple[float, float, dict]:
    directory = Path(tempfile.mkdtemp(prefix=f"barca-split-{n}-"))
    try:
        (directory / "pipeline.py").write_text(SPLIT_PIPELINE.format(n=n, rows=rows))
        env = dict(CHILD_ENV, BARCA_WARM_SECONDS="0")
        # the report without the target's value (what a server's tick sends): the split is
        # measured, not reading 10,000 pointers back for the printed value
        wall, peak, stdout, _ = timed_run([sys.executable, "-c", REPORT_WITHOUT_VALUE],
                                          directory, env)
        import json

        steps = next(s for s in json.loads(stdout)["steps"] if s["id"].endswith("orders"))
        return wall, peak, steps.get("batch_execution", {})
    finally:
        discard(directory)


def render_split(n: int, rows: int, measured: tuple[list[tuple], float]) -> str:
    runs, empty_peak = measured
    lines = ["| table rows | keys | run | wall | peak RSS | over a 0-row call | table in memory "
             "| split | write | target |", "|---|---|---|---|---|---|---|---|---|---|"]
    for i, (wall, peak, table_mb, execution) in enumerate(runs, 1):
        lines.append(f"| {rows:,} | {n:,} | {i} | {wall:.2f} s | {peak:.0f} MB | "
                     f"{peak - empty_peak:+.0f} MB | {table_mb:.0f} MB | "
                     f"{execution.get('split_seconds', 0):.2f} s | "
                     f"{execution.get('write_seconds', 0):.2f} s | ≤ 10 s, RSS ≤ 2x table |")
    return "\n".join(lines)


def measure_no_io(n: int, env: dict[str, str] | None = None) -> tuple:
    directory = Path(tempfile.mkdtemp(prefix=f"barca-noio-{n}-"))
    try:
        (directory / "pipeline.py").write_text(NO_IO_PIPELINE.format(n=n))
        wall, peak, out, _ = timed_run([*BARCA, "get", "second", "pipeline.py", "--pretty"],
                                       directory, env or CHILD_ENV)
        steps = steps_executed(directory)
        return n, wall, peak, steps, steps / wall
    finally:
        discard(directory)


TARGETS = {10_000: (0.4, 0.3, 150, 30), 50_000: (0.6, 0.5, 250, 150),
           200_000: (1.0, 0.8, 400, 600)}


def median(values: list[float]) -> float:
    values = sorted(values)
    return values[len(values) // 2]


def render(rows: list[tuple], no_io: list[tuple], paired: list[tuple[float, float]]) -> str:
    lines = ["| N keys | scenario | runs | median wall | min wall | peak RSS (largest process) "
             "| steps | sensor step | target wall | target RSS |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple, list[tuple]] = {}
    for row in rows:
        groups.setdefault((row[0], row[1]), []).append(row)
    tick_medians, rest_medians = {}, {}
    for (n, scenario), items in groups.items():
        walls = [r[2] for r in items]
        one, none, rss, first = TARGETS.get(n, (None,) * 4)
        target = {"first run": first, "no-change tick": none, "one-key tick": one}.get(scenario)
        if scenario == "one-key tick":
            tick_medians[n] = median(walls)
            rest_medians[n] = median([r[2] - r[5] for r in items])
        lines.append(f"| {n:,} | {scenario} | {len(items)} | {median(walls):.2f} s | "
                     f"{min(walls):.2f} s | {max(r[3] for r in items):.0f} MB | "
                     f"{items[-1][4]} | {median([r[5] for r in items]):.2f} s | "
                     f"{'≤ %s s' % target if target else '-'} | "
                     f"{'≤ %s MB' % rss if rss and target else '-'} |")
    if len(tick_medians) > 1:
        small, large = min(tick_medians), max(tick_medians)
        lines.append("")
        if paired:
            lines.append(
                f"One-key tick ratio {large:,} / {small:,} keys, paired (ticks of the two "
                f"sizes taken alternately, {len(paired)} pairs): "
                f"{median([b / a for a, b in paired]):.2f} (target ≤ 2.5); medians "
                f"{median([a for a, _ in paired]):.2f} s and {median([b for _, b in paired]):.2f}"
                f" s. From the rows above, taken minutes apart: "
                f"{tick_medians[large] / tick_medians[small]:.2f}.")
        else:
            lines.append(f"One-key tick ratio {large:,} / {small:,} keys: "
                         f"{tick_medians[large] / tick_medians[small]:.2f} (target ≤ 2.5).")
        lines.append(f"Without the sensor step (the seed's group-by over every retailer, "
                     f"which grows with N whatever the orchestrator): {rest_medians[small]:.2f} "
                     f"s and {rest_medians[large]:.2f} s, ratio "
                     f"{rest_medians[large] / rest_medians[small]:.2f}.")
    if POOL_RSS:
        lines.append("")
        lines.append("Warm pool resident memory between ticks: " + ", ".join(
            f"{mb:.0f} MB at {n:,} keys" for n, mb in POOL_RSS.items()))
    if no_io:
        lines += ["", "| no-I/O variant keys | wall | peak RSS | steps | steps/s |",
                  "|---|---|---|---|---|"]
        for n, wall, peak, steps, rate in no_io:
            lines.append(f"| {n:,} | {wall:.2f} s | {peak:.0f} MB | {steps} | {rate:,.0f} |")
    return "\n".join(lines)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


def prepare_children(*packages: Path) -> None:
    """Child processes find bytecode as an installed barca does (see the module docstring):
    no PYTHONDONTWRITEBYTECODE or PYTHONPYCACHEPREFIX, barca's package (and `packages`)
    compiled first."""
    for name in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"):
        CHILD_ENV.pop(name, None)
    package = Path(importlib.util.find_spec("barca").origin).parent
    for directory in (package, *packages):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(directory)],
                       env=CHILD_ENV, check=True)


def main() -> None:
    try:
        measure_and_print()
    finally:
        remove_discarded()


def measure_and_print() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", default="10000", help="comma list of key counts")
    parser.add_argument("--ticks", type=int, default=3, help="ticks of each kind per N")
    parser.add_argument("--no-io", default="20000", help="key count of the no-I/O variant "
                        "(each of two assets); 0 to skip")
    parser.add_argument("--variant", choices=VARIANTS, default="seed",
                        help="seed: the pipeline as written; fetchall: .fetchall() for .df(); "
                        "batch-all, batch-1000: the same work in the batch form (batch=)")
    parser.add_argument("--against", metavar="SRC", help="compare side by side with the barca "
                        "package under this src directory, at the first N (see above)")
    parser.add_argument("--split", type=int, metavar="ROWS", help="instead: a batch call "
                        "returning a 4-column table of ROWS rows, split into the first N keys")
    parser.add_argument("--write", action="store_true", help="append to benchmarks/RESULTS.md")
    args = parser.parse_args()
    prepare_children(*([Path(args.against) / "barca"] if args.against else []))
    # the pools of the smallest and largest N must outlive the first runs between them
    CHILD_ENV["BARCA_WARM_SECONDS"] = "7200"
    sizes = [int(x) for x in args.keys.split(",")]
    if args.split:
        table = render_split(sizes[0], args.split, measure_split(sizes[0], args.split,
                                                                 args.ticks))
        print(table)
        if args.write:
            _append(args, table)
        return
    if args.against:
        table = render_against(measure_against(sizes[0], 2 * args.ticks, args.variant,
                                               int(args.no_io), str(Path(args.against))),
                               args.against)
        print(table)
        if args.write:
            _append(args, table)
        return
    paired_sizes = (min(sizes), max(sizes)) if len(set(sizes)) > 1 else ()
    rows = []
    for n in sizes:
        rows += measure_keyed(n, args.ticks, args.variant, keep=n in paired_sizes)
    paired = measure_paired(*paired_sizes, 2 * args.ticks) if paired_sizes else []
    no_io = [measure_no_io(int(args.no_io))] if int(args.no_io) else []
    table = render(rows, no_io, paired)
    print(table)
    if args.write:
        _append(args, table)


def _append(args: argparse.Namespace, table: str) -> None:
    command = "python benchmarks/keyed_partitions.py " + " ".join(sys.argv[1:])
    with open(HERE / "RESULTS.md", "a") as fh:
        what = f"batch table split of {args.split:,} rows" if args.split else args.variant
        fh.write(f"\n## Keyed partitions, {what} ({time.strftime('%Y-%m-%d %H:%M')})"
                 f"\n\nMachine: {machine()}. Command: `{command}`.\n\n{table}\n")


if __name__ == "__main__":
    main()
