"""`barca gc` during a run that writes results at the names a killed run left unrecorded files
(issue 26 item 5): gc must not remove what the run wrote and recorded there.

The window is made certain, not hoped for. A run killed -9 while the test holds the database's
write lock leaves complete files its coordinator could not record, at the exact names the next
run writes; they are dated an hour back (a run killed earlier in the day: files that fresh are
left alone while a run is live anyway). `barca gc` plans the current pipeline, which imports
the pipeline file; with HOLD_GC set that import waits for a marker, so gc stands still after
it has walked `artifacts/` and seen those files, while the next run replaces every one of them
(and records them, or is about to). Then gc goes on, the run still live: its last step waits
for a marker.

Each result is padded past the pack threshold, so that it is a file of its own (store.packs)
at a name the next run writes again. Small results share packs of random names: what a killed
run left there is garbage gc may remove, and the packed case checks that gc removes nothing
the live run records.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from barca.store.packs import file_of
from conftest import barca, db_rows, gone, poll, start_barca, wait_for, write

KEYS = 40

PIPELINE = """
    import os
    import time
    from pathlib import Path

    from barca import asset, collect, partitions

    HERE = Path(__file__).parent
    KEYS = [f"k{{i:02d}}" for i in range({keys})]
    PAD = "x" * {pad}

    if os.environ.get("HOLD_GC"):  # only the test's `barca gc`, which imports this to plan
        (HERE / "gc-holding").touch()
        while not (HERE / "gc-go").exists():
            time.sleep(0.01)


    @asset(partitions={{"key": partitions(KEYS)}})
    def items(key: str) -> dict:
        with open(HERE / "executed.log", "a") as log:
            log.write(f"items {{key}} {{os.getpid()}}\\n")
        return {{"v": int(key[1:]) * 3, "pad": PAD}}


    @asset(inputs={{"all": collect(items)}})
    def total(all: list) -> int:
        with open(HERE / "executed.log", "a") as log:
            log.write(f"total - {{os.getpid()}}\\n")
        (HERE / "total-started").touch()
        while not (HERE / "total-go").exists():
            time.sleep(0.01)
        return sum(item["v"] for item in all)
"""

EXPECTED = sum(i * 3 for i in range(KEYS))


def _folder(root: Path) -> Path:
    return root / ".barca" / "artifacts" / "p.py--items"


def _worker_pids(root: Path) -> set[int]:
    log = root / "executed.log"
    return {int(line.split()[2]) for line in log.read_text().splitlines()} \
        if log.exists() else set()


def _leave_unrecorded_files(root: Path) -> list[str]:
    """Kill -9 a run after its workers wrote results it could not record; the files it left
    (project-relative), dated an hour back."""
    folder = _folder(root)
    run = start_barca(root, "get", "total", "p.py", stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: _worker_pids(root) or run.poll() is not None, "a step of the run")
        assert run.poll() is None, "the run ended before it could be killed"
        db = sqlite3.connect(root / ".barca" / "metadata.db", timeout=60, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")  # from now on the run records nothing
        try:
            recorded = {p for (p,) in db.execute(
                "SELECT artifact_path FROM materializations WHERE artifact_path IS NOT NULL")}

            def unrecorded() -> list[str]:
                return [p for p in (str(f.relative_to(root)) for f in folder.iterdir())
                        if p not in recorded] if folder.exists() else []

            poll(unrecorded, "a result written and not recorded")
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        finally:
            db.execute("ROLLBACK")
            db.close()
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    workers = _worker_pids(root)  # they write what they hold, then see the run gone
    wait_for(lambda: all(gone(pid) for pid in workers), "the killed run's workers to exit")
    (root / "executed.log").unlink()
    (root / "total-started").unlink(missing_ok=True)  # the killed run may have got that far
    hour_ago = time.time() - 3600
    for path in folder.iterdir():
        os.utime(path, (hour_ago, hour_ago))
    return unrecorded()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kills are Linux-checked")
@pytest.mark.parametrize("pad", [70_000, 0], ids=["own-files", "packed"])
def test_gc_during_a_run_keeps_what_it_wrote_where_a_killed_run_left_files(project: Path,
                                                                           pad: int) -> None:
    write(project, {"p.py": PIPELINE.format(keys=KEYS, pad=pad)})
    left = _leave_unrecorded_files(project)
    assert left, "the killed run left no unrecorded file"

    gc = start_barca(project, "gc", "--json", env={"HOLD_GC": "1"})
    wait_for(lambda: (project / "gc-holding").exists() or gc.poll() is not None,
             "gc to plan the pipeline")
    assert gc.poll() is None, gc.communicate()
    run = start_barca(project, "get", "total", "p.py", "--json")
    wait_for(lambda: (project / "total-started").exists() or run.poll() is not None,
             "the run's last step")  # every key written and reported; the run goes on
    assert run.poll() is None, run.communicate()
    (project / "gc-go").touch()
    gc_out, gc_err = gc.communicate(timeout=60)
    assert gc.returncode == 0, gc_err
    (project / "total-go").touch()
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    assert json.loads(out)["final_output"] == EXPECTED

    evicted = {e["path"] for e in json.loads(gc_out)["evicted"]}
    recorded = {file_of(p) for (p,) in db_rows(
        project, "SELECT m.artifact_path FROM materializations m JOIN runs r USING (run_id) "
        "WHERE r.status = 'success' AND m.status = 'success'")}
    assert evicted & recorded == set()
    assert [p for p in recorded if not (project / p).exists()] == []
    if pad:  # the run rewrote and recorded each file the killed run left
        assert evicted & set(left) == set() and recorded >= set(left)

    again = barca(project, "get", "total", "p.py").expect(0).json
    assert again["steps_executed"] == 0
    assert again["final_output"] == EXPECTED
