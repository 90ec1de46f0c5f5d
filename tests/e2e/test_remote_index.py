"""The shared store's index read as a tick needs it, over moto's S3 server on loopback: a
machine reads an index object once (what it wrote, never), a compacted object spares a fresh
machine the many small ones and is read right (later entries win), `barca gc --remote`
collects what a compacted object covers, and a kill during compaction leaves the index
readable. Requests are counted from moto's own log of what it served.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import secrets
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

from conftest import Moto, barca, json_objects, poll, require_moto, start_barca, write

require_moto()

from test_remote_store import _machine, _warehouse

PLAIN = """
from barca import asset

@asset
def numbers() -> list:
    return list(range(10))

@asset(inputs={"numbers": numbers})
def total(numbers: list) -> int:
    return sum(numbers)
"""
EDITED = PLAIN.replace("return sum(numbers)", "return sum(numbers) * 1")  # a new run hash
EDITED_AGAIN = PLAIN.replace("return sum(numbers)", "return sum(numbers) * 1 + 0")
FILLERS = 70  # index objects other machines left: more than a writer lets stand uncompacted
COMPACTED = re.compile(r"~[0-9a-f]{8}\.c\d+\.json$")


def _reads(moto: Moto, node: str = "") -> dict[str, bool]:
    """Index objects (of `node`'s directory) GET since the last call -> whether by a range
    request; moto's log, as Moto.taken reads it, with each request's headers."""
    text = moto.recording.read_text() if moto.recording.exists() else ""
    moto.recording.write_text("")
    out = {}
    for request in json_objects(text):  # two requests recorded at once may share a line
        path = unquote(urlparse(request["url"]).path)
        if request["method"] == "GET" and f"/index/{node}" in path:
            headers = {k.lower() for k in request["headers"]}
            out[path.rpartition("/")[2]] = "range" in headers
    return out


def _index(moto: Moto, bucket: str, node: str) -> list[str]:
    moto.fs.invalidate_cache()
    return sorted(p.rpartition("/")[2] for p in moto.fs.ls(
        f"{bucket}/team/default/index/{node}", detail=False))


def _put_index(moto: Moto, bucket: str, name: str, entries: list[list]) -> str:
    """An index object as another machine writes one."""
    moto.fs.pipe_file(f"{bucket}/team/default/index/pipeline.py--total/{name}",
                      "\n".join(json.dumps(e) for e in entries).encode())
    return name


def _put_result(moto: Moto, bucket: str, pack: str, data: bytes) -> str:
    """A pack of one result as another machine writes one; the result's store key."""
    sha = hashlib.sha256(data).hexdigest()
    moto.fs.pipe_file(f"{bucket}/team/default/artifacts/pipeline.py--total/{pack},{sha}", data)
    return f"pipeline.py--total/{pack}@0:{len(data)}"


def _now_name() -> str:
    return f"{time.time_ns():020d}-{secrets.token_hex(4)}.json"


def _fill(moto: Moto, bucket: str) -> set[str]:
    return {_put_index(moto, bucket, _now_name(), [[f"r{i}", f"{i:032x}", "json", "0" * 32,
                                                    f"pipeline.py--total/gone{i}.json"]])
            for i in range(FILLERS)}


def test_a_tick_reads_no_index_object_it_has_read_before(tmp_path: Path, moto: Moto) -> None:
    bucket = moto.bucket()
    env = {**moto.env, "BARCA_REMOTE_URI": f"s3://{bucket}/team"}
    a, b = _machine(tmp_path / "a"), _machine(tmp_path / "b")
    assert barca(a, "get", "scored", "pipeline.py", env=env).expect(0).json[
        "steps_executed"] > 2
    _reads(moto)
    # a second machine's first look reads the index, once
    assert barca(b, "get", "scored", "pipeline.py", env=env).expect(0).json[
        "steps_executed"] == 1  # its sensor
    first_look = set(_reads(moto))
    assert first_look

    for root in (a, b):
        _warehouse(root, "touch", "r000010")
    tick = barca(a, "get", "scored", "pipeline.py", env=env).expect(0).json
    assert tick["steps_executed"] == 3
    assert _reads(moto) == {}  # it wrote all of the index there is: it reads none of it
    written = set(_index(moto, bucket, "pipeline.py--cleaned")) | set(
        _index(moto, bucket, "pipeline.py--scored"))
    moto.taken()
    # the other machine reads only what the tick wrote, and still runs nothing
    again = barca(b, "get", "scored", "pipeline.py", env=env).expect(0).json
    assert again["steps_executed"] == 1
    assert again["final_output"]["retailer=r000010"] == tick["final_output"]["retailer=r000010"]
    read = set(_reads(moto))
    assert read and not read & first_look and read <= written, (read, first_look)


def _compacting_store(tmp_path: Path, moto: Moto) -> tuple[str, dict, Path, Path, set[str]]:
    """A store whose `total` index was compacted by machine a; machine m read the index
    before. (bucket, env, a, m, the fillers' names)"""
    bucket = moto.bucket()
    env = {**moto.env, "BARCA_REMOTE_URI": f"s3://{bucket}/team"}
    a = write(tmp_path / "a", {"pipeline.py": PLAIN, "barca.toml": ""})
    m = write(tmp_path / "m", {"pipeline.py": PLAIN, "barca.toml": ""})
    assert barca(a, "get", "total", "pipeline.py", env=env).expect(0).json["final_output"] == 45
    fillers = _fill(moto, bucket)
    assert barca(m, "get", "total", "pipeline.py", env=env).expect(0).json[
        "steps_executed"] == 0
    assert len(_reads(moto, "pipeline.py--total")) == FILLERS + 1  # a fresh look reads all
    (a / "pipeline.py").write_text(EDITED)
    (m / "pipeline.py").write_text(EDITED)
    return bucket, env, a, m, fillers


def test_a_compacted_index_is_read_once_and_later_entries_win(tmp_path: Path,
                                                              moto: Moto) -> None:
    bucket, env, a, m, fillers = _compacting_store(tmp_path, moto)
    # a's run reads the fillers, writes its batch, then compacts the node's index
    assert barca(a, "get", "total", "pipeline.py", env=env).expect(0).json[
        "steps_executed"] == 1
    names = _index(moto, bucket, "pipeline.py--total")
    [compacted] = [n for n in names if COMPACTED.search(n)]
    mine = [n for n in names if n != compacted and n not in fillers]
    assert len(mine) == 2  # a's two batches
    head = moto.fs.cat_file(f"{bucket}/team/default/index/pipeline.py--total/{compacted}"
                            ).split(b"\n", 1)[0]
    assert json.loads(head)["covers"] == sorted(fillers | set(mine))
    _reads(moto)

    # m, which read what it covers but a's new batch: that batch, and the compacted object's
    # first line only
    got = barca(m, "get", "total", "pipeline.py", env=env).expect(0).json
    assert (got["steps_executed"], got["final_output"]) == (0, 45)
    assert _reads(moto, "pipeline.py--total") == {max(mine): False, compacted: True}

    # entries in compacted and uncompacted objects: a later object wins over the compacted
    # one, the compacted one over an older object it does not cover
    [edited_hash] = [e[1] for e in map(json.loads, moto.fs.cat_file(
        f"{bucket}/team/default/index/pipeline.py--total/{max(mine)}").splitlines())]
    [plain_hash] = [e[1] for e in map(json.loads, moto.fs.cat_file(
        f"{bucket}/team/default/index/pipeline.py--total/{min(mine)}").splitlines())]
    late = _put_index(moto, bucket, "00000000000000000001-00000000.json", [
        ["", plain_hash, "json", "f" * 32, _put_result(moto, bucket, "old.pack", b"77")]])
    newer = _put_index(moto, bucket, _now_name(), [
        ["", edited_hash, "json", "e" * 32, _put_result(moto, bucket, "new.pack", b"99")]])
    _reads(moto)
    b = write(tmp_path / "b", {"pipeline.py": EDITED, "barca.toml": ""})
    got = barca(b, "get", "total", "pipeline.py", env=env).expect(0).json
    assert (got["steps_executed"], got["final_output"]) == (0, 99)
    # a fresh machine reads the compacted object whole and what it does not cover, no more
    assert _reads(moto, "pipeline.py--total") == {compacted: False, late: False, newer: False}
    c = write(tmp_path / "c", {"pipeline.py": PLAIN, "barca.toml": ""})
    got = barca(c, "get", "total", "pipeline.py", env=env).expect(0).json
    assert (got["steps_executed"], got["final_output"]) == (0, 45)


def test_gc_remote_collects_what_a_compacted_index_object_covers(tmp_path: Path,
                                                                 moto: Moto) -> None:
    bucket, env, a, m, fillers = _compacting_store(tmp_path, moto)
    barca(a, "get", "total", "pipeline.py", env=env).expect(0)
    names = _index(moto, bucket, "pipeline.py--total")
    [compacted] = [n for n in names if COMPACTED.search(n)]
    mine = {n for n in names if n != compacted and n not in fillers}
    assert barca(m, "get", "total", "pipeline.py", env=env).expect(0).json[
        "steps_executed"] == 0

    listed = barca(a, "gc", "--remote", "--dry-run", "--grace", "0", env=env).expect(0).json
    folder = "index/pipeline.py--total/"
    reasons = {g["path"]: g["reason"] for g in listed["garbage"]}
    # fillers name no result: dangling; a's batches are in the compacted object
    assert reasons == {**{folder + n: "dangling_index" for n in fillers},
                       **{folder + n: "compacted" for n in mine}}
    done = barca(a, "gc", "--remote", env=env).expect(0).json
    assert done["deleted_objects"] == FILLERS + 2
    assert _index(moto, bucket, "pipeline.py--total") == [compacted]

    # a fresh machine reads the compacted object; m, which read all, reads only what is new
    b = write(tmp_path / "b", {"pipeline.py": EDITED, "barca.toml": ""})
    _reads(moto)
    got = barca(b, "get", "total", "pipeline.py", env=env).expect(0).json
    assert (got["steps_executed"], got["final_output"]) == (0, 45)
    assert _reads(moto, "pipeline.py--total") == {compacted: False}
    for root in (a, m):
        (root / "pipeline.py").write_text(EDITED_AGAIN)
    assert barca(a, "get", "total", "pipeline.py", env=env).expect(0).json[
        "steps_executed"] == 1
    [new] = set(_index(moto, bucket, "pipeline.py--total")) - {compacted}
    _reads(moto)
    got = barca(m, "get", "total", "pipeline.py", env=env).expect(0).json
    assert (got["steps_executed"], got["final_output"]) == (0, 45)
    assert _reads(moto, "pipeline.py--total") == {new: False}
    # nothing left to collect but what the deleted ones named
    again = barca(a, "gc", "--remote", "--dry-run", "--grace", "0", env=env).expect(0).json
    assert {g["reason"] for g in again["garbage"]} <= {"unreferenced"}


class _Gate:
    """A loopback proxy to moto that holds the PUT of a compacted index object (and never
    forwards it), to kill the writer while it waits."""

    def __init__(self, port: int) -> None:
        self.held, self.release = threading.Event(), threading.Event()
        gate = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.command == "PUT" and COMPACTED.search(unquote(self.path)):
                    gate.held.set()
                    gate.release.wait(60)
                    self.close_connection = True
                    return
                upstream = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                upstream.request(self.command, self.path, body=body, headers={
                    k: v for k, v in self.headers.items() if k.lower() != "expect"})
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

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def test_a_kill_during_compaction_leaves_the_index_readable(tmp_path: Path,
                                                            moto: Moto) -> None:
    bucket, env, a, m, fillers = _compacting_store(tmp_path, moto)
    gate = _Gate(moto.port)
    try:
        proc = start_barca(a, "get", "total", "pipeline.py", env={
            **env, "AWS_ENDPOINT_URL": gate.url}, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        poll(gate.held.is_set, "the compacted index object's upload", timeout=120)
        os.killpg(proc.pid, signal.SIGKILL)  # the command and its workers
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        gate.close()
    names = _index(moto, bucket, "pipeline.py--total")
    assert not [n for n in names if COMPACTED.search(n)]
    assert len(set(names) - fillers) == 2  # a's batch was indexed before the compaction

    # the index reads as before: a finds its own batch, another machine finds it too
    got = barca(a, "get", "total", "pipeline.py", env=env).expect(0).json
    assert (got["steps_executed"], got["final_output"]) == (0, 45)
    b = write(tmp_path / "b", {"pipeline.py": EDITED, "barca.toml": ""})
    got = barca(b, "get", "total", "pipeline.py", env=env).expect(0).json
    assert (got["steps_executed"], got["final_output"]) == (0, 45)
    got = barca(m, "get", "total", "pipeline.py", env=env).expect(0).json
    assert (got["steps_executed"], got["final_output"]) == (0, 45)
