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

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from barca.project import Project
from barca.store import history, step_leases
from barca.store.db import connect, write_transaction
from barca.store.owners import pid_running
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
            dry_run: bool) -> tuple[dict[str, Any], list[str]]:
    """What was (or, dry, would be) removed, as the JSON body of `barca gc`, and warnings.
    `planned()`: the resolved paths a plan of the current pipeline would serve from cache."""
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
    size = sum(s for _, s, _, _ in files)
    chosen = _choose(candidates, size, limit)
    gone, failed = (set(), []) if dry_run else _remove(chosen, project, conn, looked)
    warnings += [f"[barca] warning: cannot remove {f['path']}: {f['error']}" for f in failed]
    evicted = [c for c in chosen if c.path in gone or dry_run]
    kept = [(p, s) for p, s, _, _ in files if p.resolve() in keep]
    return {"dry_run": dry_run, "size_bytes": size, "limit_bytes": limit,
            "after_bytes": size - sum(c.size for c in evicted),
            "evicted": [{"path": _rel(c.path, root), "bytes": c.size, "reason": c.reason,
                         "node": c.node} for c in evicted],
            "evicted_files": len(evicted), "evicted_bytes": sum(c.size for c in evicted),
            "kept_files": len(kept), "kept_bytes": sum(s for _, s in kept),
            "failed": [{"path": _rel(Path(f["path"]), root), "error": f["error"]}
                       for f in failed]}, warnings


TRIM_TO = 0.8  # after a run over [cache] max_size, down to this share of it: not every run


def trim(project: Project, limit: int) -> tuple[dict[str, Any], list[str]] | None:
    """After a run, with `[cache] max_size`: None while the artifacts fit in `limit`, else
    remove what `barca gc` would, oldest first, down to TRIM_TO of the limit, and say so:
    `{size_bytes, limit_bytes, evicted_files, evicted_bytes, after_bytes}` and warnings.
    The run's own results are current, so they stay."""
    artifacts = project.artifacts_dir
    if not artifacts.is_dir():
        return None
    size = sum(s for _, s, _, _ in _walk(artifacts))
    if size <= limit:
        return None
    body, warnings = collect(project, set, int(limit * TRIM_TO), dry_run=False)
    return {"size_bytes": size, "limit_bytes": limit, "evicted_files": body["evicted_files"],
            "evicted_bytes": body["evicted_bytes"], "after_bytes": body["after_bytes"]}, warnings


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


def _remove(chosen: list[Candidate], project: Project, conn: Any, looked: int
            ) -> tuple[set[Path], list[dict[str, str]]]:
    """Remove the chosen files that no run took meanwhile (see the module's docstring), each
    batch under the write lock; the paths removed and the failures."""
    artifacts = project.artifacts_dir
    gone: set[Path] = set()
    failed = []
    for start in range(0, len(chosen), REMOVE_BATCH):
        with write_transaction(conn):
            taken = _taken(conn, project.root, artifacts, looked)
            runs_live = history.live_runs_started(conn) is not None
            for candidate in chosen[start:start + REMOVE_BATCH]:
                if taken(candidate):
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
