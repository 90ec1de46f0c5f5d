"""issue 26, items 11 and 12 on a real server: `--read-only` writes nothing under the project
(every file and directory, with its size and mtime, is the same after the server's whole life
with every GET route called), a read-only server still sees the runs a CLI records beside it,
and a server killed with -9 leaves no warm pool behind. (Item 12's load errors of a
`partitions(<expr>)` or `batches(<expr>)` that raises: test_serve_load_errors.py.)"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from starlette.routing import Mount, Route

from conftest import barca, wait_until_gone, wait_until_ready, write

PIPELINE = """
    from pathlib import Path

    from barca import Schedule, asset, partitions, sensor, task


    def regions():
        return Path("regions.txt").read_text().split()


    @sensor()
    def feed() -> int:
        return 3


    @asset(inputs={"feed": feed})
    def base(feed: int) -> int:
        print("base ran")
        return feed


    @asset(inputs={"base": base}, partitions={"region": partitions(regions())},
           freshness=Schedule("*/1 * * * * *"))
    def per_region(base: int, region: str) -> str:
        print("computing", region)
        return region * base


    @task(inputs={"base": base})
    def publish(base: int) -> str:
        return "published"
"""


def listing(root: Path) -> dict[str, tuple]:
    """Every file and directory under `root` (root included): kind, size, mtime_ns."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in [".", *dirs, *files]:
            path = Path(folder) / name
            st = path.lstat()
            kind = "dir" if path.is_dir() and not path.is_symlink() else "file"
            out[str(path.relative_to(root))] = (kind, st.st_size, st.st_mtime_ns)
    return out


def get_routes() -> set[str]:
    """The GET routes the server has, as their path templates (read from the app itself, so
    that a route added later and not called here fails the test)."""
    from barca.server.app import build_app
    from barca.server.http import Served

    out = set()
    for route in build_app(Served(options=None, pipeline=None)).routes:
        if isinstance(route, Mount):
            out.add(route.path + "/")
        elif isinstance(route, Route) and "GET" in (route.methods or ()):
            out.add(route.path)
    return out


def test_a_read_only_server_writes_nothing_under_the_project_in_its_whole_life(
        project: Path, serve) -> None:
    write(project, {"p.py": PIPELINE, "regions.txt": "emea amer\n"})
    got = barca(project, "get", "per_region", "p.py").expect(0).json
    ran = barca(project, "run", "publish", "p.py").expect(0).json
    before = listing(project)

    server = serve(project, "p.py", "--read-only", warm="3600")
    run_id, task_id = got["run_id"], ran["run_id"]
    calls = {
        "/health": ["/health"], "/assets": ["/assets"], "/state": ["/state"],
        "/schedule": ["/schedule"], "/openapi.json": ["/openapi.json"],
        "/assets/{name:path}": ["/assets/per_region", "/assets/p.py:base"],
        "/assets/{name:path}/partitions": [
            "/assets/per_region/partitions", "/assets/per_region/partitions?status=failed",
            "/assets/per_region/partitions?q=em"],
        "/runs": ["/runs", "/runs?limit=1&offset=1"],
        "/runs/{run_id}": [f"/runs/{run_id}", f"/runs/{task_id}", "/runs/nope"],
        "/runs/{run_id}/events": [f"/runs/{run_id}/events"],
        "/logs/{run_id}": [f"/logs/{run_id}"],
        "/runs/{run_id}/output": [f"/runs/{run_id}/output?key=region=emea",
                                  f"/runs/{task_id}/output"],
        "/runs/{run_id}/stdout": [f"/runs/{run_id}/stdout"],
        "/status/{run_id}": [f"/status/{run_id}"],
        "/cli/{command}": [
            "/cli/status?arg=p.py", "/cli/list?arg=p.py", "/cli/history",
            f"/cli/history?arg={run_id}", f"/cli/logs?arg={run_id}",
            "/cli/stats?arg=per_region&arg=p.py"],
        "/list": ["/list", "/list?all=1"],
        "/nodes": ["/nodes", "/nodes?targets=per_region&all=1"],
        "/history": ["/history", "/history?limit=1"],
        "/history/{run_id}": [f"/history/{run_id}", f"/history/{task_id}?limit=5"],
        "/stats/{name:path}": ["/stats/per_region"],
        "/plan": ["/plan"], "/project": ["/project"], "/groups": ["/groups"],
        "/materializations": ["/materializations", "/materializations?limit=1&offset=1"],
        "/sql/views": ["/sql/views"], "/queue": ["/queue"],
        "/runs/{run_id}/logs": [f"/runs/{run_id}/logs", f"/runs/{run_id}/logs?step=base"],
        "/events/{run_id}": [f"/events/{run_id}"],
        "/schedule/{job:path}/fires": ["/schedule/p.py:per_region/fires",
                                       "/schedule/nope/fires"],
        "/assets/{name:path}/attempts": ["/assets/per_region/attempts?key=region=emea"],
        "/assets/{name:path}/value": ["/assets/per_region/value?key=region=emea",
                                      "/assets/p.py:base/value"],
        "/": ["/"], "/ui": ["/ui"], "/ui/": ["/ui/"],
    }
    assert get_routes() <= set(calls), f"GET routes not called: {get_routes() - set(calls)}"
    answers = {}
    for urls in calls.values():
        for url in urls:
            answer = server.get(url)
            answers[url] = answer.status_code
            assert answer.status_code < 500, (url, answer.status_code, answer.text)
    # the reads answered from the database, not from an empty one
    assert answers[f"/runs/{run_id}"] == 200 and answers["/cli/status?arg=p.py"] == 200
    assert {r["run_id"] for r in server.get("/runs").json()["runs"]} == {run_id, task_id}
    assert server.get("/assets/per_region/partitions").json()["total"] == 2
    assert server.get(f"/logs/{run_id}").json()["logs"][0]["line"] == "base ran"
    states = {n["id"]: n["cache"]["state"] for n in server.get("/state").json()}
    assert states["p.py:per_region"] == "cached", states
    assert server.get("/cli/status?arg=p.py").json()["exit_code"] == 0
    assert server.get(f"/runs/{run_id}/output?key=region=emea").content == b'"emeaemeaemea"'
    assert listing(project) == before  # while it runs

    assert server.terminate() == 0
    assert listing(project) == before  # and after a SIGTERM stop


def test_a_read_only_server_sees_runs_a_cli_records_beside_it_and_still_writes_nothing(
        project: Path, serve) -> None:
    write(project, {"p.py": PIPELINE, "regions.txt": "emea amer\n"})
    first = barca(project, "get", "per_region", "p.py").expect(0).json["run_id"]
    server = serve(project, "p.py", "--read-only")
    assert [r["run_id"] for r in server.get("/runs").json()["runs"]] == [first]
    assert server.get("/assets/per_region/partitions").json()["total"] == 2

    (project / "regions.txt").write_text("emea amer apac\n")
    # run by this process, not a warm pool's child (which leaves its writes in the log)
    second = barca(project, "get", "per_region", "p.py",
                   env={"BARCA_WARM_SECONDS": "0"}).expect(0).json["run_id"]
    after_cli = listing(project)
    # the CLI was the database's last user: SQLite removed its side files as it closed
    assert not {".barca/metadata.db-wal", ".barca/metadata.db-shm"} & set(after_cli)

    assert [r["run_id"] for r in server.get("/runs").json()["runs"]] == [second, first]
    assert server.get(f"/runs/{second}").json()["run"]["status"] == "success"
    page = server.get("/assets/per_region/partitions").json()
    assert page["total"] == 3 and "region=apac" in {k["key"] for k in page["keys"]}, page
    states = {n["id"]: n["cache"]["state"] for n in server.get("/state").json()}
    assert states["p.py:per_region"] == "cached", states
    history = server.get("/cli/history").json()
    assert second in history["stdout"], history
    assert listing(project) == after_cli

    assert server.terminate() == 0
    assert listing(project) == after_cli


def test_a_server_killed_with_sigkill_leaves_no_warm_pool_behind(project: Path, serve) -> None:
    write(project, {"p.py": """
        from barca import asset

        @asset()
        def one() -> int:
            return 1
    """})
    server = serve(project, "p.py", warm="3600")
    pool = wait_until_ready(project)
    run_id = server.start_run({"targets": ["one"]})
    assert server.wait_ended(run_id)["run"]["status"] == "success"
    assert wait_until_ready(project) == pool  # the run used it, and it stays for the next

    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait()
    wait_until_gone(pool, timeout=30)  # not an hour
