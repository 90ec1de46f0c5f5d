"""Per-node state snapshots: stored in chunks of keys, rewritten only where a key changed.

A keyed source with more keys than one chunk (barca.packed_columns.CHUNK) runs through the real CLI;
the tests read `node_state_chunk` from the project's SQLite file to see what a tick rewrote,
and check that a snapshot barca cannot use (an older schema, damaged bytes) is rebuilt from
the recorded materializations without rerunning anything.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from barca.packed_columns import CHUNK
from barca.store.db import SCHEMA_VERSION
from conftest import as_schema_10, barca, write

PIPELINE = """
import json
from pathlib import Path
from barca import asset, partitions_from, sensor


@sensor()
def versions() -> dict:
    return json.loads(Path("versions.json").read_text())


@asset(partitions={"k": partitions_from(versions)})
def cleaned(k: str, versions: int) -> int:
    return versions


@asset(partitions={"k": partitions_from(cleaned)})
def scored(k: str, cleaned: int) -> int:
    return cleaned * 10
"""

N = CHUNK + 100  # two chunks per column


def key(i: int) -> str:
    return f"k{i:05d}"


def set_versions(root: Path, changes: dict[str, int] | None = None,
                 extra: dict[str, int] | None = None) -> None:
    versions = {key(i): 1 for i in range(N)}
    versions.update(changes or {})
    versions.update(extra or {})
    (root / "versions.json").write_text(json.dumps(versions))


def stored_chunks(root: Path) -> dict[tuple[str, str, int], bytes]:
    conn = sqlite3.connect(f"file:{root / '.barca' / 'metadata.db'}?mode=ro", uri=True)
    try:
        return {(n.split(":")[1], p, c): d for n, p, c, d in conn.execute(
            "SELECT node_id, part, chunk, data FROM node_state_chunk")}
    finally:
        conn.close()


def executed(result) -> dict[str, int]:
    return {node: step.get("partitions", {}).get("will_run", 0)
            for node, step in result.steps.items() if node != "versions"}


@pytest.fixture
def big(project: Path) -> Path:
    write(project, {"pipeline.py": PIPELINE})
    set_versions(project)
    first = barca(project, "get", "scored", "pipeline.py").expect(0)
    assert first.json["steps_executed"] == 1 + 2 * N
    return project


def watch_chunk_writes(root: Path) -> None:
    """A trigger that notes every chunk row barca writes from now on (read by `written`)."""
    conn = sqlite3.connect(root / ".barca" / "metadata.db")
    try:
        conn.executescript("""
            CREATE TABLE written (node_id TEXT, part TEXT, chunk INTEGER);
            CREATE TRIGGER note_write AFTER INSERT ON node_state_chunk BEGIN
                INSERT INTO written VALUES (new.node_id, new.part, new.chunk);
            END;
        """)
    finally:
        conn.close()


def written(root: Path) -> list[tuple[str, str, int]]:
    conn = sqlite3.connect(f"file:{root / '.barca' / 'metadata.db'}?mode=ro", uri=True)
    try:
        return sorted((n.split(":")[1], p, c) for n, p, c in conn.execute(
            "SELECT node_id, part, chunk FROM written"))
    finally:
        conn.close()


def test_a_tick_that_changes_one_key_rewrites_only_that_keys_chunk(big: Path) -> None:
    before = stored_chunks(big)
    assert {(node, part) for node, part, _ in before} >= {
        ("cleaned", "keys"), ("cleaned", "run_hash"), ("cleaned", "sig0"),
        ("scored", "keys"), ("scored", "run_hash"), ("scored", "sig0")}
    assert max(c for _, _, c in before) == 1
    watch_chunk_writes(big)

    set_versions(big, {key(CHUNK + 3): 2})
    tick = barca(big, "get", "scored", "pipeline.py").expect(0)
    assert executed(tick) == {"cleaned": 1, "scored": 1}
    assert tick.steps["cleaned"]["partitions"]["will_run_keys"] == [f"k={key(CHUNK + 3)}"]
    # the key's own chunk of its run hash, of what its hash is made of (the value, the
    # upstream run hash) and of where its result is packed, and the sensor's output digest;
    # the keys are untouched
    assert written(big) == [("cleaned", "run_hash", 1), ("cleaned", "sig0", 1),
                            ("cleaned", "where", 1), ("scored", "run_hash", 1),
                            ("scored", "sig0", 1), ("scored", "where", 1),
                            ("versions", "output_hash", 0)]
    assert stored_chunks(big).keys() == before.keys()

    again = barca(big, "get", "scored", "pipeline.py").expect(0)
    assert again.json["steps_executed"] == 1
    assert len(written(big)) == 7  # nothing changed, nothing written
    one = barca(big, "get", "scored", "pipeline.py", "--partition", f"k={key(CHUNK + 3)}")
    assert one.expect(0).json["final_output"] == {f"k={key(CHUNK + 3)}": 20}


def test_a_key_inserted_in_the_first_chunk_runs_only_that_key(big: Path) -> None:
    set_versions(big, extra={"k00000a": 7})  # sorts second: every later key shifts
    tick = barca(big, "get", "scored", "pipeline.py", "--json", "-o", "value").expect(0)
    assert executed(tick) == {"cleaned": 1, "scored": 1}
    assert tick.steps["scored"]["partitions"]["will_run_keys"] == ["k=k00000a"]
    assert tick.json["final_output"]["k=k00000a"] == 70
    assert len(tick.json["final_output"]) == N + 1
    assert barca(big, "get", "scored", "pipeline.py").expect(0).json["steps_executed"] == 1


def _downgrade_to_schema_1(root: Path) -> None:
    """What barca before chunked snapshots left: one node_state row per node, version 1."""
    as_schema_10(root)
    conn = sqlite3.connect(root / ".barca" / "metadata.db")
    try:
        conn.executescript("""
            DROP TABLE node_state_chunk;
            DROP TABLE key_source_chunk;
            DROP TABLE node_state;
            CREATE TABLE node_state (node_id TEXT PRIMARY KEY, watermark INTEGER NOT NULL,
                                     data BLOB NOT NULL);
            INSERT INTO node_state VALUES ('pipeline.py:cleaned', 1, x'00000004deadbeef');
            PRAGMA user_version = 1;
        """)
    finally:
        conn.close()


def test_a_schema_1_database_is_upgraded_and_its_snapshots_rebuilt(big: Path) -> None:
    _downgrade_to_schema_1(big)
    doctor = barca(big, "doctor")
    metadata = next(c for c in doctor.json["checks"] if c["name"] == "metadata")
    assert metadata["ok"] and f"upgrades it to version {SCHEMA_VERSION}" in metadata["detail"]

    got = barca(big, "get", "scored", "pipeline.py").expect(0)
    assert got.json["steps_executed"] == 1  # the sensor: every key still cached
    assert {n for n, _, _ in stored_chunks(big)} == {"versions", "cleaned", "scored"}
    set_versions(big, {key(5): 3})
    tick = barca(big, "get", "scored", "pipeline.py").expect(0)
    assert executed(tick) == {"cleaned": 1, "scored": 1}


def source_rows(root: Path) -> dict[tuple[str, int], tuple[int, bytes, bytes]]:
    """The sensor's stored chunks: (part, chunk) -> (rowid, digest, data)."""
    conn = sqlite3.connect(f"file:{root / '.barca' / 'metadata.db'}?mode=ro", uri=True)
    try:
        return {(p, c): (r, g, d) for r, p, c, g, d in conn.execute(
            "SELECT rowid, part, chunk, digest, data FROM key_source_chunk")}
    finally:
        conn.close()


def _damage(root: Path, sql: str) -> None:
    conn = sqlite3.connect(root / ".barca" / "metadata.db")
    try:
        conn.execute(sql)
        conn.commit()
    finally:
        conn.close()


def test_the_sensors_keys_and_values_are_stored_and_a_tick_rewrites_the_chunk_that_changed(
        big: Path) -> None:
    before = source_rows(big)
    assert sorted(before) == [("keys", 0), ("keys", 1), ("values", 0), ("values", 1)]
    assert json.loads(before[("keys", 1)][2])[:2] == [key(CHUNK), key(CHUNK + 1)]
    set_versions(big, {key(CHUNK + 3): 7})
    tick = barca(big, "get", "scored", "pipeline.py").expect(0)
    assert executed(tick) == {"cleaned": 1, "scored": 1}
    after = source_rows(big)
    rewritten = {part for part in after if after[part][0] != before[part][0]}
    assert rewritten == {("values", 1)}
    assert json.loads(after[("values", 1)][2])[3] == 7
    assert barca(big, "get", "scored", "pipeline.py").expect(0).json["steps_executed"] == 1
    assert source_rows(big) == after  # nothing changed: nothing written


def test_a_stored_chunk_that_does_not_match_its_digest_is_not_used(big: Path) -> None:
    """The step leaves out the chunks whose digest matches what is stored; if the stored bytes
    are damaged, the coordinator reads the sensor's file instead of using them."""
    _damage(big, "UPDATE key_source_chunk SET data = CAST('[\"bad\"]' AS BLOB) "
                 "WHERE part = 'values' AND chunk = 0")
    set_versions(big, {key(CHUNK + 3): 7})
    tick = barca(big, "get", "scored", "pipeline.py").expect(0)
    assert executed(tick) == {"cleaned": 1, "scored": 1}
    assert tick.steps["scored"]["partitions"]["will_run_keys"] == [f"k={key(CHUNK + 3)}"]
    assert json.loads(source_rows(big)[("values", 0)][2]) == [1] * CHUNK  # written again
    # a wrong digest makes the step send that chunk again, which repairs the row
    _damage(big, "UPDATE key_source_chunk SET digest = zeroblob(16) WHERE part = 'keys'")
    set_versions(big, {key(CHUNK + 3): 7, key(1): 5})
    tick = barca(big, "get", "scored", "pipeline.py").expect(0)
    assert tick.steps["scored"]["partitions"]["will_run_keys"] == [f"k={key(1)}"]
    rows = source_rows(big)
    assert rows[("keys", 0)][1] != bytes(16) and json.loads(rows[("values", 0)][2])[1] == 5


def test_the_stored_sensor_chunks_follow_a_source_that_shrinks_below_a_chunk_and_grows_back(
        big: Path) -> None:
    (big / "versions.json").write_text(json.dumps({key(i): 1 for i in range(CHUNK - 50)}))
    shrunk = barca(big, "get", "scored", "pipeline.py", "--json", "-o", "value").expect(0)
    assert shrunk.json["steps_executed"] == 1
    assert len(shrunk.json["final_output"]) == CHUNK - 50
    assert sorted(source_rows(big)) == [("keys", 0), ("values", 0)]
    set_versions(big, {key(CHUNK + 50): 2})  # back, with one value changed
    grown = barca(big, "get", "scored", "pipeline.py").expect(0)
    assert grown.steps["scored"]["partitions"]["will_run_keys"] == [f"k={key(CHUNK + 50)}"]
    rows = source_rows(big)
    assert sorted(rows) == [("keys", 0), ("keys", 1), ("values", 0), ("values", 1)]
    assert json.loads(rows[("keys", 1)][2])[-1] == key(N - 1)


def test_a_schema_2_database_gets_the_sensor_chunk_table(big: Path) -> None:
    as_schema_10(big)
    _damage(big, "DROP TABLE key_source_chunk")
    _damage(big, "PRAGMA user_version = 2")
    set_versions(big, {key(2): 4})
    tick = barca(big, "get", "scored", "pipeline.py").expect(0)
    assert tick.steps["scored"]["partitions"]["will_run_keys"] == [f"k={key(2)}"]
    assert len(source_rows(big)) == 4


def test_a_damaged_snapshot_is_rebuilt_from_the_recorded_results(big: Path) -> None:
    conn = sqlite3.connect(big / ".barca" / "metadata.db")
    try:
        conn.execute("UPDATE node_state SET data = x'7b6e' WHERE node_id = 'pipeline.py:cleaned'")
        conn.execute("DELETE FROM node_state_chunk WHERE node_id = 'pipeline.py:scored' "
                     "AND part = 'run_hash' AND chunk = 1")
        conn.commit()
    finally:
        conn.close()
    got = barca(big, "get", "scored", "pipeline.py", "--json", "-o", "value").expect(0)
    assert got.json["steps_executed"] == 1
    assert len(got.json["final_output"]) == N
    assert ("scored", "run_hash", 1) in stored_chunks(big)  # written again, whole


def test_a_key_back_at_an_older_value_is_served_from_history_and_its_chunk_rewritten(
        big: Path) -> None:
    changed = key(CHUNK + 9)
    set_versions(big, {changed: 2})
    assert executed(barca(big, "get", "scored", "pipeline.py").expect(0)) == {
        "cleaned": 1, "scored": 1}
    watch_chunk_writes(big)

    set_versions(big)  # back to 1: its earlier results are still on record
    back = barca(big, "get", "scored", "pipeline.py").expect(0)
    assert back.json["steps_executed"] == 1  # the sensor; the key comes from history
    assert ("cleaned", "run_hash", 1) in written(big)
    assert ("scored", "run_hash", 1) in written(big)

    again = barca(big, "get", "scored", "pipeline.py").expect(0)
    assert again.json["steps_executed"] == 1
    assert executed(again) == {"cleaned": 0, "scored": 0}
    one = barca(big, "get", "scored", "pipeline.py", "--partition", f"k={changed}")
    assert one.expect(0).json["final_output"] == {f"k={changed}": 10}
