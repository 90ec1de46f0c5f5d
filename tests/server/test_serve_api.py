"""`barca serve`'s HTTP API over loopback: health, nodes, errors, the OpenAPI document, and a
run started over HTTP followed through /status, /runs, /logs, /state and /assets."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, read_runs, write

PIPELINE = """
    from barca import asset, task

    @asset()
    def hello() -> str:
        print("hello printed this line")
        return "hi"

    @asset(inputs={"hello": hello})
    def world(hello: str) -> str:
        return hello + " world"

    @task(inputs={"world": world})
    def shout(world: str) -> None:
        print(world.upper())
"""

NODES = {"p.py:hello": "asset", "p.py:world": "asset", "p.py:shout": "task"}

# Every API route the server answers (the list), with the verbs of each.
API_ROUTES = {
    "/health": {"GET"}, "/assets": {"GET"}, "/assets/{name}": {"GET"},
    "/assets/{name}/partitions": {"GET"}, "/state": {"GET"}, "/schedule": {"GET"},
    "/runs": {"GET", "POST"}, "/runs/{run_id}": {"GET", "DELETE"},
    "/runs/{run_id}/events": {"GET"}, "/logs/{run_id}": {"GET"}, "/get/{target}": {"POST"},
    "/run/{target}": {"POST"}, "/status/{run_id}": {"GET"}, "/openapi.json": {"GET"},
    "/runs/{run_id}/output": {"GET"}, "/runs/{run_id}/stdout": {"GET"},
    "/cli/{command}": {"GET"}, "/list": {"GET"}, "/nodes": {"GET"}, "/history": {"GET"},
    "/history/{run_id}": {"GET"}, "/stats/{name}": {"GET"},
    "/plan": {"GET"}, "/groups": {"GET"}, "/project": {"GET"}, "/materializations": {"GET"},
    "/sql/views": {"GET"}, "/runs/{run_id}/logs": {"GET"}, "/events/{run_id}": {"GET"},
    "/run": {"POST"}, "/queue": {"GET"}, "/queue/pause": {"POST"}, "/queue/resume": {"POST"},
    "/schedule/{job}/pause": {"POST"}, "/schedule/{job}/resume": {"POST"},
    "/state/reset": {"POST"}, "/schedule/{job}/fire": {"POST"},
    "/schedule/{job}/fires": {"GET"},
    "/assets/{name}/attempts": {"GET"}, "/assets/{name}/value": {"GET"},
    "/ledger/lookup": {"POST"}, "/ledger/runs": {"POST"},
    "/capacity/leases": {"POST"}, "/capacity/leases/{lease}/want": {"POST"},
    "/capacity/leases/{lease}/give": {"POST"}, "/capacity/leases/{lease}/renew": {"POST"},
    "/capacity/leases/{lease}": {"DELETE"},
}


@pytest.fixture
def server(project: Path, serve):
    write(project, {"p.py": PIPELINE})
    return serve(project, "p.py")


def _no_route(response) -> bool:
    """A 404 or 405 the router gave (no route, or no such verb on it): not a handler's."""
    if response.status_code == 405:
        return True
    return response.status_code == 404 and response.json().get("error", "").startswith(
        "no route")


def test_health_names_version_mode_scheduler_and_load_errors(server) -> None:
    got = server.get("/health")
    assert got.status_code == 200
    assert got.headers["content-type"].startswith("application/json")
    body = got.json()
    assert set(body) == {"status", "version", "api_version", "read_only", "store",
                         "capacity", "scheduler", "load_errors", "generation"}
    assert body["api_version"] == 1 and body["store"] is None  # no [remote]: no ledger
    assert body["capacity"] is None  # no --capacity
    assert body["generation"] == 0  # no reload yet
    assert body["status"] == "ok"
    assert isinstance(body["version"], str) and body["version"]
    assert body["read_only"] is False and body["scheduler"] is True
    assert body["load_errors"] == []
    head = server.client.head("/health")
    assert head.status_code == 200 and head.content == b""


def test_assets_lists_every_node_with_its_kind_and_freshness(server) -> None:
    got = server.get("/assets")
    assert got.status_code == 200
    nodes = {n["id"]: n for n in got.json()}
    assert set(nodes) == set(NODES)
    for node_id, kind in NODES.items():
        assert nodes[node_id]["kind"] == kind
        assert nodes[node_id]["freshness"]["type"] == "Always"
    assert nodes["p.py:world"]["inputs"] == ["p.py:hello"]


def test_unknown_path_wrong_verb_head_and_root_redirect(server) -> None:
    missing = server.get("/no/such/thing")
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("application/json")
    assert missing.json()["error"]

    wrong = server.client.put("/runs")
    assert wrong.status_code == 405
    assert {m.strip() for m in wrong.headers["allow"].split(",")} >= {"GET", "POST"}
    assert wrong.json()["error"]

    root = server.get("/", follow_redirects=False)
    assert root.status_code == 303
    assert root.headers["location"] == "ui/"


def test_openapi_paths_are_the_routes_the_server_answers(server) -> None:
    got = server.get("/openapi.json")
    assert got.status_code == 200
    documented = {path: {verb.upper() for verb in ops}
                  for path, ops in got.json()["paths"].items()}
    params = {"name": "p.py:hello", "run_id": "0123456789ab", "target": "no-such-node",
              "command": "status", "job": "no-such-node", "lease": "no-such-lease"}

    def probe(verb: str, path: str):
        body = {"targets": ["no-such-node"]} if verb == "POST" else None
        return server.client.request(verb, path.format(**params), json=body)

    # each documented or expected route and verb reaches a handler (which may still answer
    # that the run or node is unknown), and the server allows exactly those verbs there
    for path in sorted(set(documented) | set(API_ROUTES)):
        verbs = documented.get(path) or API_ROUTES[path]
        for verb in sorted(verbs):
            response = probe(verb, path)
            assert not _no_route(response), (verb, path, response.status_code, response.text)
        allowed = server.client.request("PATCH", path.format(**params))
        assert allowed.status_code == 405, (path, allowed.status_code, allowed.text)
        assert {m.strip() for m in allowed.headers["allow"].split(",")} == \
            verbs | ({"HEAD"} if "GET" in verbs else set()), path
    assert server.runs() == []  # no probe started a run

    # the document names every API route the server answers, with its verbs, and no other
    assert documented == API_ROUTES, (
        f"served but not documented: {sorted(set(API_ROUTES) - set(documented))}; "
        f"documented but not served: {sorted(set(documented) - set(API_ROUTES))}")
    # (that the app's route table says the same: tests/unit/test_openapi_document.py)


def test_post_runs_refuses_unknown_targets_fields_and_bad_batch_values(server) -> None:
    unknown = server.post("/runs", json={"targets": ["no_such_node"]})
    assert unknown.status_code == 404, unknown.text
    assert "no_such_node" in unknown.json()["error"]

    field = server.post("/runs", json={"targets": ["hello"], "colour": "red"})
    assert field.status_code == 400, field.text
    assert "colour" in field.json()["error"]

    batch = server.post("/runs", json={"targets": ["hello"], "batch": ["bogus"]})
    assert batch.status_code == 400, batch.text
    envelope = batch.json()
    assert envelope["kind"] == "usage"
    assert "bogus" in envelope["error"] and envelope["remediation"]
    assert server.runs() == []  # nothing refused was recorded as a run

    not_json = server.post("/runs", content=b"{nope", headers={"Content-Type": "application/json"})
    assert not_json.status_code == 400


def test_a_dry_run_answers_what_the_cli_prints_for_it(server, project: Path) -> None:
    got = server.post("/runs", json={"targets": ["world"], "dry_run": True})
    assert got.status_code == 200, got.text
    local = barca(project, "get", "world", "p.py", "--dry-run", "--json").expect(0).json
    assert got.json() == local
    assert got.json()["summary"]["will_run"] == 2
    assert server.runs() == []  # a dry run runs nothing

    # and once things ran, the same request says so, as the CLI does
    barca(project, "get", "world", "p.py").expect(0)
    again = server.post("/runs", json={"targets": ["world"], "dry_run": True})
    assert again.status_code == 200, again.text
    assert again.json() == barca(project, "get", "world", "p.py", "--dry-run",
                                 "--json").expect(0).json
    assert again.json()["summary"]["cached"] == 2


def test_a_run_started_over_http_is_followed_through_every_read_route(
        server, project: Path) -> None:
    started = server.post("/get/world")
    assert started.status_code == 200, started.text
    run_id = started.json()["run_id"]

    status = server.wait_status(run_id)
    assert status["status"] == "complete", status
    assert status["handle"] == run_id
    assert status["result"]["status"] == "success"
    assert status["result"]["final_output"] == "hi world"

    runs = server.runs()
    assert [r["run_id"] for r in runs] == [run_id]
    assert runs[0]["triggered_by"] == "api"
    assert runs[0]["status"] == "success"
    assert runs[0]["target"] in ("world", "p.py:world")

    detail = server.get(f"/runs/{run_id}")
    assert detail.status_code == 200
    detail = detail.json()
    assert {"run", "steps", "logs"} <= set(detail)
    assert detail["run"]["run_id"] == run_id and detail["run"]["status"] == "success"
    assert {s["node_id"] for s in detail["steps"]} == {"p.py:hello", "p.py:world"}
    assert any(line["line"] == "hello printed this line" for line in detail["logs"])

    logs = server.get(f"/logs/{run_id}")
    assert logs.status_code == 200
    assert [(line["node_id"], line["line"]) for line in logs.json()["logs"]] == [
        ("p.py:hello", "hello printed this line")]

    assert server.get("/runs", params={"limit": "abc"}).status_code == 400
    assert server.get("/runs/no-such-run").status_code == 404

    state = server.get("/state")
    assert state.status_code == 200, state.text
    nodes = {n["id"]: n for n in state.json()}
    assert set(nodes) == set(NODES)
    for node in nodes.values():
        assert "cache" in node and "durations" in node
    assert nodes["p.py:world"]["cache"]["state"] == "cached"
    assert nodes["p.py:hello"]["durations"]["samples"] == 1

    asset = server.get("/assets/world")
    assert asset.status_code == 200
    assert asset.json()["asset"]["id"] == "p.py:world"
    assert asset.json()["stats"]["total_runs"] == 1
    assert server.get("/assets/nope").status_code == 404

    # the run in the database, as the CLI recorded it
    assert read_runs(project, "run_id, status, triggered_by") == [(run_id, "success", "api")]


def test_a_node_is_named_as_the_cli_names_it_and_an_ambiguous_name_is_a_409(
        project: Path, serve) -> None:
    write(project, {
        "a.py": """
            from barca import asset

            @asset()
            def shared() -> int:
                return 1

            @asset(name="label")
            def labelled() -> int:
                return 2
        """,
        "b.py": """
            from barca import asset

            @asset()
            def shared() -> int:
                return 3
        """})
    server = serve(project, "a.py", "b.py")
    ambiguous = server.get("/assets/shared")
    assert ambiguous.status_code == 409, ambiguous.text
    assert "a.py:shared" in ambiguous.json()["error"] and "b.py:shared" in ambiguous.json()["error"]
    assert server.get("/assets/b.py:shared").json()["asset"]["id"] == "b.py:shared"
    # by its declared name, as the CLI
    assert server.get("/assets/label").json()["asset"]["id"] == "a.py:label"
    refused = server.post("/runs", json={"targets": ["shared"]})
    assert refused.status_code == 409, refused.text
