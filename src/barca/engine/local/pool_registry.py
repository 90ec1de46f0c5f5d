"""Where warm pools live, and which are running: the user's private state directory and each
pool's files in it (as `Path`s; the rules are `pool_address`'s), listing them (`barca pool`),
stopping them, and the per-user bound.

Each pool holds an exclusive lock on `<identity>.lock` for its whole life; the file says
which project it serves (JSON: pid, root, start time, idle seconds) and its modification time
is when it last served a request. A pool is live while the pid in its lock file runs the pool
program (checked in /proc, so that a reused pid is never taken for a pool).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from pathlib import Path
from typing import NamedTuple

from barca.engine.local import pool_address

# The pool's process is the launcher's (barca.cli.warm_launcher): it serves the fork server's
# requests and can also run whole commands. Started by name, never imported.
POOL_PROCESS = "barca.cli.warm_launcher"
# "PID START": the `barca serve` whose runs a pool serves (set by the server for itself and
# the commands it runs). Such a pool waits for runs as long as that server lives, and no
# longer: a server killed with -9 cannot stop it, so it stops itself.
SERVED_BY = "BARCA_SERVED_BY"
SPARE_NAME = "barca-spare"  # a spare's process name while it waits (forked_child)


def served_by_me() -> str:
    """The SERVED_BY value naming this process (its pid and kernel start time)."""
    from barca.store.owners import process_start

    return f"{os.getpid()} {process_start(os.getpid()) or ''}".strip()


def open_server(text: str | None) -> tuple[int, int] | None:
    """(pid, pidfd) of the server a SERVED_BY value names, if it still runs; None if the
    text names nothing, or a server gone (or its pid since reused: the start time differs)."""
    from barca.store.owners import process_start

    pid_text, _, start = (text or "").partition(" ")
    if not pid_text.isdigit():
        return None
    pid = int(pid_text)
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    if start and process_start(pid) != start:
        os.close(fd)
        return None
    return pid, fd


def state_dir() -> Path | None:
    """The user's private directory for warm pool sockets (`pool_address.state_dir`)."""
    found = pool_address.state_dir()
    return None if found is None else Path(found)


def paths(directory: Path, key: str) -> tuple[Path, Path]:
    """The socket and the lock file of the pool with this identity (`pool_address.paths`)."""
    sock, lock = pool_address.paths(str(directory), key)
    return Path(sock), Path(lock)


def copies_path(lock_path: str | Path) -> Path:
    """Beside a pool's lock file, the pages its last command wrote (`page_copies`)."""
    return Path(lock_path).with_suffix(".pages")


def project_paths(directory: Path, root: Path) -> tuple[Path, Path]:
    """The project's owner file, naming its newest pool (an older one, say of an environment
    since changed, sees it is no longer named and exits, so a project keeps at most one), and
    the modules its workers imported, kept for the next pool."""
    stem = directory / hashlib.blake2b(os.path.realpath(root).encode(),
                                       digest_size=12).hexdigest()
    return stem.with_suffix(".owner"), stem.with_suffix(".imports")


class PoolInfo(NamedTuple):
    pid: int
    root: str
    started: float
    last_used: float  # when it last served a request (epoch seconds)
    idle_seconds: float  # how long it waits for the next one
    rss_bytes: int | None
    stopped: bool  # SIGSTOPped (or traced): it answers nobody until continued
    lock_path: Path


def describe(root: Path, idle_seconds: float) -> str:
    """The lock file's text for this pool."""
    return json.dumps({"pid": os.getpid(), "root": os.path.realpath(root),
                       "started": time.time(), "idle_seconds": idle_seconds})


def read(lock_path: str | Path) -> PoolInfo | None:
    """The pool holding this lock file, if it is running."""
    lock_path = Path(lock_path)
    try:
        info = json.loads(lock_path.read_text())
        pid, root = int(info["pid"]), str(info["root"])
        used = lock_path.stat().st_mtime
        if POOL_PROCESS.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return None
        status = Path(f"/proc/{pid}/status").read_text()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss = fields.get("VmRSS", "").split()
    return PoolInfo(pid, root, float(info.get("started", 0)), used,
                    float(info.get("idle_seconds", 0)),
                    int(rss[0]) * 1024 if rss and rss[0].isdigit() else None,
                    fields.get("State", "").strip()[:1] in ("T", "t"), lock_path)


def spare_bytes(pid: int) -> int:
    """What pool `pid`'s waiting spares hold that no other process shares (engine.local.
    warm_heap; 0 where /proc cannot tell). Read for `barca pool` only: each spare's page
    tables are walked."""
    total = 0
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0
    for child in children:
        try:
            if Path(f"/proc/{child}/comm").read_text().strip() != SPARE_NAME:
                continue
            rollup = Path(f"/proc/{child}/smaps_rollup").read_text()
        except OSError:
            continue
        total += sum(int(line.split()[1]) * 1024 for line in rollup.splitlines()
                     if line.startswith(("Private_Clean:", "Private_Dirty:")))
    return total


def live_pools(directory: Path | None = None) -> list[PoolInfo]:
    """This user's running pools, most recently used first."""
    directory = directory or state_dir()
    if directory is None:
        return []
    pools = [info for path in directory.glob("*.lock") if (info := read(path)) is not None]
    return sorted(pools, key=lambda info: info.last_used, reverse=True)


def stop(info: PoolInfo, grace: float = 2.0) -> bool:
    """End a pool: SIGTERM, then SIGKILL if it has not exited within `grace` seconds (a stopped
    process never handles SIGTERM). Signalled through a pidfd, so a pid reused meanwhile is
    never hit. Whether it is gone."""
    try:
        fd = os.pidfd_open(info.pid)
    except (ProcessLookupError, OSError):
        return True
    try:
        current = read(info.lock_path)
        if current is None or current.pid != info.pid:
            return True  # it exited meanwhile; the pid may be another process's now
        signal.pidfd_send_signal(fd, signal.SIGTERM)
        signal.pidfd_send_signal(fd, signal.SIGCONT)
        if not _exits_within(fd, grace):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
            return _exits_within(fd, grace)
        return True
    except ProcessLookupError:
        return True
    finally:
        os.close(fd)


def _exits_within(pidfd: int, seconds: float) -> bool:
    import select

    return bool(select.select([pidfd], [], [], seconds)[0])


def default_limit() -> int:
    """How many pools one user keeps at most: one per core, and never fewer than four."""
    return max(4, os.cpu_count() or 1)


def evict_beyond(limit: int, keep_pid: int, directory: Path | None = None) -> list[int]:
    """Stop the least recently used pools beyond `limit` (never `keep_pid`, the caller);
    their pids."""
    others = [info for info in live_pools(directory) if info.pid != keep_pid]
    stopped = []
    for info in others[max(0, limit - 1):]:
        if stop(info):
            stopped.append(info.pid)
    return stopped
