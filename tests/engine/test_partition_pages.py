"""The pages of a partitioned node's keys (store.partition_pages) over a real metadata
database written by real runs: the first page, answered from indexes alone, is the same
answer the table of last attempts gives, failures and their groups included."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from barca.store.partition_pages import PartitionPages
from conftest import write
from engine_runs import Engine, engine  # noqa: F401 - the fixture

PIPELINE = """
    import json
    from pathlib import Path
    from barca import asset, partitions

    FAIL = json.loads(Path("fail.json").read_text())  # key -> message, for this run

    @asset(partitions={"k": partitions([f"k{i:02d}" for i in range(30)])})
    def item(k: str) -> int:
        if k in FAIL:
            raise ValueError(FAIL[k])
        return int(k[1:])
"""


def run(engine: Engine, fail: dict[str, str], code: int) -> None:
    write(engine.root, {"fail.json": json.dumps(fail)})
    engine.get("item", "pipeline.py", refresh="item").expect(code)


def pages(root: Path) -> PartitionPages:
    return PartitionPages(lambda: sqlite3.connect(root / ".barca" / "metadata.db"))


def test_the_first_page_from_indexes_is_the_page_the_table_of_last_attempts_gives(
        engine: Engine) -> None:
    write(engine.root, {"pipeline.py": PIPELINE})
    run(engine, {}, 0)
    run(engine, {"k03": "no data\nline two", "k07": "no data", "k11": "boom"}, 1)
    run(engine, {"k03": "no data", "k20": "no data\nother", "k21": "late", "k22": "late",
                 "k23": "no data"}, 1)  # k07 and k11 recover; k03 fails again
    node = "pipeline.py:item"
    quick = pages(engine.root)
    table = pages(engine.root)
    table.page(node, status="failed")  # builds the table of last attempts: later pages read it
    assert node not in quick.built and node in table.built
    for offset, limit in ((0, 100), (0, 10), (10, 10), (25, 10)):
        first = quick.page(node, offset=offset, limit=limit)
        assert first == table.page(node, offset=offset, limit=limit), (offset, limit)
        assert node not in quick.built  # answered without the table
    first = quick.page(node)
    assert (first["total"], first["failed"], first["matched"]) == (30, 5, 30)
    assert [(g["error"], g["count"], g["sample_keys"]) for g in first["failures"]] == [
        ("no data", 3, ["k03", "k20", "k23"]), ("late", 2, ["k21", "k22"])]
    statuses = {k["key"]: k["status"] for k in first["keys"]}
    assert statuses["k07"] == statuses["k11"] == "success" and statuses["k03"] == "failed"
