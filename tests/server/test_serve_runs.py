"""Runs over HTTP: progress as server-sent events (resumable by Last-Event-ID), cancelling a
run in flight, and SIGTERM to the server while a run is in flight."""

from __future__ import annotations

import concurrent.futures
import json
import time
from pathlib import Path

import pytest

from conftest import db_rows, gone, poll, pool_processes, read_runs, write

PIPELINE = """
    import os
    import time
    from pathlib import Path
    from barca import asset

    @asset()
    def talk() -> str:
        print("talk says hello")
        # wait for the test to say go (it has seen the line above as an event meanwhile)
        deadline = time.monotonic() + 30
        while not Path("go").exists():
            if time.monotonic() > deadline:
                raise RuntimeError("no go: the events did not reach the client while running")
            time.sleep(0.02)
        print("talk says bye")
        return "talked"

    @asset()
    def quick() -> int:
        return 1

    @asset()
    def slow() -> str:
        Path("slow.pid.tmp").write_text(str(os.getpid()))
        os.replace("slow.pid.tmp", "slow.pid")
        time.sleep(60)
        return "slept"
"""


@pytest.fixture
def project_with_pipeline(project: Path) -> Path:
    return write(project, {"p.py": PIPELINE})


def _start_slow(server, root: Path, warm: str) -> tuple[str, int]:
    """Start `slow` (with the warm pool on, once the pool runs, so that the run is forked
    from it); its run id and the pid of its step, once the step runs."""
    pool = []
    if warm != "0":
        server.wait_ended(server.start_run({"targets": ["quick"]}))
        pool = poll(lambda: pool_processes(root), "the project's warm pool")
    run_id = server.start_run({"targets": ["slow"]})
    pid = int(poll(lambda: (root / "slow.pid").exists() and (root / "slow.pid").read_text(),
                   "the slow step to start"))
    if pool:
        assert set(pool) & set(_ancestors(pid)), (pool, _ancestors(pid))  # forked from it
    return run_id, pid


def _ancestors(pid: int) -> list[int]:
    out = []
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
        out.append(pid)
    return out


def _events(response, on_event=None) -> list[tuple[int, dict]]:
    """Parse an SSE stream into (id, data) until it ends; `on_event(item)` as each comes."""
    events, event_id, data = [], None, []
    for line in response.iter_lines():
        if line.startswith(":"):
            continue  # a comment (keep-alive)
        if line.startswith("id:"):
            event_id = int(line[3:].strip())
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "":
            if data:
                item = (event_id, json.loads("\n".join(data)))
                events.append(item)
                if on_event is not None:
                    on_event(item)
            event_id, data = None, []
    return events


def test_progress_streams_as_server_sent_events_and_resumes_after_last_event_id(
        project_with_pipeline: Path, serve) -> None:
    root = project_with_pipeline
    server = serve(root, "p.py")
    run_id = server.start_run({"targets": ["talk"]})

    said_go = []

    def on_event(item):  # the step's first line arrived while it runs: let it finish
        if item[1].get("type") == "log" and "talk says hello" in json.dumps(item[1]):
            (root / "go").write_text("")
            said_go.append(item[0])

    with server.client.stream("GET", f"/runs/{run_id}/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-accel-buffering"] == "no"
        events = _events(response, on_event=on_event)

    assert said_go, f"no event carried the step's printed line: {events}"
    ids = [i for i, _ in events]
    assert all(isinstance(i, int) for i in ids)
    assert ids == sorted(set(ids)) and ids[0] >= 1, ids
    types = [e["type"] for _, e in events]
    assert types[-1] == "run_finished", types
    finished = events[-1][1]
    assert finished["run_id"] == run_id and finished["status"] == "complete"
    outcome = finished["outcome"]  # what `barca get --json` printed
    assert outcome["status"] == "success" and outcome["run_id"] == run_id
    assert outcome["final_output"] == "talked"
    assert [s["id"] for s in outcome["steps"]] == ["p.py:talk"]
    assert any("talk says bye" in json.dumps(e) for _, e in events)
    submitted = [e for _, e in events if e["type"] == "steps_submitted"]
    assert [(e["node_id"], e["keys"], e["calls"]) for e in submitted] == [("p.py:talk", 1, None)]
    assert types.index("steps_submitted") < types.index("step_finished"), types

    # a client that reconnects gets only what followed the last event it saw
    k = ids[len(ids) // 2]
    with server.client.stream("GET", f"/runs/{run_id}/events",
                              headers={"Last-Event-ID": str(k)}) as response:
        assert response.status_code == 200
        resumed = _events(response)
    assert resumed == [item for item in events if item[0] > k]
    assert resumed and resumed[-1][1]["type"] == "run_finished"

    # after the end, reconnecting with the last id: 204, the stream is over
    last = server.get(f"/runs/{run_id}/events", headers={"Last-Event-ID": str(ids[-1])})
    assert last.status_code == 204, last.text
    assert server.get("/runs/nope/events").status_code == 404


def test_a_batched_node_says_how_many_keys_and_calls_went_to_the_workers(
        project: Path, serve) -> None:
    write(project, {"b.py": """
        from barca import asset, partitions

        @asset(partitions={"k": partitions(["a", "b", "c", "d", "e"])}, batch=2)
        def doubled(k: list[str]) -> dict:
            return {key: key * 2 for key in k}
    """})
    server = serve(project, "b.py")
    run_id = server.start_run({"targets": ["doubled"]})
    with server.client.stream("GET", f"/runs/{run_id}/events") as response:
        events = [e for _, e in _events(response)]
    types = [e["type"] for e in events]
    submitted = [e for e in events if e["type"] == "steps_submitted"]
    assert [(e["node_id"], e["keys"], e["calls"]) for e in submitted] == [("b.py:doubled", 5, 3)]
    assert types.index("steps_submitted") < types.index("step_finished"), types
    assert events[-1]["status"] == "complete", events[-1]


@pytest.mark.parametrize("warm", ["0", "30"], ids=["fresh", "warm-pool"])
def test_delete_cancels_a_run_in_flight_and_its_step_process_ends(
        project_with_pipeline: Path, serve, warm: str) -> None:
    root = project_with_pipeline
    server = serve(root, "p.py", warm=warm)
    run_id, pid = _start_slow(server, root, warm)
    assert not gone(pid)
    assert server.get(f"/runs/{run_id}").json()["run"]["status"] == "running"

    cancelled = server.delete(f"/runs/{run_id}")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json() == {"run_id": run_id, "status": "cancelling"}

    detail = server.wait_ended(run_id)
    assert detail["run"]["status"] == "cancelled", detail["run"]
    assert dict(read_runs(root, "run_id, status"))[run_id] == "cancelled"
    poll(lambda: gone(pid), f"the step's process {pid} to end")
    assert server.wait_status(run_id)["status"] == "cancelled"

    again = server.delete(f"/runs/{run_id}")
    assert again.status_code == 409, again.text
    assert server.delete("/runs/0123456789ab").status_code == 404


# started before anything of barca's: a process started while `hold` exists waits here
HELD_START = """
    import os, pathlib, time
    if pathlib.Path("hold").exists():
        pathlib.Path("starting").write_text(str(os.getpid()))
        time.sleep(60)
"""


def test_delete_before_the_runs_process_set_up_is_cancelled_before_it_started(
        project_with_pipeline: Path, serve, tmp_path: Path) -> None:
    """The run's process gets the cancel before it handles signals (Python's own SIGTERM
    ends it) while its POST waits for it: the run ended cancelled before it started, the
    POST answers with its id and its events end it exit 130, not failed."""
    root = project_with_pipeline
    site = write(tmp_path / "site", {"sitecustomize.py": HELD_START})
    server = serve(root, "p.py", warm="0", env={"PYTHONPATH": str(site)})
    (root / "hold").touch()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        posted = pool.submit(server.post, "/runs", json={"targets": ["quick"]})
        poll(lambda: (root / "starting").exists(), "the run's process to start")
        (root / "hold").unlink()  # the processes started later start as usual
        run_id = server.wait_run(lambda r: r["target"] == "quick", "the run to be listed")["id"]
        assert server.delete(f"/runs/{run_id}").status_code == 200
        answer = posted.result(timeout=30)
    assert (answer.status_code, answer.json()) == (202, {"run_id": run_id}), answer.text
    detail = server.wait_ended(run_id)
    assert detail["run"]["status"] == "cancelled", detail["run"]
    assert server.wait_status(run_id)["status"] == "cancelled"
    events = server.get(f"/runs/{run_id}/events").text
    assert '"exit_code":130' in events.replace(" ", ""), events


@pytest.mark.parametrize("warm", ["0", "30"], ids=["fresh", "warm-pool"])
def test_sigterm_mid_run_cancels_it_and_exits_0_within_10_seconds(
        project_with_pipeline: Path, serve, warm: str) -> None:
    root = project_with_pipeline
    # no drain: the run is cancelled at once (a drain is tests/server/test_serve_drain.py)
    server = serve(root, "p.py", "--drain-timeout", "0", warm=warm)
    run_id, pid = _start_slow(server, root, warm)
    assert db_rows(root, "SELECT status FROM runs WHERE run_id = ?", (run_id,)) == [("running",)]

    started = time.monotonic()
    code = server.terminate(timeout=10)  # one SIGTERM, as a supervisor sends
    assert code is not None, "barca serve still running 10 s after SIGTERM"
    assert time.monotonic() - started <= 10.5

    rows = read_runs(root, "run_id, status")
    assert [r for r in rows if r[1] == "running"] == [], rows
    assert dict(rows)[run_id] == "cancelled", rows
    poll(lambda: gone(pid), f"the step's process {pid} to end", timeout=10)
    assert "SIGTERM received" in server.stderr
    if warm != "0":  # the server stops the pool its runs forked from
        poll(lambda: not pool_processes(root), "the warm pool to stop with the server",
             timeout=10)
    assert code == 0, f"barca serve exited {code} after SIGTERM:\n{server.stderr}"
