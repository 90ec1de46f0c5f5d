"""A file that does not load is named in /health; the rest of the pipeline is served and its
schedules fire."""

from __future__ import annotations

from pathlib import Path

from conftest import poll, write


# good.py is served and scheduled; each other file does not load, whole or in part
BROKEN = {
    "good.py": """
        from barca import Schedule, asset

        @asset(freshness=Schedule("*/1 * * * * *"))
        def steady() -> int:
            return 7
    """,
    "broken.py": """
        from barca import asset

        @asset()
        def oops( -> int:
            return 1
    """,
    "regions.py": """
        from barca import asset, collect, partitions

        def regions():
            raise RuntimeError("regions service down")

        @asset(partitions={"region": partitions(regions())})
        def regional(region: str) -> str:
            return region

        @asset(inputs={"regional": collect(regional)})
        def report(regional: list) -> int:
            return len(regional)
    """,
    "grouped.py": """
        from barca import asset, batches, partitions

        GROUPS = {"emea": [["a"], ["b"]]}

        @asset(partitions={"k": partitions(["a", "b"])}, batch=batches(GROUPS["amer"]))
        def grouped(k: list[str]) -> dict:
            return {key: key for key in k}
    """}


def test_what_does_not_load_is_in_health_naming_file_or_node_and_the_rest_is_served(
        project: Path, serve) -> None:
    """A file that does not load, and a `partitions(<expr>)` or `batches(<expr>)` that raises
    (issue 26, item 12), are in /health; the other nodes are listed, runnable, and their
    schedule fires."""
    write(project, BROKEN)
    server = serve(project)
    health = server.get("/health")
    assert health.status_code == 200
    errors = health.json()["load_errors"]
    assert [e["file"] for e in errors if not e.get("node")] == ["broken.py"], errors
    assert next(e for e in errors if e["file"] == "broken.py")["error"]
    by_node = {e["node"]: e for e in errors if e.get("node")}
    assert set(by_node) == {"regions.py:regional", "grouped.py:grouped"}, errors
    assert "RuntimeError: regions service down" in by_node["regions.py:regional"]["error"]
    assert by_node["regions.py:regional"]["affected_nodes"] == ["regions.py:regional",
                                                                "regions.py:report"]
    assert "KeyError: 'amer'" in by_node["grouped.py:grouped"]["error"]
    assert by_node["grouped.py:grouped"]["file"] == "grouped.py"
    assert all(name in server.stderr
               for name in ("broken.py", "regions.py:regional", "grouped.py:grouped"))

    assert [n["id"] for n in server.get("/assets").json()] == ["good.py:steady"]
    state = server.get("/state")
    assert state.status_code == 200, state.text
    assert [n["id"] for n in state.json()] == ["good.py:steady"]
    assert server.post("/runs", json={"targets": ["regional"]}).status_code == 404
    run = server.wait_run(lambda r: r["triggered_by"] == "schedule" and r["status"] == "success",
                          "good.py's scheduled run to succeed")
    assert run["target"] == "good.py:steady"
    assert "broken.py" not in run["files"], run

    # and the server keeps serving
    again = server.get("/health")
    assert again.status_code == 200 and again.json()["load_errors"] == errors
    assert server.wait_ended(run["run_id"])["run"]["status"] == "success"
    assert server.proc.poll() is None


def test_watch_reloads_the_fixed_file_and_counts_the_reload(project: Path, serve) -> None:
    write(project, {"p.py": """
        from barca import asset

        @asset()
        def first() -> int:
            return 1

        @asset()
        def second( -> int:
            return 2
    """})
    server = serve(project, "p.py", "--watch")
    health = server.get("/health").json()
    assert [e["file"] for e in health["load_errors"]] == ["p.py"] and health["generation"] == 0
    write(project, {"p.py": """
        from barca import asset

        @asset()
        def first() -> int:
            return 1

        @asset()
        def second() -> int:
            return 2
    """})
    health = poll(lambda: (lambda h: h if h["generation"] >= 1 and not h["load_errors"]
                           else None)(server.get("/health").json()), "the fixed file to load")
    assert [n["id"] for n in server.get("/assets").json()] == ["p.py:first", "p.py:second"]
    run_id = server.start_run({"targets": ["second"]})
    assert server.wait_ended(run_id)["run"]["status"] == "success"
