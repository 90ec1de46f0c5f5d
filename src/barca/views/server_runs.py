"""Runs as the server's pages show them: the run row of `GET /runs` and `GET /runs/{id}`, one
run's steps (20 a node), per-node counts and last log lines, a run's logs and results.

The server's run row differs from `barca history --json`'s (`views.history.run_json`) in
fields (its moments are written alike, `views.times.iso_time`); each shape is built by one
function, kept as it is until a documented change makes them one.
"""

from __future__ import annotations

import collections
import copy
import threading
from pathlib import Path
from typing import Any

import barca.store.history as history
from barca.discover.model import Definition
from barca.planner.keys import dimension_names, key_of_label
from barca.store.db import Connection
from barca.store.local_files import read_range
from barca.store.packs import split_range
from barca.views.failure_groups import run_failure_groups
from barca.views.history import partition_key
from barca.views.times import iso_time

# a live run's status words that run rows say otherwise (the server's pages show the rows')
LIVE_STATUS_WORDS = {"complete": "success"}


def run_status_word(live_status: str) -> str:
    """A live run's status (`pending`, `running`, `complete`, `failed`, `cancelled`) as run
    rows say it (`complete` is `success`)."""
    return LIVE_STATUS_WORDS.get(live_status, live_status)


def served_run_json(row: history.RunRow) -> dict[str, Any]:
    """A run as the server lists it (`id` repeats `run_id` for older clients)."""
    return {"id": row.run_id, "run_id": row.run_id, "command": row.command,
            "files": list(row.files), "target": row.target, "status": row.status,
            "triggered_by": row.triggered_by, "started_at": iso_time(row.started_at),
            "finished_at": iso_time(row.finished_at), "elapsed_seconds": row.elapsed_seconds,
            "steps_total": row.steps_total, "steps_executed": row.steps_executed or 0,
            "steps_cached": row.steps_cached or 0, "error": row.error}


def unrecorded_run_json(run_id: str, command: str, targets: tuple[str, ...], status: str,
                        triggered_by: str, started_at: float, finished_at: float | None
                        ) -> dict[str, Any]:
    """A run this server holds that has no row yet (waiting for a slot, or starting), as
    `served_run_json` shows rows: no files, steps or time spent yet."""
    return served_run_json(history.RunRow(
        run_id=run_id, command=command, files=(), target=",".join(targets) or None,
        status=run_status_word(status), steps_total=None, steps_executed=0, steps_cached=0,
        started_at=started_at, finished_at=finished_at, elapsed_seconds=None,
        failed_node=None, error=None, triggered_by=triggered_by, job=None, schedule_id=None,
        scheduled_at=None, started=False))


def list_runs(conn: Connection | None, limit: int, offset: int,
              live: list[str]) -> tuple[list[dict], int, list[str]]:
    """A page of recorded runs, newest first, after the `live` runs not recorded yet (which
    come first); the total of both; those unrecorded ids."""
    if conn is None:
        return [], len(live), live
    recorded = history.recorded_runs(conn, live)
    unrecorded = [i for i in live if i not in recorded]
    rows = history.list_runs(conn, limit, offset=max(0, offset - len(unrecorded)))
    return ([served_run_json(r) for r in rows], history.count_runs(conn) + len(unrecorded),
            unrecorded)


FINISHED_KEPT = 64  # details of ended runs kept (they no longer change)
_finished: collections.OrderedDict[str, dict] = collections.OrderedDict()
_finished_lock = threading.Lock()  # requests read on several threads


def run_detail(conn: Connection | None, run_id: str) -> dict | None:
    """A run's row, its steps (20 a node; a step's `key` is its label, null for an
    unpartitioned node), per-node counts, last 200 log lines and the failures among those
    steps grouped (`views.failure_groups`). A 200,000 key run takes seconds to sum up: an
    ended run's is kept."""
    with _finished_lock:
        if run_id in _finished:
            _finished.move_to_end(run_id)
            return copy.deepcopy(_finished[run_id])
    row = history.get_run(conn, run_id) if conn is not None else None
    if row is None:
        return None
    summaries = history.node_summaries(conn, run_id)
    steps = [{"node_id": s.node_id, "step_id": s.step_id, "key": partition_key(s),
              "status": s.status, "elapsed_seconds": s.elapsed_seconds,
              "error": s.error_message}
             for s in history.step_sample(conn, run_id, [n.node_id for n in summaries], 20)]
    nodes = [{"node_id": n.node_id, "keys": n.keys, "failed": n.failed,
              "elapsed_seconds": round(n.elapsed_seconds, 6), "calls": n.calls}
             for n in summaries]
    logs = [_log_json(line) for line in history.last_logs(conn, run_id, 200)]
    detail = {"run": served_run_json(row), "steps": steps, "nodes": nodes, "logs": logs,
              "failure_groups": run_failure_groups(steps)}
    if row.status != "running":
        with _finished_lock:
            _finished[run_id] = copy.deepcopy(detail)
            while len(_finished) > FINISHED_KEPT:
                _finished.popitem(last=False)
    return detail


def unrecorded_run_detail(run: dict[str, Any]) -> dict[str, Any]:
    """`run_detail` of a run with no row yet (`unrecorded_run_json`)."""
    return {"run": run, "steps": [], "nodes": [], "logs": [], "failure_groups": []}


def run_logs(conn: Connection | None, run_id: str) -> list[dict]:
    return [_log_json(line) for line in history.run_logs(conn, run_id)] if conn else []


def _log_json(line: history.LogRow) -> dict[str, Any]:
    return {"node_id": line.step_id, "seq": line.seq, "stream": line.stream, "line": line.line}


def key_named(node: Definition, text: str) -> str:
    """The key a client names (`?key=`): by its label, as every answer writes it
    (`retailer=r1`, `day=d1,region=eu`), or by the key's value."""
    return key_of_label(dimension_names(node), text) or text


def result_of_run(conn: Connection | None, run_id: str, node_id: str,
                  key: str) -> tuple[str, str] | None:
    """(path under the project, format) of what the run left for `node_id` at `key`."""
    return history.result_of_run(conn, run_id, node_id, key) if conn is not None else None


def packed_bytes(root: Path, path: str) -> bytes | None:
    """The bytes of a packed result (store.packs) at `path` under the project, read from its
    pack, which must be under `.barca/`; None when `path` is a file of its own, or gone."""
    file, offset, length = split_range(path)
    if offset is None:
        return None
    full = (root / file).resolve()
    if not full.is_relative_to((root / ".barca").resolve()):
        return None
    try:
        return read_range(full, offset, length)
    except OSError:
        return None


def matching_runs(conn: Connection | None, text: str) -> list[str]:
    """The recorded run ids that `text` names (an id, or a unique prefix of one)."""
    return history.match_runs(conn, text) if conn is not None else []
