"""A `.barca/` that the published barca (0.33) wrote: its database is numbered from 1 as ours
is, but holds another schema. Every command that opens it says so, exit 2, and names the fix,
and nothing in it is changed; `barca doctor` reports the same."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from conftest import barca, write

PIPELINE = """
    from barca import asset

    @asset()
    def hello() -> dict:
        return {"x": 1}
"""

# the tables of 0.33's metadata.db that tell it apart (schema as 0.33.0 creates it)
PUBLISHED_SCHEMA = """
CREATE TABLE materializations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, node_id TEXT NOT NULL, run_hash TEXT,
    output_json TEXT, artifact_path TEXT, artifact_format TEXT, artifact_size_bytes INTEGER,
    elapsed_seconds REAL, status TEXT NOT NULL DEFAULT 'success', error_message TEXT,
    error_traceback TEXT, attempts INTEGER DEFAULT 1, sinks_json TEXT,
    created_at TEXT DEFAULT (datetime('now')), cpu_seconds REAL, max_rss_bytes INTEGER,
    output_hash TEXT, run_id TEXT, error_type TEXT, batch_id TEXT);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT UNIQUE NOT NULL, command TEXT NOT NULL,
    files TEXT NOT NULL, target TEXT, status TEXT NOT NULL DEFAULT 'running',
    steps_total INTEGER, steps_executed INTEGER DEFAULT 0, steps_cached INTEGER DEFAULT 0,
    started_at TEXT DEFAULT (datetime('now')), finished_at TEXT, elapsed_seconds REAL);
CREATE TABLE server_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO runs (run_id, command, files, target, status)
    VALUES ('0ee30dde19ef', 'get', '["pipeline.py"]', 'hello', 'success');
INSERT INTO materializations (node_id, run_hash, artifact_path, run_id) VALUES
    ('pipeline.py:hello', '89d8ec034c934d6e901881f656d61afca927cb8d4fc2bdcc14af97823df85bd5',
     '.barca/artifacts/pipeline.py--hello/89d8.json', '0ee30dde19ef');
PRAGMA user_version = 1;
"""


def _published_state(project: Path) -> Path:
    (project / ".barca").mkdir()
    db = project / ".barca" / "metadata.db"
    conn = sqlite3.connect(db)
    conn.executescript(PUBLISHED_SCHEMA)
    conn.close()
    return db


def test_a_database_of_the_published_barca_is_exit_2_naming_the_fix(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    db = _published_state(project)
    before = db.read_bytes()
    for args in (("get", "hello", "pipeline.py"), ("status", "pipeline.py"), ("history",)):
        got = barca(project, *args).expect(2)
        assert "published barca (0.33" in got.envelope["error"]
        assert "mv " in got.envelope["remediation"] and "--env" in got.envelope["remediation"]
        assert "writable" not in got.envelope["remediation"]
    assert db.read_bytes() == before

    doctor = barca(project, "doctor").expect(3).json
    check = {c["name"]: c for c in doctor["checks"]}["metadata"]
    assert not check["ok"] and "published barca" in check["detail"]
    assert "mv " in check["fix"]

    (project / ".barca").rename(project / ".barca-0.33")  # the fix it names
    assert barca(project, "get", "hello", "pipeline.py").expect(0).json["final_output"] == \
        {"x": 1}
