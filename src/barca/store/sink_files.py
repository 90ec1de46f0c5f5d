"""Placing a sink's file in a directory that other users may write to as well.

An export directory is often shared (a BI tool's drop folder, a team's share), and barca may
run as a user whose files matter (root on a server). So a sink never writes through a name
someone else could have put there first: the bytes go into a new file of a random name made
with O_EXCL in the target's directory (`tempfile.mkstemp`, which follows no symlink), written
through the descriptor it returned, then renamed onto the target. A symlink on the way to the
target is followed only when it belongs to the writing user or to root: one planted by
another user (pointing at a file of ours) is refused, and what it points to is left alone.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import tempfile

_MAX_LINKS = 40  # as the kernel's limit on symlinks followed in one path
_TEMPORARY_PREFIX = 64  # characters of the target's name kept in its temporary file's name


def resolve(path: str) -> str:
    """`path` made absolute with every symlink on it followed, as `os.path.realpath`, but
    refusing (PermissionError) a symlink that neither the writing user nor root owns. A part
    that does not exist yet is kept as written."""
    trusted = {os.geteuid(), 0}
    done, todo, links = "/", os.path.abspath(path).split("/")[1:], 0
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            done = os.path.dirname(done)
            continue
        here = os.path.join(done, part)
        try:
            info = os.lstat(here)
        except (FileNotFoundError, NotADirectoryError):
            return os.path.join(here, *todo)
        if not stat.S_ISLNK(info.st_mode):
            done = here
            continue
        if info.st_uid not in trusted:
            raise PermissionError(f"{here} is a symlink of another user (uid {info.st_uid}); "
                                  "the sink does not write through it, and leaves it as it is")
        links += 1
        if links > _MAX_LINKS:
            raise OSError(f"too many symlinks on the way to {path}")
        target = os.readlink(here)
        if target.startswith("/"):
            done = "/"
        todo = target.split("/") + todo
    return done


def place(source: str, target: str) -> None:
    """Copy the file `source` onto `target` (an absolute path from `resolve`), atomically,
    through a new temporary file in the target's directory (hidden from a dataset's readers
    by its leading dot). The file gets the permissions a plain new file would."""
    head, name = os.path.split(target)
    os.makedirs(head, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name[:_TEMPORARY_PREFIX]}.", suffix=".tmp", dir=head)
    try:
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            os.fchmod(out.fileno(), 0o666 & ~_umask())
            shutil.copyfileobj(src, out, 1 << 20)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@functools.cache
def _umask() -> int:
    """The process's umask, read without changing it where Linux says it (os.umask sets it,
    for a moment, for every thread)."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
