"""A file that does not load is named in /health; the rest of the pipeline is served and its
schedules fire."""

from __future__ import annotations

from pathlib import Path

from conftest import poll, write


def test_a_broken_file_is_in_health_and_the_good_files_schedule_still_fires(
        project: Path, serve) -> None:
    write(project, {
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
        """})
    server = serve(project, "good.py", "broken.py")
    health = server.get("/health")
    assert health.status_code == 200
    errors = health.json()["load_errors"]
    assert [e["file"] for e in errors] == ["broken.py"], errors
    assert errors[0]["error"]
    assert "broken.py" in server.stderr

    assert [n["id"] for n in server.get("/assets").json()] == ["good.py:steady"]
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
