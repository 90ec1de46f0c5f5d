"""A results pack that cannot be written (store.packs): the run fails with exit 3 naming the
store and the error, and records nothing whose bytes are not there; once the disk is mended,
the next run completes with the right values.

The failure is a step's doing, on the local store, and works as root: key k01 puts a file
where its node's results directory is (`<dir>/<pack>` is then not a directory, whoever
writes), so the pack holding k00's and k01's results cannot be written. Key k02 then holds
the only worker, without reporting anything itself, so the pack is first tried by the
worker's timer flush. A worker that lost that pack and went on would report k00 and k01
anyway: k02 mends the directory after a while (a full disk freed) and the run goes on to
record them, their pack never written.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import barca, db_rows, result_bytes, run_statuses, write

KEYS = 40
EXPECTED = sum(i * 3 for i in range(KEYS))

PIPELINE = """
    import os
    import time
    from pathlib import Path

    from barca import asset, collect, partitions

    HERE = Path(__file__).parent
    KEYS = [f"k{{i:02d}}" for i in range({keys})]
    FOLDER = HERE / ".barca" / "artifacts" / "p.py--values"
    ASIDE = HERE / "values-aside"


    def mend():
        if FOLDER.is_file():
            FOLDER.unlink()
            if ASIDE.exists():
                ASIDE.rename(FOLDER)


    @asset(partitions={{"key": partitions(KEYS)}})
    def values(key: str) -> dict:
        with open(HERE / "executed.log", "a") as log:
            log.write(f"{{key}} {{os.getpid()}}\\n")
        if key == "k01" and not (HERE / "broken-once").exists():
            (HERE / "broken-once").touch()
            if FOLDER.exists():
                FOLDER.rename(ASIDE)
            FOLDER.write_text("not a directory: no result can be written under it")
        if key == "k02" and FOLDER.is_file():
            # the run stops this worker once its pack fails; one that goes on finds the
            # disk mended after a while
            until = time.monotonic() + 20
            while time.monotonic() < until:
                time.sleep(0.05)
            mend()
        return {{"v": int(key[1:]) * 3}}


    @asset(inputs={{"all": collect(values)}})
    def total(all: list) -> int:
        return sum(item["v"] for item in all)
"""


def _readable(root: Path) -> int:
    """Every result recorded as a success can be read (a packed one's pack is there); their
    number."""
    recorded = db_rows(root, "SELECT artifact_path FROM materializations "
                             "WHERE status = 'success' AND artifact_path IS NOT NULL")
    for (path,) in recorded:
        try:
            result_bytes(root, path)
        except OSError as exc:
            raise AssertionError(f"recorded {path} cannot be read: {exc}") from None
    return len(recorded)


def _mend(root: Path) -> None:
    folder = root / ".barca" / "artifacts" / "p.py--values"
    if folder.is_file():
        folder.unlink()
        if (root / "values-aside").exists():
            shutil.move(root / "values-aside", folder)


def test_a_pack_that_cannot_be_written_fails_the_run_and_records_nothing_unreadable(
        project: Path) -> None:
    write(project, {"p.py": PIPELINE.format(keys=KEYS)})
    failed = barca(project, "get", "total", "p.py", env={"BARCA_POOL_SIZE": "1"},
                   timeout=120)
    assert failed.code == 3, (failed.stdout, failed.stderr)
    error = failed.envelope["error"]
    assert error.startswith("the artifact store failed to write the results pack "), error
    assert "p.py--values/" in error and "NotADirectoryError" in error, error
    # stopped, not a lost worker started again: every step ran in the one worker
    workers = {line.split()[1] for line in (project / "executed.log").read_text().splitlines()}
    assert len(workers) == 1, workers
    assert run_statuses(project) == ["failed"]
    _mend(project)
    _readable(project)

    again = barca(project, "get", "total", "p.py", env={"BARCA_POOL_SIZE": "1"},
                  timeout=120).expect(0).json
    assert again["final_output"] == EXPECTED
    assert _readable(project) == KEYS + 1
