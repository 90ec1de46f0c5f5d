"""`barca queue [pause|resume]` and `barca state backups|restore|reset`, as 0.33 has them, on
the real command: a reset asks first and keeps a copy, a restore puts it back (keeping the
database it replaces), neither while a run or a `barca serve` holds the project; the queue a
server keeps durable is read from the database without it, and paused through it with
--server."""

from __future__ import annotations

import os
import pty
import sqlite3
import subprocess
from pathlib import Path

from conftest import CLI, barca, barca_env, poll, start_barca, write

PIPELINE = """
    import time
    from pathlib import Path

    from barca import asset, task

    @asset()
    def plain() -> int:
        return 1

    @task()
    def slow() -> None:
        Path("started").write_text("")
        while not Path("go").exists():
            time.sleep(0.02)

    @task()
    def mark() -> None:
        with open("marked.log", "a") as fh:
            fh.write("mark\\n")
"""


def _history(project: Path) -> list[str]:
    return [r["run_id"] for r in barca(project, "history").expect(0).json["runs"]]


def test_reset_keeps_a_copy_that_restore_puts_back(project: Path) -> None:
    write(project, {"p.py": PIPELINE})
    first = barca(project, "get", "plain", "p.py").expect(0).json["run_id"]
    assert barca(project, "state", "backups").expect(0).json["backups"] == []

    refused = barca(project, "state", "reset").expect(2)  # stdin is no terminal
    assert "--yes" in refused.envelope["remediation"]
    assert _history(project) == [first]

    reset = barca(project, "state", "reset", "--yes").expect(0).json
    assert reset["runs_removed"] == 1 and reset["materializations_removed"] == 1
    backup = Path(reset["backup"])
    assert backup.parent == project / ".barca" and backup.name.startswith("metadata.db.reset-")
    assert reset["undo"] == f"barca state restore {backup.name}"
    assert _history(project) == []
    listed = barca(project, "state", "backups").expect(0).json["backups"]
    assert [(b["index"], b["name"], b["kind"], b["runs"], b["run_id"], b["error"])
            for b in listed] == [(1, backup.name, "reset", 1, first, None)]
    assert listed[0]["taken_at"].endswith("Z")

    second = barca(project, "get", "plain", "p.py").expect(0).json
    assert second["steps_executed"] == 1  # nothing recorded: computed again

    restored = barca(project, "state", "restore", backup.name).expect(0).json
    assert restored["restored"] == str(backup) and restored["runs"] == 1
    assert restored["last_run_id"] == first
    assert _history(project) == [first]
    # the database it replaced is kept, newest first, and can itself be put back
    listed = barca(project, "state", "backups").expect(0).json["backups"]
    assert [(b["kind"], b["run_id"]) for b in listed] == [("pre-restore", second["run_id"]),
                                                         ("reset", first)]
    assert restored["pre_restore"] == listed[0]["path"]
    cached = barca(project, "get", "plain", "p.py").expect(0).json
    assert cached["steps_executed"] == 0

    # 0.33's spelling, a number: the newest, what the first restore replaced
    barca(project, "state", "restore", "--from", "1").expect(0)
    assert _history(project) == [second["run_id"]]
    newest = barca(project, "state", "restore").expect(0)  # none named: the newest, said
    assert "restoring the newest backup, metadata.db.pre-restore-" in newest.stderr
    assert _history(project) == [cached["run_id"], first]


def test_reset_asks_in_a_terminal_and_anything_but_y_changes_nothing(project: Path) -> None:
    write(project, {"p.py": PIPELINE})
    run_id = barca(project, "get", "plain", "p.py").expect(0).json["run_id"]

    def answered(text: str) -> subprocess.CompletedProcess:
        master, slave = pty.openpty()
        proc = subprocess.Popen([*CLI, "state", "reset", "--json"], cwd=project,
                                env=barca_env(), stdin=slave, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        os.close(slave)
        os.write(master, text.encode())
        out, err = proc.communicate(timeout=60)
        os.close(master)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    no = answered("n\n")
    assert no.returncode == 0 and "[y/N]" in no.stderr and "Nothing changed" in no.stderr
    assert no.stdout == "" and _history(project) == [run_id]
    yes = answered("y\n")
    assert yes.returncode == 0, yes.stderr
    assert _history(project) == []


def test_restore_refuses_what_it_cannot_restore_and_changes_nothing(project: Path) -> None:
    write(project, {"p.py": PIPELINE})
    run_id = barca(project, "get", "plain", "p.py").expect(0).json["run_id"]

    nothing = barca(project, "state", "restore").expect(2)
    assert "no backup" in nothing.envelope["error"]
    assert "barca state backups" in barca(project, "state", "restore", "3").expect(2) \
        .envelope["remediation"]
    (project / "junk.db").write_bytes(b"not a database at all" * 100)
    junk = barca(project, "state", "restore", "junk.db").expect(2)
    assert "not a whole SQLite database" in junk.envelope["error"]
    newer = project / "newer.db"
    conn = sqlite3.connect(newer)
    conn.execute("CREATE TABLE runs (run_id TEXT)")
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    future = barca(project, "state", "restore", newer).expect(2)
    assert "newer barca" in future.envelope["error"]
    assert _history(project) == [run_id]
    assert barca(project, "state", "backups").expect(0).json["backups"] == []


def test_a_run_in_progress_holds_the_database(project: Path) -> None:
    write(project, {"p.py": PIPELINE})
    run = start_barca(project, "run", "slow", "p.py")
    try:
        poll(lambda: (project / "started").exists(), "the slow task to start")
        queue = barca(project, "queue").expect(0).json
        assert [(r["command"], r["targets"], r["pid"]) for r in queue["running"]] == [
            ("run", ["slow"], run.pid)]
        busy = barca(project, "state", "reset", "--yes").expect(3)
        assert queue["running"][0]["run_id"] in busy.envelope["error"]
        assert "barca history" in busy.envelope["remediation"]
    finally:
        (project / "go").write_text("")
        run.communicate(timeout=60)
    assert run.returncode == 0
    assert barca(project, "queue").expect(0).json["running"] == []
    barca(project, "state", "reset", "--yes").expect(0)


def test_a_server_holds_the_project_and_pauses_through_its_address(project: Path,
                                                                    serve) -> None:
    write(project, {"p.py": PIPELINE})
    barca(project, "get", "plain", "p.py").expect(0)
    barca(project, "state", "reset", "--yes").expect(0)
    server = serve(project, "p.py", "--no-schedule")

    for args in (("state", "restore"), ("state", "reset", "--yes")):
        held = barca(project, *args).expect(3)
        assert "`barca serve` is running" in held.envelope["error"], args
    local = barca(project, "queue", "pause").expect(2)
    assert "--server" in local.envelope["remediation"]
    assert barca(project, "queue").expect(0).json["served"] is True

    paused = barca(project, "queue", "pause", "--server", server.url).expect(0).json
    assert paused["paused"] is True and paused["max_runs"] >= 1
    assert server.get("/queue").json()["paused"] is True
    waiting = server.start_run({"command": "run", "targets": ["mark"]})
    # the database says it too: every run a server accepted is kept there
    here = barca(project, "queue", "--local", env={"BARCA_SERVER": server.url}).expect(0).json
    assert here["paused"] is True
    assert [(q["run_id"], q["position"], q["held"]) for q in here["queued"]] == [
        (waiting, 1, True)]
    asked = barca(project, "queue", "resume", env={"BARCA_SERVER": server.url}).expect(0)
    assert asked.json["paused"] is False and "[barca] server" in asked.stderr
    server.wait_ended(waiting)
    assert (project / "marked.log").read_text() == "mark\n"


def test_a_pause_kept_without_a_server_holds_for_the_next_one(project: Path, serve) -> None:
    write(project, {"p.py": PIPELINE})
    server = serve(project, "p.py", "--no-schedule")
    server.post("/queue/pause")
    waiting = server.start_run({"command": "run", "targets": ["mark"]})
    server.kill()  # gone without a word: its queued run stays in the database

    queue = barca(project, "queue").expect(0).json
    assert queue["paused"] is True and queue["served"] is False
    assert [(q["run_id"], q["command"], q["targets"], q["held"]) for q in queue["queued"]] == [
        (waiting, "run", ["mark"], False)]
    pretty = barca(project, "queue", "--pretty").expect(0).stdout
    assert "paused since" in pretty and waiting in pretty and "next `barca serve`" in pretty

    resumed = barca(project, "queue", "resume").expect(0).json
    assert resumed["paused"] is False
    again = barca(project, "queue", "pause").expect(0).json["paused_at"]
    assert barca(project, "queue", "pause").expect(0).json["paused_at"] == again
    barca(project, "queue", "resume").expect(0)

    server = serve(project, "p.py", "--no-schedule")
    server.wait_ended(waiting)
    assert (project / "marked.log").read_text() == "mark\n"
    assert barca(project, "queue").expect(0).json["queued"] == []
