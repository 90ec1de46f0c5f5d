"""Removing result files that no current state needs, oldest first (`barca gc`).

Kept, always: the file the latest success of every node and key points to (whether or not
the node is still in the pipeline), and every file the caller says a plan of the current
pipeline would serve from cache. Also kept: files written since a still-running `get`
started, and temporary files of live processes. Everything else under the environment's
`artifacts/` may go: superseded results, files no row names, temporary files of dead
processes. With a size limit, only as many as it takes to bring the artifacts under it. Rows
of the metadata database are never deleted; only the files.

What a run does meanwhile is looked at again right before each file goes, under the
database's write lock, so that no run can take a step or record one in between: a killed run
leaves complete but unrecorded files at the very names a later run of the same steps writes,
and the walk's view of them is stale by then. A file stays when a row recorded since gc
looked names it, when a live run holds the lease of its step (node and run hash: it is
writing it, and records it before giving the lease back), or when the name now holds another
file than the walk saw (written since). While a run is live, emptied directories stay: its
workers may be creating files in them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from barca.project import Project
from barca.store import history, step_leases
from barca.store.db import connect, write_transaction
from barca.store.owners import owner_gone, pid_running
from barca.store.packs import file_of
from barca.store.paths import node_dir_name

_TMP = re.compile(r"^\..+\.(\d+)\.tmp$")


@dataclass(frozen=True, slots=True)
class Candidate:
    path: Path
    size: int
    mtime: float
    reason: str  # superseded | unreferenced | leftover
    node: str | None
    stamp: tuple[int, int]  # (inode, mtime in ns) the walk saw: another file is not this one


Seen = tuple[Path, int, float, tuple[int, int]]  # path, size, mtime, stamp


def collect(project: Project, planned: Callable[[], set[Path]], limit: int | None,
            dry_run: bool, spare_for: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """What was (or, dry, would be) removed, as the JSON body of `barca gc`, and warnings.
    `planned()`: the resolved paths a plan of the current pipeline would serve from cache.
    `spare_for`: the id of the run trimming after itself; superseded results then stay
    while another run is live or has just ended (`_others_active`): such a run may have
    planned to serve one from cache, or be about to print it."""
    root, artifacts = project.root, project.artifacts_dir
    warnings: list[str] = []
    files = _walk(artifacts) if artifacts.is_dir() else []
    conn = connect(project.db_path, create=False) if files else None
    if files and conn is None:
        warnings.append("barca: no metadata database here, so no result can be told current; "
                        "nothing removed")
        files = []
    keep: set[Path] = set()
    candidates: list[Candidate] = []
    looked = 0
    if files:
        looked = _last_recorded(conn)  # before the current results: later rows are re-read
        keep = {(root / p).resolve() for p in history.current_artifacts(conn)}
        keep |= planned()
        candidates = _candidates(files, keep, conn, root, history.live_runs_started(conn))
    spared = 0
    if spare_for is not None and candidates and _others_active(conn, spare_for):
        spared = sum(c.reason == "superseded" for c in candidates)
        candidates = [c for c in candidates if c.reason != "superseded"]
    size = sum(s for _, s, _, _ in files)
    chosen = _choose(candidates, size, limit)
    gone, failed = (set(), []) if dry_run else _remove(chosen, project, conn, looked,
                                                       spare_for)
    warnings += [f"[barca] warning: cannot remove {f['path']}: {f['error']}" for f in failed]
    evicted = [c for c in chosen if c.path in gone or dry_run]
    kept = [(p, s) for p, s, _, _ in files if p.resolve() in keep]
    return {"dry_run": dry_run, "size_bytes": size, "limit_bytes": limit,
            "after_bytes": size - sum(c.size for c in evicted),
            "evicted": [{"path": _rel(c.path, root), "bytes": c.size, "reason": c.reason,
                         "node": c.node} for c in evicted],
            "evicted_files": len(evicted), "evicted_bytes": sum(c.size for c in evicted),
            "kept_files": len(kept), "kept_bytes": sum(s for _, s in kept),
            **({"spared_files": spared} if spare_for is not None else {}),
            "failed": [{"path": _rel(Path(f["path"]), root), "error": f["error"]}
                       for f in failed]}, warnings


TRIM_TO = 0.8  # after a run over [cache] max_size, down to this share of it: not every run
RECENT_SECONDS = 10.0  # a run that ended this recently may still be printing its results
WALK_EVERY = 600.0  # seconds between walks under the default limit while far below it


def trim(project: Project, limit: int, keep: Callable[[], set[Path]], run_id: str,
         lazy: bool = False) -> tuple[dict[str, Any], list[str]] | None:
    """After run `run_id`: None while the artifacts fit in `limit`, else remove what
    `barca gc` would, oldest first, down to TRIM_TO of the limit, and say so:
    `{size_bytes, limit_bytes, evicted_files, evicted_bytes, after_bytes, evicted_by_reason,
    spared_files}` and warnings. Kept besides what gc keeps: `keep()`, the files the run
    computed or served (it prints them next), and superseded results while another run is
    live or has just ended. The walk is skipped when the whole filesystem holds less than
    the limit; `lazy` (the default limit, a safety net rather than a budget): also within
    WALK_EVERY of a walk that found less than half of it."""
    artifacts = project.artifacts_dir
    if not artifacts.is_dir() or _filesystem_used(artifacts) <= limit:
        return None
    measured = project.state_dir / "cache-size.json"
    if lazy and _measured_lately(measured, limit / 2):
        return None
    size = sum(s for _, s, _, _ in _walk(artifacts))
    _remember_size(measured, size)
    if size <= limit:
        return None
    body, warnings = collect(project, keep, int(limit * TRIM_TO), dry_run=False,
                             spare_for=run_id)
    reasons: dict[str, int] = {}
    for item in body["evicted"]:
        reasons[item["reason"]] = reasons.get(item["reason"], 0) + 1
    _remember_size(measured, body["after_bytes"])
    return {"size_bytes": size, "limit_bytes": limit, "evicted_files": body["evicted_files"],
            "evicted_bytes": body["evicted_bytes"], "after_bytes": body["after_bytes"],
            "evicted_by_reason": reasons, "spared_files": body["spared_files"]}, warnings


def _others_active(conn: Any, run_id: str) -> bool:
    """Whether a run other than `run_id` is live, or ended less than RECENT_SECONDS ago in a
    process that still runs (it may be reading its results to print them)."""
    rows = conn.execute("SELECT pid, host, proc_start FROM runs WHERE run_id != ? AND "
                        "(status = 'running' OR finished_at > ?)",
                        (run_id, time.time() - RECENT_SECONDS)).fetchall()
    return any(not owner_gone(pid, host, start) for pid, host, start in rows)


def _filesystem_used(path: Path) -> int:
    return shutil.disk_usage(path).used


def _measured_lately(measured: Path, below: float) -> bool:
    try:
        data = json.loads(measured.read_text())
        return time.time() - float(data["walked_at"]) < WALK_EVERY and data["bytes"] < below
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _remember_size(measured: Path, size: int) -> None:
    tmp = measured.with_name(f".{measured.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps({"walked_at": time.time(), "bytes": size}))
        os.replace(tmp, measured)
    except OSError:
        pass  # only a walk more next time


def _walk(artifacts: Path) -> list[Seen]:
    out = []
    for folder, dirs, names in os.walk(artifacts):
        dirs[:] = [d for d in dirs if ".moved-aside" not in d]  # a user's directory, kept
        for name in names:
            path = Path(folder) / name
            try:
                info = path.lstat()
            except OSError:
                continue
            out.append((path, _on_disk(info), info.st_mtime, (info.st_ino, info.st_mtime_ns)))
    return out


def _on_disk(info: os.stat_result) -> int:
    """The disk space a file takes, as `du` counts it (its allocated blocks): 400,000 small
    files take 1.6 GB, not the 35 MB their bytes add up to."""
    return info.st_blocks * 512 if hasattr(info, "st_blocks") else info.st_size


def _last_recorded(conn: Any) -> int:
    return conn.execute("SELECT coalesce(max(id), 0) FROM materializations").fetchone()[0]


def _candidates(files: list[Seen], keep: set[Path], conn: Any,
                root: Path, live_since: float | None) -> list[Candidate]:
    named = {(root / file_of(p)).resolve(): n for p, n in conn.execute(
        "SELECT artifact_path, min(node_id) FROM materializations "
        "WHERE artifact_path IS NOT NULL GROUP BY artifact_path")}
    out = []
    for path, size, mtime, stamp in files:
        resolved = path.resolve()
        if resolved in keep:
            continue
        tmp = _TMP.match(path.name)
        if tmp and pid_running(int(tmp.group(1))):
            continue
        if live_since is not None and mtime >= live_since - 1:
            continue  # may belong to a run that has not recorded it yet
        reason = "leftover" if tmp else ("superseded" if resolved in named else "unreferenced")
        out.append(Candidate(path, size, mtime, reason, named.get(resolved), stamp))
    return sorted(out, key=lambda c: (c.mtime, str(c.path)))


def _choose(candidates: list[Candidate], size: int, limit: int | None) -> list[Candidate]:
    if limit is None:
        return candidates
    chosen = []
    for candidate in candidates:
        if size <= limit:
            break
        chosen.append(candidate)
        size -= candidate.size
    return chosen


REMOVE_BATCH = 2000  # files removed per hold of the write lock: runs wait for it meanwhile


def _remove(chosen: list[Candidate], project: Project, conn: Any, looked: int,
            spare_for: str | None = None) -> tuple[set[Path], list[dict[str, str]]]:
    """Remove the chosen files that no run took meanwhile (see the module's docstring), each
    batch under the write lock; the paths removed and the failures."""
    artifacts = project.artifacts_dir
    gone: set[Path] = set()
    failed = []
    for start in range(0, len(chosen), REMOVE_BATCH):
        with write_transaction(conn):
            taken = _taken(conn, project.root, artifacts, looked)
            runs_live = history.live_runs_started(conn) is not None
            spare = spare_for is not None and _others_active(conn, spare_for)
            for candidate in chosen[start:start + REMOVE_BATCH]:
                if taken(candidate) or spare and candidate.reason == "superseded":
                    continue
                try:
                    candidate.path.unlink()
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    failed.append({"path": str(candidate.path), "error": str(exc)})
                    continue
                gone.add(candidate.path)
                if not runs_live:
                    _remove_empty_folders(candidate.path.parent, artifacts)
    return gone, failed


def _taken(conn: Any, root: Path, artifacts: Path, looked: int) -> Callable[[Candidate], bool]:
    """Whether a run has taken a candidate since gc looked: recorded it (a row after id
    `looked` names it), holds the lease of its step, or wrote another file under its name."""
    recorded = {(root / file_of(p)).resolve() for (p,) in conn.execute(
        "SELECT artifact_path FROM materializations WHERE id > ? AND artifact_path IS NOT NULL",
        (looked,))}
    leased = {(node_dir_name(*_file_and_name(node_id)), run_hash)
              for node_id, run_hash in step_leases.live_steps(conn)}

    def taken(candidate: Candidate) -> bool:
        path = candidate.path
        if recorded and path.resolve() in recorded:
            return True
        # `<node dir>/[<key>.]<run hash>.<ext>` (barca.store.paths)
        parts = path.name.rsplit(".", 2)
        if leased and len(parts) > 1 and \
                (path.parent.relative_to(artifacts).as_posix(), parts[-2]) in leased:
            return True
        try:
            info = path.lstat()
        except FileNotFoundError:
            return True  # gone already: nothing to remove
        return (info.st_ino, info.st_mtime_ns) != candidate.stamp

    return taken


def _file_and_name(node_id: str) -> tuple[str, str]:
    file, _, name = node_id.rpartition(":")
    return file, name


def _remove_empty_folders(folder: Path, artifacts: Path) -> None:
    while folder != artifacts and folder.is_relative_to(artifacts):
        try:
            folder.rmdir()
        except OSError:
            break
        folder = folder.parent


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
