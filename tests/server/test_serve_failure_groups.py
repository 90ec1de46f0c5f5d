"""What the web UI shows of runs and failures comes from the server, worded and grouped there
(`barca.views`): a run's status in the words of run rows beside a live run's, failures grouped
with an error that quotes its key written `{key}` (on a partitioned node's page, in a run's
detail, on each failed step's event as it streams)."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from conftest import poll, write

PIPELINE = """
    from barca import asset, partitions

    @asset(partitions={"shop": partitions([f"s{i:02d}" for i in range(30)])})
    def sales(shop: str) -> int:
        n = int(shop[1:])
        if n % 10 == 3:
            raise ValueError(f"no feed for {shop}")
        if n % 10 == 7:
            raise ValueError("column amount missing")
        return n

    @asset()
    def quick() -> int:
        return 1
"""

QUOTING = ["s03", "s13", "s23"]  # each error names its key
SAME = ["s07", "s17", "s27"]  # one error for all


def _events(server, run_id: str) -> list[dict]:
    """Every event of a run, until its last."""
    with server.client.stream("GET", f"/runs/{run_id}/events") as response:
        assert response.status_code == 200, response.read()
        return [json.loads(line[5:]) for line in response.iter_lines()
                if line.startswith("data:")]


def test_failures_are_grouped_by_the_server_with_quoted_keys_written_key(
        project: Path, serve) -> None:
    write(project, {"p.py": PIPELINE})
    server = serve(project, "p.py")
    run_id = server.start_run({"targets": ["sales"]})
    events = _events(server, run_id)

    # each failed step's event names the group its error falls in
    failed = {e["step_id"]: e["error_group"] for e in events
              if e["type"] == "step_finished" and not e["ok"]}
    assert failed == {**{f"p.py:sales[shop={k}]": "no feed for {key}" for k in QUOTING},
                      **{f"p.py:sales[shop={k}]": "column amount missing" for k in SAME}}
    assert all("error_group" not in e for e in events
               if e["type"] == "step_finished" and e["ok"])
    finished = events[-1]
    assert (finished["type"], finished["status"], finished["run_status"]) == \
        ("run_finished", "failed", "failed")

    # the run's detail: its kept steps' failures, grouped the same way
    detail = server.wait_ended(run_id)
    groups = sorted(({**g, "sample_steps": sorted(g["sample_steps"])}  # in the order they ended
                     for g in detail["failure_groups"]), key=lambda g: g["error"])
    assert groups == [
        {"error": "column amount missing", "node_id": "p.py:sales", "count": 3,
         "sample_steps": [f"p.py:sales[shop={k}]" for k in SAME]},
        {"error": "no feed for {key}", "node_id": "p.py:sales", "count": 3,
         "sample_steps": [f"p.py:sales[shop={k}]" for k in QUOTING]}]

    # the node's page: the store's groups by first line (one a quoting key) merged into one
    page = server.get("/assets/sales/partitions").json()
    assert sorted(g["count"] for g in page["failures"]) == [1, 1, 1, 3]
    assert page["failure_groups"] == [
        {"error": "column amount missing", "error_type": "ValueError", "count": 3,
         "sample_keys": [f"shop={k}" for k in SAME], "at_least": False, "generic": False},
        {"error": "no feed for {key}", "error_type": "ValueError", "count": 3,
         "sample_keys": [f"shop={k}" for k in QUOTING], "at_least": False,
         "generic": True}]
    assert page["failed"] == 6 and page["failed_ungrouped"] == 0

    # a run that succeeds: `complete` as a live run says it, `success` as its row does
    quick = server.start_run({"targets": ["quick"]})
    finished = _events(server, quick)[-1]
    assert (finished["status"], finished["run_status"]) == ("complete", "success")


def test_the_schedule_says_its_last_run_status_as_run_rows_do(project: Path, serve) -> None:
    write(project, {"p.py": """
        from barca import Schedule, asset

        @asset(freshness=Schedule("0 * * * *"))
        def hourly() -> int:
            return 1
    """})
    first = serve(project, "p.py", "--timezone", "utc")
    poll(lambda: first.get("/schedule").json()[0]["last_fired"], "the job anchored")
    assert first.get("/schedule").json()[0]["last_run_status"] is None
    first.stop()
    conn = sqlite3.connect(project / ".barca" / "metadata.db")
    with conn:  # its last fire three hours ago: the next server catches up once
        conn.execute("UPDATE schedule_state SET last_fired = ?", (time.time() - 3 * 3600,))
    conn.close()

    second = serve(project, "p.py", "--timezone", "utc")
    run = second.wait_run(lambda r: r["triggered_by"] == "catch_up", "the catch-up run")
    second.wait_status(run["run_id"])
    [job] = second.get("/schedule").json()
    assert (job["last_run"], job["last_status"], job["last_run_status"]) == \
        (run["run_id"], "complete", "success")
