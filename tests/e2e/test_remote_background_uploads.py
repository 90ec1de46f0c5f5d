"""A worker uploads its results to a remote store in the background (engine.local.uploads),
its packs of small results and its results stored as files of their own (`big`) alike: it
runs its next steps while a result's PUT is pending, and reports the result's outcome only
once the PUT has succeeded; a PUT that fails is the run's exit 3 with nothing unreadable
recorded; a kill -9 while a PUT is pending records nothing that is not in the store. The
pool leases the worker more steps meanwhile (`Computed`): the worker goes past the end of
its lease while the lease's first result is still held.

Over moto's S3 server on loopback, reached through a small loopback proxy that holds every
PUT of a result object until the test releases it (or answers it 403). Key k01 waits until
a PUT is held, so that the object holding k00's result is the held one; k02 then runs while
it is pending (a worker that uploads before it goes on runs no step past k01: its upload
holds the lock that k01's outcome waits for; one that uploads a file of its own inside its
step runs no step past k00).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import pytest

from conftest import (Moto, barca, descendants, poll, result_bytes, run_statuses,
                      start_barca, write)
from test_remote_reliability import _check_records_are_stored, _group, _recorded

KEYS = 20
EXPECTED = sum(i * 3 for i in range(KEYS))
ONE_WORKER = {"BARCA_POOL_SIZE": "1"}
FIRST_LEASE = KEYS // 4  # one worker's first lease: a quarter of the queue (engine.local.pool)
BIG = 70_000  # characters of padding that make a result a file of its own (store.packs)

PIPELINE = """
    import time
    from pathlib import Path

    from barca import asset, collect, partitions

    HERE = Path(__file__).parent


    # two attempts: a step whose worker is killed in it runs again
    @asset(partitions={{"key": partitions([f"k{{i:02d}}" for i in range({keys})])}}, retries=2)
    def values(key: str) -> dict:
        if key == "k01":  # until the pack holding k00's result is being uploaded
            until = time.monotonic() + 60
            while not (HERE / "held").exists() and time.monotonic() < until:
                time.sleep(0.02)
        with open(HERE / "executed.log", "a") as log:
            log.write(key + "\\n")
        return {{"v": int(key[1:]) * 3, "pad": "x" * {pad}}}


    @asset(inputs={{"all": collect(values)}})
    def total(all: list) -> int:
        return sum(item["v"] for item in all)
"""

DENIED = (b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>AccessDenied</Code>"
          b"<Message>Access Denied</Message></Error>")


class HoldingProxy:
    """Loopback HTTP proxy to moto. Every PUT of a result object (under artifacts/) is held
    (the first creates `held_marker`; a client that gives up and tries again is held too)
    until `release`: then forwarded, or with `deny` answered 403."""

    def __init__(self, moto_port: int, held_marker: Path) -> None:
        self.released, self.denied = threading.Event(), False
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if self.command == "PUT" and "/artifacts/" in self.path:
                    held_marker.touch()
                    proxy.released.wait(300)
                    if proxy.denied:
                        return self._answer(403, [("Content-Type", "application/xml")],
                                            DENIED)
                upstream = http.client.HTTPConnection("127.0.0.1", moto_port, timeout=120)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "expect"}
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
                upstream.close()
                self._answer(answer.status, [
                    (k, v) for k, v in answer.getheaders() if k.lower() not in (
                        "transfer-encoding", "connection", "content-length", "server",
                        "date")], data)

            def _answer(self, status: int, headers: list, data: bytes) -> None:
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    try:
                        self.wfile.write(data)
                    except OSError:
                        pass  # a held request its client gave up on (or a killed one)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def release(self, deny: bool = False) -> None:
        self.denied = deny
        self.released.set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()


def _setup(tmp_path: Path, moto: Moto, pad: int = 0) -> tuple[Path, HoldingProxy, dict, str]:
    root = write(tmp_path / "p", {"p.py": PIPELINE.format(keys=KEYS, pad=pad)})
    bucket = moto.bucket()
    proxy = HoldingProxy(moto.port, root / "held")
    env = {**moto.env, **ONE_WORKER, "AWS_ENDPOINT_URL": proxy.url,
           "BARCA_REMOTE_URI": f"s3://{bucket}/x", "BARCA_REMOTE_RETRY_SECONDS": "1"}
    return root, proxy, env, f"{bucket}/x/default"


def _executed(root: Path) -> list[str]:
    log = root / "executed.log"
    return log.read_text().split() if log.exists() else []


def _later_keys_ran_while_held(root: Path, keys: int = 3) -> None:
    """`keys` keys ran while the PUT of k00's result was pending (k01 waited for it to be),
    and no outcome was recorded: the held result's, and those queued behind it."""
    poll(lambda: len(_executed(root)) >= keys, "later keys to run while k00's result is held",
         timeout=60, every=0.05)
    assert _recorded(root) == []


SMALL_AND_BIG = pytest.mark.parametrize("pad", [0, BIG], ids=["packed", "own-file"])


def _run_while_held(root: Path, proxy: HoldingProxy, env: dict, keys: int = 3,
                    deny: bool = False, meanwhile: Callable[[int], object] = lambda run: None
                    ) -> tuple[int, str, str]:
    """`get total` while the proxy holds the first result PUT: once `keys` keys ran,
    `meanwhile(the run's pid)`, then the PUTs released (refused with `deny`); the run's exit
    code, stdout and stderr once it ended. The proxy is closed after."""
    try:
        proc = start_barca(root, "get", "total", "p.py", env=env)
        try:
            _later_keys_ran_while_held(root, keys=keys)
            meanwhile(proc.pid)
            proxy.release(deny=deny)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    finally:
        proxy.close()
    return proc.returncode, out, err


@SMALL_AND_BIG
def test_a_worker_runs_its_next_steps_while_a_result_uploads_and_reports_it_once_stored(
        tmp_path: Path, moto: Moto, pad: int) -> None:
    root, proxy, env, prefix = _setup(tmp_path, moto, pad)
    code, out, err = _run_while_held(root, proxy, env)
    assert code == 0, (out, err)
    assert _check_records_are_stored(root, moto, prefix) == KEYS + 1
    assert sorted(_executed(root)) == [f"k{i:02d}" for i in range(KEYS)]  # each key once


@SMALL_AND_BIG
def test_a_background_upload_that_fails_is_exit_3_with_nothing_unreadable_recorded(
        tmp_path: Path, moto: Moto, pad: int) -> None:
    root, proxy, env, prefix = _setup(tmp_path, moto, pad)
    code, out, err = _run_while_held(root, proxy, env, deny=True)
    assert code == 3, (out, err)
    error = err.strip().splitlines()[-1]
    assert "failed to upload p.py--values/" in error and "PermissionError" in error, error
    assert _recorded(root) == []  # nothing of the failed pack, nor of those after it
    assert run_statuses(root) == ["failed"]

    # the store takes PUTs again: the next run completes, everything it records stored
    again = barca(root, "get", "total", "p.py", env={**env, "AWS_ENDPOINT_URL": moto.url},
                  timeout=120).expect(0).json
    assert again["final_output"] == EXPECTED
    assert _check_records_are_stored(root, moto, prefix) == KEYS + 1
    for path, _ in _recorded(root):
        result_bytes(root, path)


@SMALL_AND_BIG
def test_a_kill_while_a_result_uploads_records_nothing_that_is_not_stored(
        tmp_path: Path, moto: Moto, pad: int) -> None:
    root, proxy, env, prefix = _setup(tmp_path, moto, pad)
    try:
        proc = start_barca(root, "get", "total", "p.py", env=env, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _later_keys_ran_while_held(root)
        os.killpg(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        poll(lambda: not _group(proc.pid), "the killed run's workers to be gone")
        proxy.release()  # the held PUT reaches the store after its worker is gone
    finally:
        proxy.close()
    assert _recorded(root) == []
    again = barca(root, "get", "total", "p.py", env={**env, "AWS_ENDPOINT_URL": moto.url},
                  timeout=120).expect(0).json
    assert again["final_output"] == EXPECTED
    assert _check_records_are_stored(root, moto, prefix) == KEYS + 1


def _worker(run: int) -> int:
    """The pid of the run's one worker process."""
    for pid in descendants(run) - {run}:
        try:
            if b"barca.engine.local.worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    raise AssertionError("the run has no worker process")


def test_a_worker_takes_its_next_lease_while_its_last_one_uploads(
        tmp_path: Path, moto: Moto) -> None:
    """Keys past the worker's first lease run while the first lease's first pack is held:
    the pool leased more on hearing the lease was computed, not once its outcomes (which wait
    for the pack) arrived. Nothing is recorded meanwhile. The worker is then killed, its
    outcomes never sent: the pool runs those steps again in a new worker, and once the store
    takes the PUTs the run records every key, all of it stored."""
    root, proxy, env, prefix = _setup(tmp_path, moto)
    env["BARCA_WARM_SECONDS"] = "0"  # the worker is the run's own child, found among them
    code, out, err = _run_while_held(root, proxy, env, keys=FIRST_LEASE + 1,
                                     meanwhile=lambda run: os.kill(_worker(run), signal.SIGKILL))
    assert code == 0, (out, err)
    assert json.loads(out)["final_output"] == EXPECTED
    assert _check_records_are_stored(root, moto, prefix) == KEYS + 1
    assert sorted(set(_executed(root))) == [f"k{i:02d}" for i in range(KEYS)]
    assert _executed(root).count("k00") == 2  # done, its outcome held with its pack: again
