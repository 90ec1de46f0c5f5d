"""`barca gc`: remove result files that no current state needs, oldest first.

Kept, always: the file the latest success of every node and key points to (whether or not
the node is still in the pipeline), and every file a plan of the current pipeline would
serve from cache (an older result the current code hashes to again). Also kept: files
written since a still-running `get` started, and temporary files of live processes.
Everything else under the environment's `artifacts/` may go: superseded results, files no
row names, temporary files of dead processes. With `--max-size`, only as many as it takes to
bring the artifacts under that size. Rows of the metadata database are never deleted; only
the files.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from barca.cli import render
from barca.cli.output import choose_mode, emit, emit_json, note
from barca.errors import BarcaError, UsageError
from barca.project import Project, open_project
from barca.store import history as store
from barca.store.db import connect

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_TMP = re.compile(r"^\..+\.(\d+)\.tmp$")

HELP = """Remove stored results that no current state needs, oldest first.

\b
Never removes the latest result of any node and key, nor one the current code would be served
from cache. With --max-size, removes only until the artifacts fit in SIZE (e.g. 500MB, 2GiB).
\b
Examples:
  barca gc --dry-run
  barca gc
  barca gc --max-size 2GB --env staging
"""


@dataclass(frozen=True, slots=True)
class Candidate:
    path: Path
    size: int
    mtime: float
    reason: str  # superseded | unreferenced | leftover
    node: str | None


@click.command("gc", help=HELP)
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@click.option("--max-size", metavar="SIZE", help="Remove only until the artifacts take at "
              "most SIZE (bytes, or KB/MB/GB/TB, KiB/MiB/GiB/TiB).")
@click.option("--json", "json_flag", is_flag=True, help="JSON output (default when stdout is "
              "not a terminal).")
@click.option("--pretty", is_flag=True, help="Human output (default in a terminal).")
@click.option("--env", "env_name", metavar="NAME", help="Collect in environment NAME (or set "
              "BARCA_ENV).")
def gc_command(dry_run, max_size, json_flag, pretty, env_name) -> None:
    mode = choose_mode(json_flag, pretty)
    limit = parse_size(max_size) if max_size is not None else None
    project = open_project(env_name)
    body = collect(project, env_name, limit, dry_run)
    if mode == "json":
        emit_json(body, indent=True)
    else:
        emit(_report(body))


def parse_size(text: str) -> int:
    """`500MB` -> 500000000, `2GiB` -> 2147483648, `1024` -> 1024.

    >>> parse_size("1.5KB")
    1500
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*", text, re.IGNORECASE)
    if not match:
        raise UsageError(f"--max-size {text!r} is not a size",
                         "write a size such as 500MB, 2GiB or 1000000 (bytes)")
    return int(float(match.group(1)) * _UNITS[(match.group(2) or "").lower()])


def collect(project: Project, env_name: str | None, limit: int | None, dry_run: bool
            ) -> dict[str, Any]:
    root, artifacts = project.root, project.artifacts_dir
    files = _walk(artifacts) if artifacts.is_dir() else []
    conn = connect(project.db_path, create=False) if files else None
    if files and conn is None:
        note("barca: no metadata database here, so no result can be told current; "
             "nothing removed")
        files = []
    keep: set[Path] = set()
    candidates: list[Candidate] = []
    if files:
        keep = {(root / p).resolve() for p in store.current_artifacts(conn)}
        keep |= _planned(env_name)
        candidates = _candidates(files, keep, conn, root, store.live_runs_started(conn))
    size = sum(s for _, s, _ in files)
    chosen = _choose(candidates, size, limit)
    failed = [] if dry_run else _remove(chosen, artifacts)
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
                       for f in failed]}


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


def _planned(env_name: str | None) -> set[Path]:
    """Files the current pipeline would be served from (what `barca status` calls cached)."""
    from barca.engine.driver import run

    try:
        result = run("get", None, [], dry_run=True, env=env_name, observe_sensors=False)
    except BarcaError as exc:
        note(f"barca: could not plan the pipeline ({exc.message}); keeping only the latest "
             "result of every node and key")
        return set()
    keep = set()
    for node_id in result.order:
        plan = result.plans[node_id]
        if plan.unknown:
            continue
        ran = {plan.keys[i] for i in plan.run}
        for key in plan.keys:
            found = None if key in ran else result.artifact_of(node_id, key)
            if found:
                keep.add(found[0].resolve())
    return keep


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
        if tmp and _alive(int(tmp.group(1))):
            continue
        if live_since is not None and mtime >= live_since - 1:
            continue  # may belong to a run that has not recorded it yet
        reason = "leftover" if tmp else ("superseded" if resolved in named else "unreferenced")
        out.append(Candidate(path, size, mtime, reason, named.get(resolved)))
    return sorted(out, key=lambda c: (c.mtime, str(c.path)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


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
            note(f"[barca] warning: cannot remove {candidate.path}: {exc}")
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


def _report(body: dict[str, Any]) -> str:
    size = render.human_size

    def files(n: int, what: str) -> str:
        return f"{n} {what}{'s' if n != 1 else ''}"

    removed = f"{files(body['evicted_files'], 'file')} ({size(body['evicted_bytes'])})"
    kept = f"kept {files(body['kept_files'], 'current result')} ({size(body['kept_bytes'])})"
    if body["dry_run"]:
        lines = [f"Would remove {removed}, oldest first; {kept}."]
        lines += [f"  {c['path']} ({size(c['bytes'])}, {c['reason']})" for c in body["evicted"]]
    else:
        lines = [f"Removed {removed}; {kept}."]
    if body["limit_bytes"] is not None and body["after_bytes"] > body["limit_bytes"]:
        lines.append(f"Still {size(body['after_bytes'])}, over --max-size "
                     f"{size(body['limit_bytes'])}: the rest are current results, never removed.")
    return "\n".join(lines)
