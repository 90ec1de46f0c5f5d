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

    load (--load)     a server on a small project (4 assets, one of them partitioned over
                      50 keys, a task, 6 recorded runs), over loopback from CLIENTS threads
                      on kept-alive connections, in one shuffled order: 2,000 GETs spread
                      evenly over /health, /assets, /state, /runs, /runs/{id},
                      /assets/{name}/partitions, /schedule and /openapi.json, and 300
                      POST /runs: 150 dry runs and 60 cached gets (202 once the run is
                      accepted or queued: the time to an answer, not to the run's end), 90
                      refused (bad JSON 400, text/plain 415, unknown target 404); latency
                      p50/p99/max per kind, 503s counted apart (a full run queue or
                      command queue, refused at once: not a latency), the server's RSS
                      (VmRSS) before and after (its runs drained); then one POST of a 64 MB
                      body, with Content-Length and chunked: the status and the server's
                      peak RSS over its RSS before (sampled every 5 ms)

    .venv/bin/python benchmarks/serve.py                       # N = 10000
    .venv/bin/python benchmarks/serve.py --keys 10000,200000 --write
    .venv/bin/python benchmarks/serve.py --load                # the load section only

Targets (issue 15): trigger latency median <= 0.05 s, p95 <= 0.2 s; idle memory <= 80 MB;
the one-key tick under serve no slower than the CLI's. Issue 26: a 64 MB body is refused
(413) with the server's RSS growing by under 50 MB; no 500 under load.
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
from process_memory import PeakRss, kib, rss_mb  # noqa: E402

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

    @property
    def port(self) -> int:
        for line in self.lines:
            found = re.search(r"serving on http://[^ ]*:(\d+)", line)
            if found:
                return int(found.group(1))
        raise SystemExit("barca serve printed no port:\n" + "\n".join(self.lines))

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
            out = [kib(f"/proc/{pid}/{name}", field) / 1024 for pid in (server.proc.pid, pool)
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


# -- load (issue 26) ----------------------------------------------------------------------------

LOAD_PIPELINE = """from barca import Schedule, asset, partitions, task


@asset()
def raw() -> list:
    return list(range(1000))


@asset(inputs={"raw": raw})
def clean(raw: list) -> list:
    return [x * 2 for x in raw]


@asset(inputs={"clean": clean}, freshness=Schedule("0 0 1 1 *"))
def summary(clean: list) -> int:
    return sum(clean)


@asset(partitions={"region": partitions([f"r{i:02d}" for i in range(50)])},
       inputs={"clean": clean})
def per_region(region: str, clean: list) -> int:
    return len(region) + len(clean)


@task(inputs={"summary": summary})
def publish(summary: int) -> None:
    print(summary)
"""
LOAD_GETS = ["/health", "/assets", "/state", "/runs", "/runs/{id}",
             "/assets/per_region/partitions?limit=20", "/schedule", "/openapi.json"]
JSON = {"Content-Type": "application/json"}
# kind -> (count, headers, body, the status it must get)
LOAD_POSTS = {"POST /runs dry run": (150, JSON, b'{"targets": ["summary"], "dry_run": true}', 200),
              "POST /runs get (cached)": (60, JSON, b'{"targets": ["summary"]}', 202),
              "POST /runs bad JSON": (30, JSON, b'{"targets": [', 400),
              "POST /runs text/plain": (30, {"Content-Type": "text/plain"},
                                        b'{"targets": ["summary"]}', 415),
              "POST /runs unknown target": (30, JSON, b'{"targets": ["nope"]}', 404)}
BIG_BODY = 64 * 1024 * 1024


def measure_load(clients: int, gets: int, seed: int = 26) -> tuple[list[str], list[str]]:
    """The load table's rows and its notes (see the module docstring)."""
    import random

    root = Path(tempfile.mkdtemp(prefix="barca-serve-load-"))
    try:
        (root / "barca.toml").write_text("")
        (root / "p.py").write_text(LOAD_PIPELINE)
        for argv in (["get", "p.py"], ["run", "publish", "p.py"],
                     *[["get", "summary", "p.py"]] * 4):
            subprocess.run([*BARCA, *argv], cwd=root, env=env(), capture_output=True, check=True)
        server = Server(root, "p.py")
        try:
            port = server.port
            run_ids = [r["id"] for r in _get_json(port, "/runs")["runs"]]
            jobs = [("GET " + path, "GET", path.replace("{id}", run_ids[i % len(run_ids)]),
                     {}, b"", 200) for i, path in enumerate(LOAD_GETS * (gets // len(LOAD_GETS)))]
            for kind, (count, headers, body, want) in LOAD_POSTS.items():
                jobs += [(kind, "POST", "/runs", headers, body, want)] * count
            random.Random(seed).shuffle(jobs)
            for _, method, path, headers, body, _ in jobs[:40]:  # warm: the pool, /state
                _request(_connection(port), method, path, headers, body)
            _drain(port)
            load = os.getloadavg()
            recorded = _count_runs(port)
            before = rss_mb(server.proc.pid)
            answers, wall = _hammer(port, jobs, clients)
            _drain(port)
            after = rss_mb(server.proc.pid)
            again, wall_again = _hammer(port, jobs, clients)  # does memory keep growing?
            _drain(port)
            rows = _load_rows(jobs, answers)
            rows.append(f"| all {len(jobs):,} requests, {clients} clients | {wall:.1f} s wall, "
                        f"{len(jobs) / wall:.0f} requests/s | server RSS {before:.1f} MB "
                        f"before, {after:.1f} MB after (runs drained) | |")
            wanted = {job[0]: job[5] for job in jobs}
            unexpected = sum(1 for kind, status, _ in again if status not in (wanted[kind], 503))
            rows.append(f"| the same {len(jobs):,} again | {wall_again:.1f} s wall, "
                        f"{sum(1 for a in again if a[1] == 503)} x 503, {unexpected} other "
                        f"than expected | server RSS {rss_mb(server.proc.pid):.1f} MB after | |")
            for how in ("Content-Length", "chunked"):
                status, grown, sent = _big_body(port, server.proc.pid, chunked=how == "chunked")
                rows.append(f"| POST /runs, one 64 MB body ({how}) | {status} after the client "
                            f"sent {sent / 2**20:.1f} MB | server RSS peak +{grown:.1f} MB | "
                            f"413, under +50 MB |")
            health = _get_json(port, "/health")["status"]
            notes = [f"/health after all of it: {health}",
                     f"runs recorded during the load: {_count_runs(port) - recorded}",
                     "load average (1/5/15 min) {:.2f} {:.2f} {:.2f} before, ".format(*load)
                     + "{:.2f} {:.2f} {:.2f} after".format(*os.getloadavg())]
        finally:
            server.stop()
        return rows, notes
    finally:
        _stop_pool(root)
        shutil.rmtree(root, ignore_errors=True)


def _connection(port: int):
    import http.client

    return http.client.HTTPConnection("127.0.0.1", port, timeout=120)


def _request(conn, method: str, path: str, headers: dict, body: bytes) -> tuple[int, bytes]:
    conn.request(method, path, body=body or None, headers=headers)
    response = conn.getresponse()
    return response.status, response.read()


def _get_json(port: int, path: str):
    import json

    status, body = _request(_connection(port), "GET", path, {}, b"")
    assert status == 200, (path, status, body[:500])
    return json.loads(body)


def _count_runs(port: int) -> int:
    return _get_json(port, "/runs?limit=1")["total"]


def _drain(port: int, timeout: float = 300) -> None:
    """Wait until the server has no run pending or running."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        live = [r for r in _get_json(port, "/runs?limit=1000")["runs"]
                if r["status"] in ("pending", "running")]
        if not live:
            return
        time.sleep(0.2)
    raise SystemExit(f"runs still live {timeout} s after the load")


def _hammer(port: int, jobs: list[tuple], clients: int) -> tuple[list[tuple], float]:
    """Send every job from `clients` threads, each on its own kept-alive connection (the
    client reconnects after a refusal closes it); (kind, status, seconds) per job."""
    import queue

    todo: queue.Queue = queue.Queue()
    for job in jobs:
        todo.put(job)
    answers: list[tuple] = []

    def client() -> None:
        conn = _connection(port)
        while True:
            try:
                kind, method, path, headers, body, _ = todo.get_nowait()
            except queue.Empty:
                return
            t0 = time.perf_counter()
            try:
                status, _ = _request(conn, method, path, headers, body)
            except OSError as exc:
                status = type(exc).__name__
                conn = _connection(port)
            answers.append((kind, status, time.perf_counter() - t0))

    threads = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers, time.perf_counter() - t0


def _load_rows(jobs: list[tuple], answers: list[tuple]) -> list[str]:
    wanted = {job[0]: job[5] for job in jobs}
    rows = []
    for kind in dict.fromkeys(k for k, *_ in sorted(jobs)):
        got = [a for a in answers if a[0] == kind]
        ok = [s for _, status, s in got if status == wanted[kind]]
        busy = sum(1 for _, status, _ in got if status == 503)
        other = sorted({str(status) for _, status, _ in got} - {str(wanted[kind]), "503"})
        timing = (f"p50 {percentile(ok, 0.5) * 1000:.0f} ms, p99 "
                  f"{percentile(ok, 0.99) * 1000:.0f} ms, max {max(ok) * 1000:.0f} ms"
                  if ok else "-")
        rows.append(f"| {kind} | {len(ok)} x {wanted[kind]}" + (f", {busy} x 503" if busy else "")
                    + (f", other: {', '.join(other)}" if other else "") + f" | {timing} | |")
    return rows


def _big_body(port: int, pid: int, chunked: bool) -> tuple[str, float, int]:
    """POST a 64 MB body while sampling the server's RSS: (the status line's code, peak RSS
    over RSS before in MB, bytes the client got to send before the server closed)."""
    import socket

    before = rss_mb(pid)
    sampler = PeakRss(pid, every=0.005)
    framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: %d" % BIG_BODY
    head = (b"POST /runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + framing + b"\r\n\r\n")
    piece = b"[" * (64 * 1024)
    sent = 0
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(head)

        def send_body() -> None:
            nonlocal sent
            try:
                for _ in range(BIG_BODY // len(piece)):
                    sock.sendall(b"10000\r\n" + piece + b"\r\n" if chunked else piece)
                    sent += len(piece)
                if chunked:
                    sock.sendall(b"0\r\n\r\n")
            except OSError:
                pass  # the server answered and closed: the rest is not read

        sender = threading.Thread(target=send_body)
        sender.start()
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
        except OSError:
            pass
        sock.close()
        sender.join(60)
    time.sleep(0.2)  # a last sample after the connection's buffers are released
    peak = sampler.stop()
    status = answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/") else "no answer"
    return status, max(peak, before) - before, sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="10000", help="retailer counts, comma-separated")
    parser.add_argument("--fires", type=int, default=30)
    parser.add_argument("--ticks", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="append to RESULTS.md")
    parser.add_argument("--load", action="store_true", help="the load section only")
    parser.add_argument("--clients", type=int, default=8, help="client threads of --load")
    parser.add_argument("--gets", type=int, default=2000, help="GETs of --load")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(HERE.parent / "src")])
    if args.load:
        rows, notes = measure_load(args.clients, args.gets)
        table = "\n".join([f"machine: {machine()}", "",
                           "| requests | answers | latency (of the expected answers) / memory "
                           "| target |", "|---|---|---|---|", *rows, "", *notes])
        print(table)
        if args.write:
            with open(HERE / "RESULTS.md", "a") as out:
                out.write(f"\n## barca serve under load ({time.strftime('%Y-%m-%d')})\n\n"
                          f"`.venv/bin/python benchmarks/serve.py {' '.join(sys.argv[1:])}`"
                          f"\n\n{table}\n")
        return
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
