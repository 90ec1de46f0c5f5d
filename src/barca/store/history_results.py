"""History queries about results: which artifact each node's stored state points to (what
`barca sql` reads and `barca gc` keeps), which one a given run left for a key, and the
digests a byte check compares.
"""

from __future__ import annotations

import sqlite3
from typing import Sequence

from barca.store.packs import file_of
from barca.store.history_rows import Latest


def result_of_run(conn: sqlite3.Connection, run_id: str, node_id: str, key: str = ""
                  ) -> tuple[str, str] | None:
    """(artifact path as recorded, format) of the result a run left for a node's key: the
    one it wrote, or the newest earlier one it served from cache."""
    run = conn.execute("SELECT coalesce(finished_at, started_at) FROM runs WHERE run_id = ?",
                       (run_id,)).fetchone()
    if run is None:
        return None
    row = conn.execute("SELECT artifact_path, format FROM materializations WHERE node_id = ? "
                       "AND key = ? AND status = 'success' AND artifact_path IS NOT NULL AND "
                       "(run_id = ? OR created_at <= ?) ORDER BY run_id = ? DESC, id DESC "
                       "LIMIT 1", (node_id, key, run_id, run[0], run_id)).fetchone()
    return (row[0], row[1]) if row else None


def latest_results(conn: sqlite3.Connection | None, node_ids: Sequence[str]
                   ) -> dict[str, Latest]:
    """Per node, the results its stored state points to (nodes without one are left out)."""
    from barca.store.metadata import load_states

    states, _ = load_states(conn, node_ids)
    out = {}
    for node_id, state in states.items():
        n = len(state)
        if not n:
            continue
        keys = tuple(state.keys)
        hashes = tuple(state.run_hash)
        recorded = _recorded_paths(conn, node_id)
        out[node_id] = Latest(keys, hashes, tuple(state.fmt_at(i) for i in range(n)),
                              tuple(recorded.get(pair) for pair in zip(keys, hashes)))
    return out


def _recorded_paths(conn: sqlite3.Connection, node_id: str) -> dict[tuple[str, str], str]:
    rows = conn.execute("SELECT key, run_hash, artifact_path FROM materializations "
                        "WHERE node_id = ? AND status = 'success' AND artifact_path IS NOT NULL",
                        (node_id,))
    return {(key, run_hash): path for key, run_hash, path in rows}


def current_artifacts(conn: sqlite3.Connection) -> set[str]:
    """Artifact paths (as recorded) that the latest success of some node and key points to;
    for a packed result its pack's (store.packs): a pack is kept while any key is in it."""
    node_ids = [r[0] for r in conn.execute(
        "SELECT node_id FROM node_state UNION SELECT DISTINCT node_id FROM materializations")]
    return {file_of(path) for latest in latest_results(conn, node_ids).values()
            for path in latest.paths if path}


def output_hashes(conn: sqlite3.Connection, node_id: str, run_hash: str, key: str,
                  n: int = 2) -> list[str | None]:
    """The bytes' digests of the newest `n` successes of a key at one run hash, newest first
    (a byte check compares a recompute with the result it replaced)."""
    return [row[0] for row in conn.execute(
        "SELECT output_hash FROM materializations WHERE node_id = ? AND run_hash = ? AND "
        "key = ? AND status = 'success' ORDER BY id DESC LIMIT ?", (node_id, run_hash, key, n))]
