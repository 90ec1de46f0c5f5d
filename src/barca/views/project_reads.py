"""What `barca serve` tells of the project it serves and of its stored history, read in the
server process from the served graph and the metadata database: `GET /project`,
`GET /materializations` and `GET /sql/views` (which file each node's `barca sql` view reads).
None of these imports a pipeline file or runs anything."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Sequence

from barca.planner.keys import key_label
from barca.store.db import Connection
from barca.store.execution_rows import newest_rows
from barca.store.history import latest_results
from barca.store.metadata import output_hashes
from barca.store.sql_views import node_sources
from barca.views.times import iso_time


def project_json(pipeline: Any, api_version: int, loaded_at: float) -> dict[str, Any]:
    """The served project: its root, environment, when its files were loaded, the git commit
    its root is at (None outside a git work tree) and each served file's sha256."""
    root = pipeline.project.root
    return {"api_version": api_version, "root": str(root), "env": pipeline.project.env,
            "deployed_at": iso_time(loaded_at), "commit": git_commit(root),
            "files": [{"path": f, "sha256": _sha256(root / f)} for f in pipeline.files]}


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:  # removed since it was loaded
        return None


def git_commit(root: Path) -> str | None:
    """The commit HEAD names in the git work tree holding `root`, read from git's files (no
    git process): a detached HEAD, a loose ref or a packed one; None when there is none."""
    for folder in (root, *root.parents):
        dot_git = folder / ".git"
        if dot_git.exists():
            break
    else:
        return None
    try:
        git_dir = dot_git
        if dot_git.is_file():  # a linked work tree: `gitdir: <path>`
            git_dir = (folder / dot_git.read_text().partition("gitdir:")[2].strip()).resolve()
        common = git_dir
        if (git_dir / "commondir").is_file():
            common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
        head = (git_dir / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head or None
        ref = head[4:].strip()
        for base in (git_dir, common):
            if (base / ref).is_file():
                return (base / ref).read_text().strip() or None
        for line in (common / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split(" ", 1)[0]
    except OSError:
        return None
    return None


def materializations_json(conn: Connection | None, limit: int, offset: int) -> dict[str, Any]:
    """The history's rows, newest first: `{materializations, total, truncated, offset}`, each
    row's key written as its label (`partition_key`), each moment RFC 3339."""
    rows, total = newest_rows(conn, limit, offset) if conn is not None else ([], 0)
    items = []
    for row in rows:
        _, bracket, label = row["step_id"].partition("[")
        items.append({**row, "partition_key": label[:-1] if bracket else None,
                      "created_at": iso_time(row["created_at"])})
    return {"materializations": items, "total": total, "offset": offset,
            "truncated": offset + len(items) < total}


def sql_views_json(conn: Connection | None, pipeline: Any, files: Sequence[str] | None,
                   stale: dict[str, bool]) -> dict[str, Any]:
    """The views `barca sql` would build over the served nodes (of `files`, or all): each
    node's name, the stored files it reads (path under the project, key label, output hash),
    whether the node is `stale` (its `barca status` state, when known), `missing` the nodes
    without a view (no result yet, or a pickle: the view's name and the node's kind, for
    the error a query that names it gets) and `duplicates` the names several nodes
    share (their views are named by full id)."""
    graph, root = pipeline.graph, pipeline.project.root
    states = latest_results(conn, graph.order) if conn is not None else {}
    sources = node_sources(graph, states, root, [])
    views, missing, names = [], [], {}
    for source in sources:
        d = graph.nodes[source.node_id]
        names.setdefault(d.name.lower(), []).append(source.node_id)
        if files is not None and d.file not in files:
            continue
        if source.problem is not None:
            missing.append({"node": source.node_id, "reason": source.problem,
                            "name": source.view, "kind": source.kind})
            continue
        state = states[source.node_id]
        digests = output_hashes(conn, source.node_id, list(zip(state.keys, state.run_hashes)))
        by_label = {key_label(d, key): key for key in state.keys} if d.dimensions else {}
        out_files = []
        for label, path, _ in source.files:
            key = by_label.get(label, "") if label is not None else ""
            out_files.append({"path": os.path.relpath(path, root), "partition": label,
                              "content_hash": digests.get(key)})
        formats = {fmt for _, _, fmt in source.files}
        single = state.run_hashes[state.find("")] if not d.dimensions and \
            state.find("") is not None else None
        views.append({"name": source.view, "node": source.node_id, "kind": source.kind,
                      "partitioned": bool(d.dimensions),
                      "format": formats.pop() if len(formats) == 1 else "mixed",
                      "files": out_files, "stale": stale.get(source.node_id),
                      "run_hash": single})
    duplicates = [{"name": name, "ids": ids} for name, ids in names.items() if len(ids) > 1]
    return {"views": views, "missing": missing, "duplicates": duplicates}

