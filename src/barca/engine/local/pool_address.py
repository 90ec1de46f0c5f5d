"""Where this user's warm pools are reached, and who may talk to one: the private state
directory, the socket and lock file of a pool of a given identity, the check of the process at
the other end of a socket.

Kept to os and the C socket module (paths are strings): the `barca` launcher imports this
before every `get` and `run` to find the project's pool, and the pool (`fork_server`) and the
registry (`pool_registry`, which gives the same places as `Path`s) use it too.
"""

from __future__ import annotations

import os
import sys

import _socket  # `socket` without its wrapper module, which imports enum and selectors


def state_dir() -> str | None:
    """The user's private directory for warm pool sockets: `$XDG_RUNTIME_DIR/barca`, else
    `$TMPDIR/barca-UID`; None if neither is safe to use (then workers start fresh)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    temp = next((d for d in map(os.environ.get, ("TMPDIR", "TEMP", "TMP"))
                 if d and os.path.isdir(d)), "/tmp")  # tempfile's order, without importing it
    candidates = [os.path.join(runtime, "barca")] if runtime and os.path.isabs(runtime) else []
    candidates.append(os.path.join(temp, f"barca-{os.getuid()}"))
    return next((path for path in candidates if _is_private_dir(path)), None)


def _is_private_dir(path: str) -> bool:
    """Created if missing; then a real directory (not a symlink to one: it is opened with
    O_NOFOLLOW and checked on the open descriptor), ours, and closed to everyone else."""
    try:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return st.st_uid == os.getuid() and not st.st_mode & 0o077


def paths(directory: str, key: str) -> tuple[str, str]:
    """The socket and the lock file of the pool with this identity."""
    stem = os.path.join(directory, key[:24])
    return stem + ".sock", stem + ".lock"


def peer_is_us(sock: _socket.socket) -> bool:
    """Whether the process at the other end of a Unix socket runs as this user (SO_PEERCRED):
    checked on every connection, in both directions, so that a socket swapped in by another
    user is never talked to."""
    try:  # struct ucred: pid, uid, gid, each 4 bytes
        creds = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    except OSError:
        return False
    return int.from_bytes(creds[4:8], sys.byteorder) == os.getuid()
