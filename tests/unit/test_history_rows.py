"""The run history's rows (store.history_table) come back through the `materializations` view
exactly as they were recorded, in the order recorded, whatever mix of empty columns they have:
rows of different shapes are inserted by different statements, and digests travel as blobs."""

from __future__ import annotations

import sqlite3

from barca.store import history_table

RUN = "0f" * 16
ARTIFACTS = ".barca/artifacts"


def row(key: str, status: str = "success", batch: str | None = None,
        error: str | None = None, node: str = "p.py:cleaned") -> tuple:
    ok = status == "success"
    return (RUN, node, key, f"{node}[k={key}]", "ab" * 32, "cd" * 32, b'["x"]', status,
            f"{ARTIFACTS}/p/cleaned/pack@1:20" if ok else None, "json" if ok else None,
            20 if ok else None, "ef" * 32 if ok else None, 0.25, 1,
            None if ok else "ValueError", error, None if ok else "Traceback ...",
            None if batch else 1024, 1700000000.5, batch, None, 0.125)


def test_rows_of_every_shape_come_back_as_recorded_in_their_order(tmp_path):
    conn = sqlite3.connect(tmp_path / "metadata.db", isolation_level=None)
    conn.executescript(history_table.DDL)
    rows = [row("a"), row("b"), row("c", "failed", error="no good"), row("d"),
            row("e", batch="b1"), row("f", batch="b1"), row("g", node="p.py:scored"),
            (RUN, "p.py:whole", "", "p.py:whole", "12" * 32, "not hex", None, "success",
             "elsewhere/file.json", "json", 3, None, 0.5, 2, None, None, None, None, 1.0,
             None, "code 3", None)]
    conn.execute("BEGIN")
    history_table.insert(conn, rows[:5], ARTIFACTS)
    history_table.insert(conn, rows[5:], ARTIFACTS)
    conn.execute("COMMIT")
    back = conn.execute(f"SELECT id, {', '.join(history_table.COLUMNS)} FROM materializations "
                        "ORDER BY id").fetchall()
    assert [r[0] for r in back] == list(range(1, len(rows) + 1))
    assert [r[1:] for r in back] == rows
    stored = conn.execute("SELECT typeof(run_ref), typeof(run_hash), typeof(signature), "
                          "typeof(context) FROM executions WHERE key = 'a'").fetchone()
    assert stored == ("blob", "blob", "blob", "blob")  # half the size of their text
