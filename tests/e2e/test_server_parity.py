"""`--server URL`: the same command, run against a `barca serve` of an identical project,
prints the same stdout JSON and `[barca]` lines and exits with the same code as run locally
(modulo run ids, timings and the project's path)."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest

from conftest import ServeProcess, barca, start_barca, write

PIPELINE = """
    import time
    from barca import asset, partitions, task

    @asset()
    def raw() -> dict:
        print("raw ran")
        return {"a": 1}

    @asset(partitions={"k": partitions(["x", "y"])}, inputs={"raw": raw})
    def part(k: str, raw: dict) -> int:
        return len(k) + raw["a"]

    @asset(inputs={"raw": raw})
    def broken(raw: dict) -> int:
        raise ValueError("boom")

    @asset()
    def slow() -> int:
        time.sleep(60)
        return 1

    @asset(partitions={"k": partitions([str(i) for i in range(1000)])}, batch="all")
    def wide(k: list[str]) -> dict:
        return {key: "v" * 400 for key in k}

    @task(inputs={"raw": raw})
    def publish(raw: dict) -> None:
        print("published")
"""

VOLATILE = {"elapsed_seconds", "metadata_seconds", "started_at", "finished_at", "created_at",
            "max_rss_bytes", "avg_elapsed_seconds", "median_elapsed_seconds",
            "p95_elapsed_seconds", "max_elapsed_seconds", "ts", "elapsed", "traceback",
            "peak_rss_bytes", "rss_bytes", "median_max_rss_bytes", "p95_max_rss_bytes",
            "import_seconds", "load_seconds", "compute_seconds", "split_seconds", "write_seconds",
            "cpu_seconds",
            "triggered_by"}  # by design: a run started through the server is the server's (api)
# a small result's place in a pack: the pack's name is random, its grouping depends on timing
PACKED = re.compile(r"[0-9a-f]{16}\.pack@\d+:\d+")
RUN_ID = re.compile(r"\b[0-9a-f]{12}\b")
SECONDS = re.compile(r"\d+(\.\d+)?s\b")
DONE = re.compile(r"\(\d+/(\d+)\)")  # (done/total): parallel steps finish in any order


def normal(value, root: Path):
    if isinstance(value, dict):
        return {k: None if k in VOLATILE else normal(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [normal(v, root) for v in value]
    if isinstance(value, str):
        return PACKED.sub("<packed>", RUN_ID.sub("<id>", value.replace(str(root), "<root>")))
    return value


def normal_lines(text: str, root: Path) -> list[str]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):  # the JSON error envelope
            out.append(json.dumps(normal(json.loads(line), root), sort_keys=True))
        elif line.startswith("[") and not line.startswith("[barca] server "):
            line = RUN_ID.sub("<id>", line.replace(str(root), "<root>"))
            out.append(DONE.sub(r"(n/\1)", SECONDS.sub("Ns", line)))
    return out


@pytest.fixture
def pair(tmp_path: Path):
    local, served = tmp_path / "local", tmp_path / "served"
    for root in (local, served):
        write(root, {"barca.toml": "", "p.py": PIPELINE})
    server = ServeProcess(served, ("p.py", "--no-schedule"))
    yield local, served, server
    server.stop()  # SIGTERM: exit 0 within 10 s


def both(pair, *args, code: int):
    local, served, server = pair
    here = barca(local, *args)
    there = barca(local, *args, "--server", server.url)
    assert (here.code, there.code) == (code, code), (here, there)
    here_out = normal(json.loads(here.stdout), local) if here.stdout.strip() else None
    there_out = normal(json.loads(there.stdout), served) if there.stdout.strip() else None
    assert here_out == there_out
    # the same lines; steps that run in parallel may finish in another order
    assert sorted(normal_lines(here.stderr, local)) == sorted(normal_lines(there.stderr, served))
    return here, there


def test_get_run_and_inspection_print_the_same_through_a_server(pair):
    both(pair, "get", "raw", "p.py", code=0)  # cold
    both(pair, "get", "raw", "p.py", code=0)  # warm
    both(pair, "get", "part", "p.py", "--dry-run", code=0)
    both(pair, "get", "part", "p.py", "--agent", code=0)
    failed, _ = both(pair, "get", "broken", "p.py", code=1)
    assert "boom" in failed.stderr
    unknown, _ = both(pair, "get", "nope", "p.py", code=2)
    assert "nope" in unknown.envelope["error"]
    both(pair, "get", "part", "p.py", "--batch", "bogus", code=2)
    both(pair, "run", "publish", "p.py", code=0)
    both(pair, "status", "p.py", code=0)
    both(pair, "list", "p.py", code=0)
    both(pair, "history", code=0)
    both(pair, "stats", "raw", "p.py", code=0)
    local, served, server = pair
    here = barca(local, "history", "--limit", "1").json["runs"][0]["run_id"]
    there = barca(served, "history", "--limit", "1").json["runs"][0]["run_id"]
    a = barca(local, "history", here)
    b = barca(local, "history", there, "--server", server.url)
    assert (a.code, normal(a.json, local)) == (b.code, normal(b.json, served))
    a = barca(local, "logs", here)
    b = barca(local, "logs", there, "--server", server.url)
    assert (a.code, a.stdout) == (b.code, b.stdout) == (0, "[p.py:publish] published\n")


def test_an_output_too_large_for_an_event_is_printed_whole(pair):
    here, there = both(pair, "get", "wide", "p.py", code=0)
    assert len(there.stdout) > 256 * 1024  # over what the last event carries
    assert len(json.loads(there.stdout)["final_output"]) == 1000


def test_an_unreachable_server_is_exit_3_naming_it_and_the_way_out(tmp_path):
    write(tmp_path, {"barca.toml": "", "p.py": PIPELINE})
    out = barca(tmp_path, "get", "raw", "p.py", "--server", "http://127.0.0.1:9").expect(3)
    assert "http://127.0.0.1:9" in out.envelope["error"]
    assert "--local" in out.envelope["remediation"]
    env = {"BARCA_SERVER": "http://127.0.0.1:9"}
    barca(tmp_path, "get", "raw", "p.py", "--local", env=env).expect(0)  # --local wins
    assert barca(tmp_path, "sql", "select 1", "--server", "http://127.0.0.1:9").code == 2


def test_ctrl_c_on_a_remote_get_cancels_the_run_on_the_server(pair):
    local, served, server = pair
    proc = start_barca(local, "get", "slow", "p.py", "--server", server.url)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not _running(served):
        time.sleep(0.1)
    assert _running(served), "the remote run never started"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    runs = barca(served, "history").json["runs"]
    assert runs[0]["target"].endswith("slow") and runs[0]["status"] == "cancelled"


def _running(root: Path) -> bool:
    out = barca(root, "history")
    return out.code == 0 and any(r["status"] == "running" for r in out.json["runs"])
