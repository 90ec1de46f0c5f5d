"""`barca serve`: how late a schedule fires, what an idle server holds, what a tick costs.

    trigger latency   a 6-field cron firing every second (`* * * * * *`) on a cached asset:
                      for 30 fires, the run's recorded start minus the second it was due
    idle memory       a server with 10 scheduled jobs that are not due: resident memory
                      (RSS) and proportional set size (PSS, shared pages split among the
                      processes that map them) of the server process and of the warm pool
                      it starts and keeps (its runs fork from it), 3 s after it started
    one-key tick      the seed's keyed pipeline (examples/keyed_partitions, its sensor's cron
                      set to every 15 s) over N retailers: one retailer changes before each
                      fire; the time from the second the tick was due to the run recorded
                      as finished, against `barca get scored pipeline.py --pretty` typed after the
                      same kind of change (the CLI tick, warm pool up in both cases), the two
                      taken alternately

    .venv/bin/python benchmarks/serve.py                       # N = 10000
    .venv/bin/python benchmarks/serve.py --keys 10000,200000 --write

Targets (issue 15): trigger latency median <= 0.05 s, p95 <= 0.2 s; idle memory <= 80 MB;
the one-key tick under serve no slower than the CLI's.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from keyed_partitions import (SEED_PIPELINE, build_warehouse, change_one_retailer,  # noqa: E402
                              machine, median)

BARCA = [sys.executable, "-m", "barca.cli.main"]
TICK_CRON = "*/15 * * * * *"


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items()
           if not k.startswith("BARCA_") and k != "PYTHONPYCACHEPREFIX"}
    out.update(extra)
    return out


class Server:
    def __init__(self, root: Path, *args: str, environ: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([*BARCA, "serve", *args, "--port", "0"], cwd=root,
                                     env=environ or env(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.lines: list[str] = []
        ready = threading.Event()

        def read() -> None:
            for line in self.proc.stderr:
                self.lines.append(line.rstrip())
                if "serving on" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(60):
            self.stop()
            raise SystemExit("barca serve did not start:\n" + "\n".join(self.lines))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(15)


def runs(root: Path, since: float) -> list[tuple]:
    """(started_at, finished_at, status, triggered_by, steps_executed) of runs since."""
    conn = sqlite3.connect(f"file:{root / '.barca' / 'metadata.db'}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT started_at, finished_at, status, triggered_by, "
                            "steps_executed FROM runs WHERE started_at >= ? "
                            "ORDER BY started_at", (since,)).fetchall()
    finally:
        conn.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def measure_latency(fires: int) -> list[float]:
    root = Path(tempfile.mkdtemp(prefix="barca-serve-"))
    try:
        (root / "barca.toml").write_text("")
        (root / "p.py").write_text('from barca import Schedule, asset\n\n\n'
                                   '@asset(freshness=Schedule("* * * * * *"))\n'
                                   'def every_second() -> int:\n    return 1\n')
        subprocess.run([*BARCA, "get", "every_second", "p.py"], cwd=root, env=env(),
                       capture_output=True, check=True)
        start = time.time()
        server = Server(root, "p.py")
        try:
            deadline = time.time() + fires + 30
            while time.time() < deadline and len(runs(root, start)) < fires + 3:
                time.sleep(0.5)
        finally:
            server.stop()
        # the first fires start the warm pool: count from the third
        started = [r[0] for r in runs(root, start) if r[3] == "schedule"][2:fires + 2]
        return [s - int(s) for s in started]
    finally:
        _stop_pool(root)
        shutil.rmtree(root, ignore_errors=True)


def measure_idle(jobs: int) -> tuple[float, ...]:
    """RSS and PSS (MB) of the server process, then of the warm pool it keeps."""
    root = Path(tempfile.mkdtemp(prefix="barca-serve-"))
    try:
        (root / "barca.toml").write_text("")
        body = "from barca import Schedule, asset\n"
        for i in range(jobs):
            body += (f'\n\n@asset(freshness=Schedule("0 0 1 1 *"))\n'
                     f'def job{i}() -> int:\n    return {i}\n')
        (root / "p.py").write_text(body)
        server = Server(root, "p.py")
        try:
            time.sleep(3)
            pool = _pool_pid(root)
            out = [_kib(f"/proc/{pid}/{name}", field) / 1024 for pid in (server.proc.pid, pool)
                   for name, field in (("status", "VmRSS:"), ("smaps_rollup", "Pss:"))]
        finally:
            server.stop()
        return tuple(out)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def measure_ticks(n: int, ticks: int) -> tuple[list[float], list[float], list[int]]:
    root = Path(tempfile.mkdtemp(prefix="barca-serve-"))
    try:
        (root / "barca.toml").write_text("")
        build_warehouse(root, n)
        (root / "pipeline.py").write_text(SEED_PIPELINE.replace('Schedule("*/5 * * * *")',
                                                                f'Schedule("{TICK_CRON}")'))
        first = subprocess.run([*BARCA, "get", "scored", "pipeline.py", "--pretty"], cwd=root,
                               env=env(), capture_output=True, text=True)
        if first.returncode != 0:
            raise SystemExit(f"first run failed:\n{first.stderr[-2000:]}")
        _pool_pid(root)
        served, cli, executed = [], [], []
        server = Server(root, "pipeline.py")
        try:  # alternately, so that both sides see the same minutes of a shared machine
            for tick in range(ticks):
                change_one_retailer(root, n, 2 * tick)
                changed = time.time()
                deadline = changed + 120
                while time.time() < deadline:
                    done = [r for r in runs(root, changed) if r[3] == "schedule"]
                    if done and done[0][1] is not None:
                        break
                    time.sleep(0.05)
                started, finished, _, _, steps = done[0]
                served.append(finished - float(int(started)))  # due: the second it started in
                executed.append(steps)
                change_one_retailer(root, n, 2 * tick + 1)
                t0 = time.perf_counter()
                # as typed in a terminal (piped, the CLI would print, and so read, every
                # key's value; a server's tick reads none)
                subprocess.run([*BARCA, "get", "scored", "pipeline.py", "--pretty"], cwd=root,
                               env=env(), capture_output=True, check=True)
                cli.append(time.perf_counter() - t0)
        finally:
            server.stop()
        return served, cli, executed
    finally:
        _stop_pool(root)
        shutil.rmtree(root, ignore_errors=True)


def _pool_pid(root: Path, timeout: float = 120) -> int:
    """The pid of the project's warm pool, once it answers."""
    import json

    deadline = time.time() + timeout
    while time.time() < deadline:
        out = subprocess.run([*BARCA, "pool", "--json"], cwd=root, env=env(),
                             capture_output=True, text=True).stdout
        for pool in json.loads(out or '{"pools": []}')["pools"]:
            if pool["project"] == str(root.resolve()):
                return pool["pid"]
        time.sleep(0.5)
    raise SystemExit(f"no warm pool came up for {root}")


def _stop_pool(root: Path) -> None:
    subprocess.run([*BARCA, "pool", "stop"], cwd=root, env=env(), capture_output=True)


def _kib(path: str, field: str) -> float:
    for line in open(path):
        if line.startswith(field):
            return float(re.findall(r"\d+", line)[0])
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="10000", help="retailer counts, comma-separated")
    parser.add_argument("--fires", type=int, default=30)
    parser.add_argument("--ticks", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="append to RESULTS.md")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(HERE.parent / "src")])
    lines = [f"machine: {machine()}", "",
             "| measurement | value | target |", "|---|---|---|"]
    latency = measure_latency(args.fires)
    lines.append(f"| trigger latency, `* * * * * *`, {len(latency)} fires | median "
                 f"{median(latency):.3f} s, p95 {percentile(latency, 0.95):.3f} s, max "
                 f"{max(latency):.3f} s | median <= 0.05 s, p95 <= 0.2 s |")
    rss, pss, pool_rss, pool_pss = measure_idle(10)
    lines.append(f"| idle server, 10 scheduled jobs | server RSS {rss:.0f} MB (PSS "
                 f"{pss:.0f} MB); with the warm pool it keeps (RSS {pool_rss:.0f} MB, PSS "
                 f"{pool_pss:.0f} MB): PSS {pss + pool_pss:.0f} MB | <= 80 MB |")
    for n in [int(k) for k in args.keys.split(",")]:
        served, cli, executed = measure_ticks(n, args.ticks)
        lines.append(f"| one-key tick, {n:,} keys: serve (due -> recorded) vs CLI (wall) | "
                     f"{median(served):.2f} s vs {median(cli):.2f} s (steps run: "
                     f"{sorted(set(executed))}) | serve <= CLI |")
    table = "\n".join(lines)
    print(table)
    if args.write:
        with open(HERE / "RESULTS.md", "a") as out:
            out.write(f"\n## barca serve ({time.strftime('%Y-%m-%d')})\n\n"
                      f"`.venv/bin/python benchmarks/serve.py {' '.join(sys.argv[1:])}`\n\n"
                      f"{table}\n")


if __name__ == "__main__":
    main()
