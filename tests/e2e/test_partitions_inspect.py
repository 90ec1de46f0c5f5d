"""Reading partitioned runs back: `history RUN_ID`, `logs --step`, `sql` and `status`.

Each key is a step of its own in a run's history (`partition_key` `dim=value`), its output lines
can be read by key, and `sql` shows one row per current key with a leading `partition` column.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import barca, result_bytes, write

PIPELINE = """
    import json
    import sys
    from pathlib import Path
    from barca import asset, partitions_from, sensor

    @sensor()
    def retailer_versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"retailer": partitions_from(retailer_versions)})
    def cleaned(retailer: str, retailer_versions) -> dict:
        print("cleaning", retailer)
        print("warned", retailer, file=sys.stderr)
        return {"retailer": retailer, "rows": retailer_versions}

    @asset(partitions={"retailer": partitions_from(cleaned)})
    def scored(retailer: str, cleaned: dict) -> dict:
        print("scoring", retailer)
        return {**cleaned, "score": cleaned["rows"] * 10}
"""


@pytest.fixture
def ran(project: Path) -> tuple[Path, str, str]:
    """Two runs: every key, then only r2 changed. Returns (root, first run id, second)."""
    write(project, {"pipeline.py": PIPELINE})
    (project / "versions.json").write_text('{"r1": 1, "r2": 2, "r3": 3}')
    first = barca(project, "get", "scored", "pipeline.py").expect(0).json["run_id"]
    (project / "versions.json").write_text('{"r1": 1, "r2": 20, "r3": 3}')
    second = barca(project, "get", "scored", "pipeline.py").expect(0).json["run_id"]
    return project, first, second


def test_history_of_a_run_has_one_step_per_key_that_ran(ran) -> None:
    root, first, second = ran
    one = barca(root, "history", second, "--json").expect(0).json
    assert one["run"]["steps_executed"] == 3 and one["run"]["steps_cached"] == 4
    got = sorted((s["node_id"], s["partition_key"], s["status"]) for s in one["steps"])
    assert got == [("pipeline.py:cleaned", "retailer=r2", "success"),
                   ("pipeline.py:retailer_versions", None, "success"),
                   ("pipeline.py:scored", "retailer=r2", "success")]
    for step in one["steps"]:
        if step["partition_key"]:
            assert json.loads(result_bytes(root, step["artifact_path"]))["rows"] == 20
    every = barca(root, "history", first, "--json").expect(0).json
    assert len(every["steps"]) == 7
    assert every["steps_page"]["total"] == 7


def test_logs_step_reads_one_key_or_every_key_of_a_node(ran) -> None:
    root, first, _ = ran
    one = barca(root, "logs", first, "--step", "scored[retailer=r2]", "--json").expect(0).json
    assert [(e["partition_key"], e["stream"], e["line"]) for e in one] == [
        ("retailer=r2", "stdout", "scoring r2")]
    every = barca(root, "logs", first, "--step", "cleaned", "--stream", "stderr",
                  "--json").expect(0).json
    assert sorted(e["line"] for e in every) == ["warned r1", "warned r2", "warned r3"]
    assert {e["node_id"] for e in every} == {"pipeline.py:cleaned"}


def test_sql_has_a_partition_column_and_only_current_keys(ran) -> None:
    root, _, _ = ran
    query = "select partition, rows, score from scored order by partition"
    rows = barca(root, "sql", query, "pipeline.py").expect(0).json["rows"]
    assert rows == [{"partition": "retailer=r1", "rows": 1, "score": 10},
                    {"partition": "retailer=r2", "rows": 20, "score": 200},
                    {"partition": "retailer=r3", "rows": 3, "score": 30}]
    (root / "versions.json").write_text('{"r1": 1, "r3": 3}')        # r2 removed
    barca(root, "get", "scored", "pipeline.py").expect(0)
    rows = barca(root, "sql", query, "pipeline.py").expect(0).json["rows"]
    assert [r["partition"] for r in rows] == ["retailer=r1", "retailer=r3"]


def test_status_counts_keys_of_a_partitioned_node(ran) -> None:
    root, _, _ = ran
    (root / "versions.json").write_text('{"r1": 1, "r2": 20, "r3": 3, "r4": 4}')
    barca(root, "get", "cleaned", "pipeline.py").expect(0)      # scored r4 not computed yet
    status = barca(root, "status", "--json", "pipeline.py").expect(0).json
    nodes = {n["name"]: n for n in status["nodes"]}
    assert nodes["cleaned"]["cache"]["state"] == "cached"
    assert nodes["cleaned"]["partitioned"] is True
    assert nodes["scored"]["cache"]["state"] == "partial"
    parts = nodes["scored"]["partitions"]
    assert (parts["total"], parts["cached"], parts["missing"]) == (4, 3, 1)
    assert parts["missing_keys"] == ["retailer=r4"]
    assert parts["failed_keys"] == [] and parts["blocked_keys"] == []
