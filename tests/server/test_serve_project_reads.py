"""The published server's read routes that `barca serve` answers in its own process, from the
served graph and the metadata database (a real `barca serve` on loopback): `/plan` as `barca
plan` prints it, `/project`, `/groups`, `/materializations` paged, `/sql/views` naming the
files `barca sql` reads, `/runs/{id}/logs` filtered as `barca logs`, the older `/events/{id}`
and the bodyless `POST /run` (`barca get` of everything)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import orjson

from conftest import barca, poll, write

PIPELINE = """
    import sys
    from barca import asset, group, partitions, task

    @asset(partitions={"k": partitions(["a", "b"])})
    def keyed(k: str) -> dict:
        print("keyed", k)
        print("warned", k, file=sys.stderr)
        return {"k": k}

    @asset()
    def plain() -> int:
        return 1

    @task(inputs={"plain": plain})
    def publish(plain: int) -> None:
        print("published")

    basics = group("Basics", members=[keyed, plain], output=plain)
"""


def _ok(response) -> object:
    assert response.status_code == 200, (response.status_code, response.text)
    return response.json()


def test_plan_project_groups_and_materializations(project: Path, serve) -> None:
    write(project, {"p.py": PIPELINE})
    first = barca(project, "get", "keyed", "p.py").expect(0).json["run_id"]
    second = barca(project, "get", "plain", "p.py").expect(0).json["run_id"]
    server = serve(project, "p.py", "--no-schedule")

    assert _ok(server.get("/plan")) == barca(project, "plan", "p.py").expect(0).json
    assert _ok(server.get("/groups")) == \
        barca(project, "list", "--groups", "p.py", "--json").expect(0).json["groups"]
    assert [g["name"] for g in _ok(server.get("/groups"))] == ["Basics"]
    served = _ok(server.get("/project"))
    assert served["root"] == str(project) and served["env"] == "default"
    assert served["files"] == [{"path": "p.py", "sha256": hashlib.sha256(
        (project / "p.py").read_bytes()).hexdigest()}]
    assert served["commit"] is None and served["api_version"] == 1

    page = _ok(server.get("/materializations", params={"limit": "2"}))
    assert page["total"] == 3 and page["truncated"] is True and page["offset"] == 0
    newest = page["materializations"]
    assert [m["run_id"] for m in newest] == [second, first]  # newest first
    assert newest[0]["step_id"] == "p.py:plain" and newest[0]["partition_key"] is None
    assert newest[1]["partition_key"] in ("k=a", "k=b")
    assert newest[0]["created_at"].endswith("Z")
    rest = _ok(server.get("/materializations", params={"limit": "2", "offset": "2"}))
    assert [m["run_id"] for m in rest["materializations"]] == [first]
    assert rest["truncated"] is False
    assert {m["partition_key"] for m in newest[1:] + rest["materializations"]} == {"k=a",
                                                                                  "k=b"}
    assert server.get("/materializations", params={"limit": "10001"}).status_code == 400


def test_sql_views_name_the_stored_files_and_their_hashes(project: Path, serve) -> None:
    write(project, {"p.py": PIPELINE})
    barca(project, "get", "keyed", "p.py").expect(0)
    server = serve(project, "p.py", "--no-schedule")
    body = _ok(server.get("/sql/views"))
    (view,) = body["views"]
    assert (view["name"], view["node"], view["partitioned"], view["stale"]) == (
        "keyed", "p.py:keyed", True, False)
    assert sorted(f["partition"] for f in view["files"]) == ["k=a", "k=b"]
    conn = sqlite3.connect(project / ".barca" / "metadata.db")
    hashes = dict(conn.execute("SELECT step_id, output_hash FROM materializations"))
    for file in view["files"]:
        assert file["content_hash"] == hashes[f"p.py:keyed[{file['partition']}]"]
        path, _, where = file["path"].partition("@")  # a small result: a range of a pack
        assert (project / path).is_file() and path.startswith(".barca/")
        if where:
            offset, length = map(int, where.split(":"))
            stored = (project / path).read_bytes()[offset:offset + length]
        else:
            stored = (project / path).read_bytes()
        assert orjson.loads(stored) == {"k": file["partition"][2:]}
    assert {m["node"]: m["reason"] for m in body["missing"]} == {
        "p.py:plain": "no_result", "p.py:publish": "no_result"}
    assert body["duplicates"] == []
    assert _ok(server.get("/sql/views", params={"files": "p.py"}))["views"] == [view]
    assert server.get("/sql/views", params={"files": "other.py"}).status_code == 404


def test_run_logs_by_step_and_stream(project: Path, serve) -> None:
    write(project, {"p.py": PIPELINE})
    run_id = barca(project, "get", "keyed", "p.py").expect(0).json["run_id"]
    server = serve(project, "p.py", "--no-schedule")
    every = _ok(server.get(f"/runs/{run_id}/logs"))
    assert every["run_id"] == run_id
    assert sorted(line["line"] for line in every["logs"]) == [
        "keyed a", "keyed b", "warned a", "warned b"]
    one = _ok(server.get(f"/runs/{run_id}/logs", params={"step": "keyed[k=a]",
                                                         "stream": "stderr"}))["logs"]
    assert [(line["step_id"], line["partition_key"], line["stream"], line["line"])
            for line in one] == [("p.py:keyed[k=a]", "k=a", "stderr", "warned a")]
    assert one[0]["ts"].endswith("Z")
    # the same lines as `barca logs --json`
    local = barca(project, "logs", run_id, "--step", "keyed[k=a]", "--stream", "stderr",
                  "--json").expect(0).json
    assert one == local
    unknown = server.get(f"/runs/{run_id}/logs", params={"step": "nope"})
    assert unknown.status_code == 404 and "no step 'nope'" in unknown.json()["error"]
    assert server.get(f"/runs/{run_id}/logs", params={"stream": "x"}).status_code == 400
    assert server.get("/runs/000000000000/logs").status_code == 404


def test_post_run_gets_every_asset_and_events_follow_it(project: Path, serve) -> None:
    write(project, {"p.py": PIPELINE})
    server = serve(project, "p.py", "--no-schedule")
    misdirected = server.post("/run", json={"targets": ["plain"]})  # meant for POST /runs
    assert misdirected.status_code == 400 and "POST /runs" in misdirected.json()["remediation"]
    assert server.runs() == []
    started = server.post("/run")
    assert started.status_code == 200, started.text
    run_id = started.json()["run_id"]
    events = server.get(f"/events/{run_id}")  # the older name of /runs/{id}/events
    assert events.status_code == 200
    assert events.headers["content-type"].startswith("text/event-stream")
    finished = [orjson.loads(line[len("data: "):]) for line in events.text.splitlines()
                if line.startswith("data: ")][-1]
    assert finished["type"] == "run_finished" and finished["ok"] is True
    ended = server.wait_ended(run_id)
    assert ended["run"]["status"] == "success"
    assert ended["run"]["command"] == "get" and ended["run"]["target"] is None
    steps = poll(lambda: _ok(server.get(f"/history/{run_id}"))["steps"], "the steps")
    assert {s["node_id"] for s in steps} == {"p.py:keyed", "p.py:plain"}  # no task
