"""`barca serve`'s queue and run ids held to what it promises (issue 26, items 4, 6, 7, 12):
a run answered 202 survives a server killed with -9 and is run by the next server (or
recorded cancelled, with the reason); dry runs wait for a slot as runs do; a run id is
never reused; a value in a request never becomes an option of the command it runs; a
killed server's spool is removed by the next one."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import httpx

from conftest import db_rows, edit, lines, poll, write
from held_runs import HOLD, SLOTS, fill_slots


def _status(server, run_id: str) -> str:
    got = server.get(f"/runs/{run_id}")
    assert got.status_code == 200, got.text
    return got.json()["run"]["status"]


def _dump(project: Path) -> list[str]:
    """The metadata database as SQL text (read-only)."""
    conn = sqlite3.connect(f"file:{project / '.barca' / 'metadata.db'}?mode=ro", uri=True)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_runs_queued_when_the_server_is_killed_run_on_the_next_server(project: Path,
                                                                      serve) -> None:
    write(project, {"p.py": HOLD})
    first = serve(project, "p.py")
    held = fill_slots(first, project)
    queued = [first.start_run({"command": "run", "targets": [name]})
              for name in ("mark", "mark", "drop_me")]
    assert [_status(first, r) for r in queued] == ["pending"] * 3
    first.kill()  # -9, with its runs: nothing can be recorded now
    (project / "go").touch()  # lets the killed runs' workers end
    edit(project / "p.py", "def drop_me()", "def dropped()")

    # a read-only server lists them as waiting, runs nothing and writes nothing
    before = _dump(project)
    viewer = serve(project, "p.py", "--read-only")
    assert [_status(viewer, r) for r in queued] == ["pending"] * 3
    assert _status(viewer, held[0]) == "interrupted"  # it was running: its row says so
    viewer.stop()
    assert _dump(project) == before
    assert not (project / "marked.log").exists()
    # they were kept before the 202, in the order accepted
    assert [r[0] for r in db_rows(project, "SELECT run_id FROM run_queue ORDER BY seq")] \
        == queued

    second = serve(project, "p.py")
    for run_id in queued[:2]:
        assert second.wait_ended(run_id)["run"]["status"] == "success"
    assert lines(project / "marked.log") == ["mark", "mark"]
    cancelled = second.wait_ended(queued[2])["run"]
    assert cancelled["status"] == "cancelled", cancelled
    assert "not run after the server restarted" in cancelled["error"], cancelled
    assert "drop_me" in cancelled["error"], cancelled
    assert [_status(second, r) for r in held] == ["interrupted"] * len(held)
    assert db_rows(project, "SELECT run_id FROM run_queue") == []
    # the new server's own runs work as before, after the ones it took over
    assert second.wait_ended(second.start_run({"command": "run", "targets": ["mark"]})
                             )["run"]["status"] == "success"


def _server_children(pid: int) -> list[int]:
    """The runs a server process started (its children running barca.cli.served_run)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"barca.cli.served_run" in argv:
            found.append(int(entry.name))
    return found


def test_a_burst_of_dry_runs_waits_for_slots_like_runs(project: Path, serve) -> None:
    write(project, {"p.py": HOLD})
    server = serve(project, "p.py")
    burst = SLOTS + 2
    answers: list[httpx.Response] = []

    def ask() -> None:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            answers.append(client.post("/runs", json={"targets": ["seen"], "dry_run": True}))

    threads = [threading.Thread(target=ask) for _ in range(burst)]
    for thread in threads:
        thread.start()
    try:
        poll(lambda: len(server.runs()) == burst, "every dry run to be admitted")
        poll(lambda: len(list(project.glob("observing.*"))) >= SLOTS,
             "a dry run per slot to observe its sensor")
        # each sensor waits for `go`: no dry run can have ended, none can start now
        assert len(_server_children(server.proc.pid)) == SLOTS
        statuses = sorted(r["status"] for r in server.runs())
        assert statuses.count("pending") == burst - SLOTS, statuses
        assert len(list(project.glob("observing.*"))) == SLOTS
    finally:
        (project / "go").touch()
        for thread in threads:
            thread.join(120)
    assert [a.status_code for a in answers] == [200] * burst, [a.text for a in answers]
    assert all(a.json()["dry_run"] is True for a in answers)
    assert len(list(project.glob("observing.*"))) == burst
    assert db_rows(project, "SELECT count(*) FROM runs") == [(0,)]  # dry runs record nothing


def test_a_request_value_that_looks_like_an_option_stays_a_value(project: Path,
                                                                 serve) -> None:
    write(project, {"p.py": HOLD})
    server = serve(project, "p.py")
    for text in ("--local", "--server", "--dry-run", "--pretty"):
        got = server.post("/runs", json={"targets": ["regional"], "partition": [text]})
        assert got.status_code == 400, (text, got.status_code, got.text)
        assert got.json()["error"] == f"--partition {text!r} is not DIM=VALUE[,VALUE]", \
            (text, got.json())
    got = server.post("/runs", json={"targets": ["regional"], "batch": ["--local"]})
    assert got.status_code == 400 and "--local" in got.json()["error"], got.text
    for partition in ({"region": "eu"}, {"region": [1]}, {"region": ["eu"], "day": None}):
        got = server.post("/runs", json={"targets": ["regional"], "partition": partition})
        assert got.status_code == 400 and "'partition'" in got.json()["error"], got.text
    assert not (project / "executed.log").exists()
    assert db_rows(project, "SELECT count(*) FROM runs") == [(0,)]


def test_a_killed_servers_spool_is_removed_by_the_next_start(project: Path, serve,
                                                             tmp_path_factory,
                                                             monkeypatch) -> None:
    temp = tmp_path_factory.mktemp("spools")
    monkeypatch.setenv("TMPDIR", str(temp))  # the servers' temporary directory
    write(project, {"p.py": HOLD})

    def spools() -> set[Path]:
        return set(temp.glob("barca-serve-*"))

    killed = serve(project, "p.py")
    (dead,) = poll(spools, "the first server's spool")
    killed.kill()
    assert dead.is_dir()

    live = serve(project, "p.py")
    (mine,) = poll(lambda: spools() - {dead}, "the second server's spool")
    assert not dead.exists()  # removed before the second server made its own
    other = serve(project, "p.py")
    poll(lambda: spools() - {dead, mine}, "the third server's spool")
    assert mine.is_dir()  # a live server's spool stays
    # named for its owner: user id, then process id (and that process's start time)
    assert mine.name.startswith(f"barca-serve-{os.getuid()}-{live.proc.pid}-"), mine.name
    live.stop()
    other.stop()
    assert spools() == set()
