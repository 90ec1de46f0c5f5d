"""What `barca state backups` shows, and which backup `barca state restore` means: the copies
of the metadata database a reset or a restore left beside it, newest first, numbered from 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import barca.engine.serving as serving
from barca.errors import BarcaError, UsageError
from barca.views.plan_text import human_size
from barca.views.times import iso_time, utc_time_of


def backups_json(db_path: Path) -> dict[str, Any]:
    """`{backups: [{index, name, path, kind, taken_at, size_bytes, db_format, runs, run_id,
    error}], local_dir}`: `run_id` the newest run a backup holds, `error` why it cannot be
    restored (null when it can, as far as a look without reading every page tells)."""
    rows = []
    for index, backup in enumerate(serving.backups(db_path), 1):
        try:
            held, error = serving.backup_contents(backup.path), None
        except BarcaError as exc:
            held, error = None, exc.message
        rows.append({"index": index, "name": backup.path.name, "path": str(backup.path),
                     "kind": backup.kind, "taken_at": iso_time(backup.taken_at),
                     "size_bytes": backup.size_bytes,
                     "db_format": held.db_format if held else None,
                     "runs": held.runs if held else None,
                     "run_id": held.last_run_id if held else None, "error": error})
    return {"backups": rows, "local_dir": str(db_path.parent)}


def backups_text(body: dict[str, Any]) -> str:
    if not body["backups"]:
        return (f"No backup in {body['local_dir']}: `barca state reset` and `barca state "
                "restore` leave one.")
    head = ("#", "NAME", "TAKEN (UTC)", "SIZE", "RUNS", "NEWEST RUN")
    rows = [(str(b["index"]), b["name"], utc_time_of(b["taken_at"]) or "", human_size(b["size_bytes"]),
             "" if b["runs"] is None else str(b["runs"]),
             b["run_id"] or ("" if b["error"] is None else f"unusable: {b['error']}"))
            for b in body["backups"]]
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in (head, *rows))


def chosen_backup(db_path: Path, choice: str | None) -> Path:
    """The backup `choice` names: its number in the listing (1 = newest), its file name, or a
    path; the newest without one. UsageError when there is none or it names nothing."""
    found = serving.backups(db_path)
    if choice is None:
        if not found:
            raise UsageError(f"there is no backup to restore in {db_path.parent}",
                             "`barca state reset` and `barca state restore` leave one; or "
                             "name a copy of a metadata database by its path")
        return found[0].path
    if choice.isdigit():
        if not 1 <= int(choice) <= len(found):
            raise UsageError(f"there is no backup number {choice} ({len(found)} in "
                             f"{db_path.parent})", "`barca state backups` lists them")
        return found[int(choice) - 1].path
    by_name = {b.path.name: b.path for b in found}
    path = by_name.get(choice) or Path(choice)
    if not path.is_file():
        raise UsageError(f"{choice!r} is neither a backup of {db_path.parent} nor a file",
                         "`barca state backups` lists the backups, by number and name")
    if path.resolve() == db_path.resolve():
        raise UsageError(f"{choice!r} is the database itself", "name one of its backups")
    return path

