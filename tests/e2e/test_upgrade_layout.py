"""A project made by a barca that kept a directory per partition key (schema 4 and earlier)
is moved to one directory per node by the first command of this one: every result stays
cached and reads back intact, even when an earlier upgrade was cut off halfway. (Those
barcas wrote every result to a file of its own: the results here are padded past the pack
threshold, so that this barca writes them so too, store.packs.)"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from barca.store.db import SCHEMA_VERSION
from conftest import as_schema_10, barca, take_executed, write

PIPELINE = """
    from barca import asset, collect, partitions

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset(partitions={"k": partitions(["a", "b/c", "d"])})
    def load(k: str) -> dict:
        _ran("load " + k)
        return {"k": k, "pad": "x" * 70_000}

    @asset(partitions={"k": partitions(["a", "b/c", "d"])}, inputs={"load": load})
    def score(k: str, load: dict) -> dict:
        _ran("score " + k)
        return {"k": k, "load": load["k"], "pad": load["pad"]}

    @asset(inputs={"score": collect(score)})
    def total(score: list) -> int:
        _ran("total")
        return len(score)
"""


def _as_schema_4(project: Path) -> list[tuple[str, str]]:
    """Move every result back into a directory per key, as barca with schema 4 laid it out,
    and rewrite the rows to match; returns (old, new) root-relative paths."""
    as_schema_10(project)
    conn = sqlite3.connect(project / ".barca" / "metadata.db")
    moved = []
    with conn:
        for node_id, path in conn.execute("SELECT DISTINCT node_id, artifact_path "
                                          "FROM materializations").fetchall():
            folder, _, filename = path.rpartition("/")
            if "." not in filename.removesuffix(".json"):
                continue  # unpartitioned: the same either way
            stem, _, rest = filename.partition(".")
            old = f"{folder}_{stem}/{rest}"
            (project / old).parent.mkdir(parents=True)
            (project / path).rename(project / old)
            conn.execute("UPDATE materializations SET artifact_path = ? WHERE artifact_path = ?",
                         (old, path))
            moved.append((old, path))
        conn.execute("PRAGMA user_version = 4")
    conn.close()
    return moved


def test_results_in_key_directories_move_to_their_node_directory_and_stay_cached(
        project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    first = barca(project, "get", "total", "pipeline.py").expect(0)
    assert first.json["final_output"] == 3
    take_executed(project)
    moved = _as_schema_4(project)
    assert len(moved) == 6
    assert (project / ".barca/artifacts/pipeline.py--load_k_b%2Fc").is_dir()

    # an upgrade cut off after moving one file: that file is where the new layout puts it
    old, new = moved[0]
    (project / new).parent.mkdir(exist_ok=True)
    (project / old).rename(project / new)

    again = barca(project, "get", "total", "pipeline.py").expect(0)
    assert "moving 6 results to one directory per node" in again.stderr
    assert again.json["steps_executed"] == 0 and take_executed(project) == []
    for old, new in moved:
        assert not (project / old).exists() and not (project / old).parent.exists()
        assert json.loads((project / new).read_bytes())["k"] in ("a", "b/c", "d")
    assert sorted(p.name for p in (project / ".barca/artifacts").iterdir()) == [
        "pipeline.py--load", "pipeline.py--score", "pipeline.py--total"]

    got = barca(project, "get", "score", "pipeline.py", "--partition", "k=b/c").expect(0)
    assert got.json["final_output"] == {"k=b/c": {"k": "b/c", "load": "b/c", "pad": "x" * 70_000}}
    history = barca(project, "history", first.json["run_id"], "--json").expect(0).json
    paths = [s["artifact_path"] for s in history["steps"] if s.get("artifact_path")]
    assert paths and all((project / p).is_file() for p in paths)
    assert barca(project, "status", "pipeline.py").stderr.count("moving") == 0


def test_a_move_that_cannot_be_made_is_exit_3_and_resumes_once_the_way_is_clear(
        project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    barca(project, "get", "total", "pipeline.py").expect(0)
    take_executed(project)
    _as_schema_4(project)
    squatter = project / ".barca/artifacts/pipeline.py--load"  # a file where the node's
    squatter.rmdir()                                           # directory must go
    squatter.write_text("in the way")

    stuck = barca(project, "get", "total", "pipeline.py").expect(3)
    assert "pipeline.py--load" in stuck.envelope["error"]
    assert "move away" in stuck.envelope["remediation"]
    conn = sqlite3.connect(project / ".barca" / "metadata.db")
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 4  # rolled back
    finally:
        conn.close()

    squatter.unlink()
    again = barca(project, "get", "total", "pipeline.py").expect(0)
    assert again.json["steps_executed"] == 0 and take_executed(project) == []


def test_a_schema_6_database_has_its_results_indexed_by_key_and_keeps_its_cache(
        project: Path) -> None:
    """Schema 6 indexed results by run hash; the upgrade rebuilds the index by key, and older
    results are still found by (key, run hash): code changed and changed back runs nothing."""
    write(project, {"pipeline.py": PIPELINE})
    barca(project, "get", "total", "pipeline.py").expect(0)
    edited = PIPELINE.replace('"pad": load["pad"]}', '"pad": load["pad"], "v": 2}')
    assert edited != PIPELINE
    write(project, {"pipeline.py": edited})
    barca(project, "get", "total", "pipeline.py").expect(0)
    take_executed(project)
    as_schema_10(project)
    conn = sqlite3.connect(project / ".barca" / "metadata.db")
    with conn:  # the index as schema 6 had it
        conn.execute("DROP INDEX mat_by_key")
        conn.execute("CREATE INDEX mat_by_hash ON materializations (node_id, run_hash, key)")
        conn.execute("PRAGMA user_version = 6")
    conn.close()
    write(project, {"pipeline.py": PIPELINE})  # back to the first code: its results are found
    got = barca(project, "get", "total", "pipeline.py").expect(0)
    assert got.json["final_output"] == 3
    assert take_executed(project) == []
    conn = sqlite3.connect(project / ".barca" / "metadata.db")
    try:
        indexes = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index'")}
        plan = " ".join(str(row) for row in conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM materializations WHERE node_id = 'n' AND "
            "key = 'k' AND run_hash = 'h'"))
    finally:
        conn.close()
    assert "executions_by_key" in indexes and "mat_by_hash" not in indexes
    assert "executions_by_key (node_no=? AND key=?)" in plan


def test_a_schema_10_history_is_compacted_in_place_and_reads_as_before(project: Path) -> None:
    """Schema 10 kept each executed step as a row of text; the upgrade moves the rows into
    `executions` under their ids and the `materializations` view shows them unchanged, so
    history, stats and the cache read what they read before, in fewer bytes."""
    write(project, {"pipeline.py": PIPELINE})
    first = barca(project, "get", "total", "pipeline.py").expect(0).json
    take_executed(project)
    db = project / ".barca" / "metadata.db"
    conn = sqlite3.connect(db)
    before = [row[:23] for row in conn.execute("SELECT * FROM materializations ORDER BY id")]
    conn.close()
    history = barca(project, "history", first["run_id"]).expect(0).json
    stats = barca(project, "stats", "score", "pipeline.py").expect(0).json
    as_schema_10(project)
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT type FROM sqlite_master WHERE name = 'materializations'"
                            ).fetchone() == ("table",)
        text_bytes = conn.execute("SELECT sum(length(run_id) + length(node_id) + "
                                  "length(step_id) + length(run_hash) + "
                                  "length(artifact_path)) FROM materializations").fetchone()[0]
    finally:
        conn.close()

    again = barca(project, "get", "total", "pipeline.py").expect(0).json
    assert again["final_output"] == first["final_output"] and take_executed(project) == []
    assert barca(project, "history", first["run_id"]).expect(0).json == history
    assert barca(project, "stats", "score", "pipeline.py").expect(0).json == stats
    conn = sqlite3.connect(db)
    try:
        after = conn.execute("SELECT * FROM materializations WHERE id <= ? ORDER BY id",
                             (before[-1][0],)).fetchall()
        stored_bytes = conn.execute("SELECT sum(length(run_ref) + 1 + coalesce(length(label), "
                                    "0) + length(run_hash) + length(artifact) ) FROM "
                                    "executions WHERE id <= ?", (before[-1][0],)).fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()
    assert version == SCHEMA_VERSION
    assert [row[:23] for row in after] == before
    assert stored_bytes < text_bytes / 2
