"""The seed's keyed pipeline against a remote store (moto's S3 server on loopback) and
against the local store alone: what sharing a cache costs in time, requests and bytes.

For N retailers (`--keys`, default 10,000) it copies examples/keyed_partitions/ (the pipeline
unchanged, a warehouse of N retailers) and times, as whole `barca get scored pipeline.py
--pretty` processes:

    first run        cold: every key of both assets (2N + 1 results)
    one-key tick     one retailer's orders changed: the sensor and that key of each asset
    no-change tick   nothing changed: the sensor alone, observing what it observed last
    second machine   a fresh copy of the project on the same store (remote only): the
                     sensor runs, every asset key is found in the store's index

Requests are counted by a small HTTP proxy on loopback between barca and moto (s3fs is
pointed at the proxy): every request's method and kind (PUT, GET of an object, LIST, HEAD,
POST), the bytes of its body (up) and of the answer's body (down). The objects the store holds
after the first run are counted by one listing made by the benchmark itself (not counted).
Small results travel packed (`barca docs remote`), so the first run's PUTs are far fewer
than its results.

Fresh workers (BARCA_WARM_SECONDS=0) on both sides, so that no warm pool outlives the
script. Needs `moto[server]` and s3fs (the dev extra).

    .venv/bin/python benchmarks/remote.py                 # N = 10,000
    .venv/bin/python benchmarks/remote.py --keys 2000
"""

from __future__ import annotations

import argparse
import collections
import http.client
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "keyed_partitions"
MOTO = Path(sys.executable).with_name("moto_server")
CHILD_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("BARCA_", "AWS_"))}
CHILD_ENV.update(BARCA_WARM_SECONDS="0", PYTHONPATH=str(ROOT / "src"))


class Tally:
    """Requests the proxy forwarded since `take`: count, bytes up and down per kind."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: collections.Counter = collections.Counter()
        self.up = self.down = 0

    def add(self, kind: str, up: int, down: int) -> None:
        with self.lock:
            self.counts[kind] += 1
            self.up += up
            self.down += down

    def take(self) -> tuple[collections.Counter, int, int]:
        with self.lock:
            out = (self.counts, self.up, self.down)
            self.counts, self.up, self.down = collections.Counter(), 0, 0
        return out


def proxy(target_port: int, tally: Tally) -> ThreadingHTTPServer:
    """A loopback HTTP/1.1 proxy to moto that counts what passes through it."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            upstream = http.client.HTTPConnection("127.0.0.1", target_port, timeout=120)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "expect"}
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
            upstream.close()
            self.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in ("transfer-encoding", "connection", "content-length",
                                       "server", "date"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            tally.add(_kind(self.command, self.path), len(body),
                      0 if self.command == "HEAD" else len(data))

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _kind(method: str, path: str) -> str:
    if method == "GET" and ("list-type=" in path or path.rstrip("/").count("/") <= 1):
        return "LIST"
    return method


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_moto(directory: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([str(MOTO), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=directory)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("moto_server did not answer within 30 s")


def project(directory: Path, keys: int) -> Path:
    directory.mkdir(parents=True)
    shutil.copy(EXAMPLE / "pipeline.py", directory / "pipeline.py")
    (directory / "barca.toml").write_text("")
    warehouse(directory, "build", str(keys))
    return directory


def warehouse(directory: Path, *args: str) -> None:
    subprocess.run([sys.executable, str(EXAMPLE / "warehouse.py"), *args], cwd=directory,
                   check=True, stdout=subprocess.DEVNULL, env=CHILD_ENV)


def get(directory: Path, env: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "barca.cli.main", "get", "scored", "pipeline.py",
                    "--pretty"], cwd=directory, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - began


def size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor()) \
        if Path("/proc/cpuinfo").exists() else platform.processor()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} CPUs, {model}, Python {platform.python_version()}, load {load}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=10_000, help="retailers (default 10000)")
    args = parser.parse_args()
    if not MOTO.exists():
        raise SystemExit("moto_server is not installed: pip install 'moto[server]' s3fs")
    import s3fs

    keys = args.keys
    print(f"{keys:,} keys; {machine()}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="barca-remote-bench-"))
    moto_proc, moto_port = start_moto(work)
    tally = Tally()
    server = proxy(moto_port, tally)
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    credentials = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                   "AWS_DEFAULT_REGION": "us-east-1"}
    fs = s3fs.S3FileSystem(key="bench", secret="bench",
                           endpoint_url=f"http://127.0.0.1:{moto_port}")
    fs.mkdir("bench")
    remote = dict(CHILD_ENV, **credentials, AWS_ENDPOINT_URL=endpoint,
                  BARCA_REMOTE_URI="s3://bench/team")
    rows = []
    try:
        local = project(work / "local", keys)
        first = get(local, CHILD_ENV)
        warehouse(local, "touch", "r000010")
        tick = get(local, CHILD_ENV)
        same = get(local, CHILD_ENV)
        rows += [("local", "first run", first, None), ("local", "one-key tick", tick, None),
                 ("local", "no-change tick", same, None)]

        a = project(work / "a", keys)
        tally.take()
        first = get(a, remote)
        rows.append(("remote", "first run", first, tally.take()))
        objects = fs.find("bench/team/default/artifacts")
        index = fs.find("bench/team/default/index")
        warehouse(a, "touch", "r000010")
        tick = get(a, remote)
        rows.append(("remote", "one-key tick", tick, tally.take()))
        same = get(a, remote)
        rows.append(("remote", "no-change tick", same, tally.take()))
        b = project(work / "b", keys)
        warehouse(b, "touch", "r000010")  # the same inputs as machine a
        tally.take()
        second = get(b, remote)
        rows.append(("remote", "second machine, same inputs", second, tally.take()))
    finally:
        server.shutdown()
        moto_proc.terminate()
        moto_proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)

    print()
    print("| store | run | wall | PUT | GET | LIST | other | up | down |")
    print("|---|---|---|---|---|---|---|---|---|")
    for store, what, wall, counted in rows:
        if counted is None:
            print(f"| {store} | {what} | {wall:.2f} s | - | - | - | - | - | - |")
            continue
        counts, up, down = counted
        other = sum(n for k, n in counts.items() if k not in ("PUT", "GET", "LIST"))
        print(f"| {store} | {what} | {wall:.2f} s | {counts['PUT']:,} | {counts['GET']:,} | "
              f"{counts['LIST']:,} | {other:,} | {size(up)} | {size(down)} |")
    print()
    print(f"after the first run the store holds {len(objects):,} result objects and "
          f"{len(index):,} index objects for {2 * keys + 1:,} results "
          f"({(2 * keys + 1) / max(len(objects), 1):.0f} results an object)")


if __name__ == "__main__":
    main()
