"""A server's spool: the directory in the system's temporary directory where its runs' stdout
goes (a partitioned target's JSON is megabytes, kept out of memory).

A server removes its own when it stops; one killed with -9 cannot, so its name says whose it
is (`barca-serve-UID-PID-START-…`: user id, process id and the kernel's start time of that
process), and each server start removes the spools of servers of the same user that no longer
run. Another user's spool, a live server's, or a name that says nothing is never touched.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import tempfile
from pathlib import Path

from barca.engine.serving import owner_gone, process_start

PREFIX = "barca-serve-"
_NAME = re.compile(re.escape(PREFIX) + r"(\d+)-(\d+)-(\d+)-")


def make_spool() -> Path:
    """This server's spool (mode 0700), after removing those dead servers left."""
    remove_dead_spools()
    pid = os.getpid()
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getuid()}-{pid}-"
                                        f"{process_start(pid) or 0}-"))


def remove_dead_spools() -> list[Path]:
    """Remove the spools of this user's servers that are gone; the paths removed."""
    removed = []
    base = Path(tempfile.gettempdir())
    try:
        names = [e.name for e in os.scandir(base) if e.name.startswith(PREFIX)]
    except OSError:
        return removed
    for name in names:
        found = _NAME.match(name)
        if found is None or int(found[1]) != os.getuid():
            continue
        path = base / name
        try:
            info = path.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue  # a symlink, or another user's: never ours to remove
        start = found[3] if found[3] != "0" else None
        if owner_gone(int(found[2]), socket.gethostname(), start):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
