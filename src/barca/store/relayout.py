"""Moving the results of a project made by a barca whose schema was 4 or earlier, once, when
its database is upgraded: those kept a directory per key
(`<file>--<node>_<dim>_<key>/<run_hash>.<ext>`); results now share one directory per node
(`<file>--<node>/<dim>_<key>.<run_hash>.<ext>`), which is where planning looks for them.

Each recorded file is renamed and its rows rewritten in the upgrade's transaction. An upgrade
cut off halfway leaves the rows as they were and is done again by the next command: a file
already moved is skipped. A key whose directory name was cut for length (it ends in `~` and a
digest) is left where it is; its result is computed again when a run needs it.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

from barca.errors import InfraError


def move_key_directories(conn: sqlite3.Connection, db_path: Path) -> None:
    """Move every recorded result still in a key directory."""
    root = project_root(db_path)
    moves = [(old, new) for node_id, old in conn.execute(
        "SELECT DISTINCT node_id, artifact_path FROM materializations "
        "WHERE artifact_path IS NOT NULL") if (new := _new_path(node_id, old)) is not None]
    if not moves:
        return
    logging.getLogger("barca").warning(
        "[barca] moving %d results to one directory per node (once, as this barca upgrades "
        "the project)", len(moves))
    emptied, made = set(), set()
    for old, new in moves:
        source, target = root / old, root / new
        try:
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.add(target.parent)
            os.rename(source, target)
        except FileNotFoundError:  # moved by an upgrade cut off before, or removed by gc
            pass
        except OSError as exc:  # the upgrade's transaction is rolled back: rows stay as they were
            raise InfraError(f"cannot move {old} to {new} while moving results to one "
                             f"directory per node: {exc}",
                             "make .barca/artifacts writable and move away what is in the "
                             "way, then rerun (the move resumes where it stopped)") from exc
        emptied.add(source.parent)
    conn.executemany("UPDATE materializations SET artifact_path = ? WHERE artifact_path = ?",
                     [(new, old) for old, new in moves])
    for folder in emptied:
        try:
            folder.rmdir()
        except OSError:  # not empty: files no row names stay for gc
            pass


def _new_path(node_id: str, old: str) -> str | None:
    """`.barca/artifacts/p.py--scored_retailer_r3/<hash>.json` ->
    `.barca/artifacts/p.py--scored/retailer_r3.<hash>.json`; None when it needs no move."""
    file, _, name = node_id.rpartition(":")
    base = f"{file}--{name}".rpartition("/")[2]
    folder, _, filename = old.rpartition("/")
    parent, _, leaf = folder.rpartition("/")
    if not leaf.startswith(base + "_") or "~" in leaf[len(base):]:
        return None  # unpartitioned (already where it belongs) or cut for length
    return f"{parent}/{base}/{leaf[len(base) + 1:]}.{filename}"


def project_root(db_path: Path) -> Path:
    """The directory holding `.barca/` (rows name files relative to it)."""
    for folder in db_path.parents:
        if folder.name == ".barca":
            return folder.parent
    return db_path.parent.parent
