"""An index the shared store cannot take (store.remote_store `share`): the run fails with
exit 3 naming the store, its row still ends (`failed`, not `running` for ever), nothing it
did not index is recorded, and once the store is mended the next run completes.

A step breaks the index on purpose, with a shared directory as the store (`file://`): key
k01 puts a file where its node's index directory goes, so the coordinator's index write of
the results the worker reported cannot be made, whoever writes.
"""

from __future__ import annotations

from pathlib import Path

from conftest import barca, db_rows, run_statuses, write

KEYS = 40
EXPECTED = sum(i * 3 for i in range(KEYS))

PIPELINE = """
    from pathlib import Path

    from barca import asset, collect, partitions

    INDEX = Path(__file__).parent / "store" / "default" / "index" / "p.py--values"


    @asset(partitions={{"key": partitions([f"k{{i:02d}}" for i in range({keys})])}})
    def values(key: str) -> dict:
        if key == "k01" and not INDEX.exists():
            INDEX.parent.mkdir(parents=True, exist_ok=True)
            INDEX.write_text("not a directory: no index object can be written under it")
        return {{"v": int(key[1:]) * 3}}


    @asset(inputs={{"all": collect(values)}})
    def total(all: list) -> int:
        return sum(item["v"] for item in all)
"""


def test_an_index_the_store_cannot_take_fails_the_run_and_its_row_ends(project: Path) -> None:
    store = project / "store"
    env = {"BARCA_REMOTE_URI": f"file://{store}", "BARCA_REMOTE_RETRY_SECONDS": "0",
           "BARCA_POOL_SIZE": "1"}
    write(project, {"p.py": PIPELINE.format(keys=KEYS)})
    failed = barca(project, "get", "total", "p.py", env=env, timeout=120)
    assert failed.code == 3, (failed.stdout, failed.stderr)
    assert "warning" not in failed.stderr, failed.stderr
    assert "index results of p.py--values" in failed.envelope["error"], failed.envelope
    assert run_statuses(project) == ["failed"]
    recorded = db_rows(project, "SELECT count(*) FROM materializations WHERE node_id = "
                                "'p.py:values' AND status = 'success'")
    assert recorded == [(0,)]

    (store / "default" / "index" / "p.py--values").unlink()
    again = barca(project, "get", "total", "p.py", env=env, timeout=120).expect(0).json
    assert again["final_output"] == EXPECTED
    assert run_statuses(project)[-1] == "success"
