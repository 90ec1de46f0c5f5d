"""A key's routes, read by the web UI's key page: `/assets/{name}/attempts` (newest first,
each with its run and, failed, the user's frames of its traceback) and `/assets/{name}/value`
(a preview of its stored value: JSON pretty-printed, a table's first rows)."""

from __future__ import annotations

import json

import pytest

from conftest import barca, write

PIPELINE = """
    from barca import asset, partitions


    def check(r):
        if r == "r2":
            raise ValueError(f"feed {r} is down")
        return {"retailer": r, "rows": [1, 2, 3]}


    @asset(partitions={"retailer": partitions(["r1", "r2", "r3"])})
    def orders(retailer: str) -> dict:
        return check(retailer)


    @asset()
    def table():
        import pyarrow as pa
        return pa.table({"a": list(range(50)), "b": [f"x{i}" for i in range(50)]})
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("keys")
    write(root, {"barca.toml": "", "pipeline.py": PIPELINE})
    barca(root, "get", "orders,table", "pipeline.py").expect(1)
    barca(root, "get", "orders", "pipeline.py").expect(1)  # a second attempt of r2
    return root


def test_a_failed_keys_attempts_carry_their_run_and_the_users_frames(project, serve):
    server = serve(project, "pipeline.py")
    got = server.get("/assets/orders/attempts", params={"key": "retailer=r2"})
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["key"] == "retailer=r2"
    first, second = body["attempts"]
    runs = [r["run_id"] for r in server.runs() if r["target"] == "orders"]
    assert first["run_id"] in runs and second["run_id"] != first["run_id"]
    assert first["status"] == "failed" and first["error_message"] == "feed r2 is down"
    trace = first["error_traceback"]
    assert 'pipeline.py", line' in trace and "in check" in trace and "in orders" in trace
    assert "barca/engine" not in trace  # the user's frames only
    # one run's attempt alone, and a key that succeeded
    only = server.get("/assets/orders/attempts",
                      params={"key": "retailer=r2", "run": second["run_id"]}).json()
    assert [a["run_id"] for a in only["attempts"]] == [second["run_id"]]
    ok = server.get("/assets/orders/attempts", params={"key": "retailer=r1"}).json()
    assert ok["attempts"][0]["status"] == "success" and ok["attempts"][0]["error_traceback"] is None


def test_a_partitioned_node_needs_its_key(project, serve):
    server = serve(project, "pipeline.py")
    for route in ("attempts", "value"):
        got = server.get(f"/assets/orders/{route}")
        assert got.status_code == 400
        assert "?key=" in got.json()["remediation"]
    assert server.get("/assets/nope/value").status_code == 404


def test_a_values_preview(project, serve):
    server = serve(project, "pipeline.py")
    value = server.get("/assets/orders/value", params={"key": "retailer=r3"}).json()
    assert value["kind"] == "json" and value["format"] == "json" and not value["truncated"]
    assert json.loads(value["text"]) == {"retailer": "r3", "rows": [1, 2, 3]}
    assert value["text"].startswith('{\n  "retailer"')  # pretty-printed
    never = server.get("/assets/orders/value", params={"key": "retailer=r2"}).json()
    assert never["kind"] == "none"
    table = server.get("/assets/table/value").json()
    assert table["kind"] == "table" and table["num_rows"] == 50
    assert table["columns"] == ["a", "b"]
    assert table["rows"][:2] == [["0", "x0"], ["1", "x1"]] and len(table["rows"]) == 10
