"""Removing result files that no current state needs, oldest first (`barca gc`).

Kept, always: the file the latest success of every node and key points to (whether or not
the node is still in the pipeline), and every file the caller says a plan of the current
pipeline would serve from cache. Also kept: files written since a still-running `get`
started, and temporary files of live processes. Everything else under the environment's
`artifacts/` may go: superseded results, files no row names, temporary files of dead
processes. With a size limit, only as many as it takes to bring the artifacts under it. Rows
of the metadata database are never deleted; only the files.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from barca.project import Project
from barca.store import history
from barca.store.db import connect
from barca.store.owners import pid_running

_TMP = re.compile(r"^\..+\.(\d+)\.tmp$")


@dataclass(frozen=True, slots=True)
class Candidate:
    path: Path
    size: int
    mtime: float
    reason: str  # superseded | unreferenced | leftover
    node: str | None


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
    if files:
        keep = {(root / p).resolve() for p in history.current_artifacts(conn)}
        keep |= planned()
        candidates = _candidates(files, keep, conn, root, history.live_runs_started(conn))
    size = sum(s for _, s, _ in files)
    chosen = _choose(candidates, size, limit)
    failed = [] if dry_run else _remove(chosen, artifacts)
    warnings += [f"[barca] warning: cannot remove {f['path']}: {f['error']}" for f in failed]
    gone = {c.path for c in chosen} - {Path(f["path"]) for f in failed}
    evicted = [c for c in chosen if c.path in gone or dry_run]
    kept = [(p, s) for p, s, _ in files if p.resolve() in keep]
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
    size = sum(s for _, s, _ in _walk(artifacts))
    if size <= limit:
        return None
    body, warnings = collect(project, set, int(limit * TRIM_TO), dry_run=False)
    return {"size_bytes": size, "limit_bytes": limit, "evicted_files": body["evicted_files"],
            "evicted_bytes": body["evicted_bytes"], "after_bytes": body["after_bytes"]}, warnings


def _walk(artifacts: Path) -> list[tuple[Path, int, float]]:
    out = []
    for folder, dirs, names in os.walk(artifacts):
        dirs[:] = [d for d in dirs if ".moved-aside" not in d]  # a user's directory, kept
        for name in names:
            path = Path(folder) / name
            try:
                info = path.lstat()
            except OSError:
                continue
            out.append((path, info.st_size, info.st_mtime))
    return out


def _candidates(files: list[tuple[Path, int, float]], keep: set[Path], conn: Any,
                root: Path, live_since: float | None) -> list[Candidate]:
    named = {(root / p).resolve(): n for p, n in conn.execute(
        "SELECT artifact_path, min(node_id) FROM materializations "
        "WHERE artifact_path IS NOT NULL GROUP BY artifact_path")}
    out = []
    for path, size, mtime in files:
        resolved = path.resolve()
        if resolved in keep:
            continue
        tmp = _TMP.match(path.name)
        if tmp and pid_running(int(tmp.group(1))):
            continue
        if live_since is not None and mtime >= live_since - 1:
            continue  # may belong to a run that has not recorded it yet
        reason = "leftover" if tmp else ("superseded" if resolved in named else "unreferenced")
        out.append(Candidate(path, size, mtime, reason, named.get(resolved)))
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


def _remove(chosen: list[Candidate], artifacts: Path) -> list[dict[str, str]]:
    failed = []
    for candidate in chosen:
        try:
            candidate.path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            failed.append({"path": str(candidate.path), "error": str(exc)})
            continue
        folder = candidate.path.parent
        while folder != artifacts and folder.is_relative_to(artifacts):
            try:
                folder.rmdir()
            except OSError:
                break
            folder = folder.parent
    return failed


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
