"""Files on this machine's disk that appear under their name only complete.

A file is written unnamed and linked into place, or under a temporary name and renamed, so a
reader never sees half a file and a killed writer leaves nothing under the name. The local
artifact store (store.local_store), batch splits (store.batch_split) and sinks write through
these; they use plain `os` calls on text paths, because a batch call writes thousands of small
results and any more per file shows.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
from pathlib import Path
from typing import Iterator

from barca.fd_writes import write_all
from barca.store.packs import split_range

_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC


def write_bytes(data: bytes, path: Path | str) -> None:
    """Write bytes atomically, the directory made only when missing.

    A new file is written unnamed (O_TMPFILE) and given its name when complete (linkat): one
    directory entry, where a temporary name renamed into place makes two (on ext4, 40-65 us a
    file against 60-95 us), and a killed writer leaves nothing behind. Replacing a file, or a
    file system without O_TMPFILE, takes the temporary name and the rename."""
    path = os.fspath(path)
    if _UNNAMED[0] and _write_unnamed(data, path):
        return
    tmp = temporary_name(path)
    try:
        fd = os.open(tmp, _NEW_FILE, 0o644)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(tmp, _NEW_FILE, 0o644)
    try:
        try:
            write_all(fd, (data,))
        finally:
            os.close(fd)
        replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


_UNNAMED = [hasattr(os, "O_TMPFILE")]  # cleared once the file system refuses
_UNNAMED_FILE = getattr(os, "O_TMPFILE", 0) | os.O_WRONLY | os.O_CLOEXEC


def _write_unnamed(data: bytes, path: str) -> bool:
    """Write `path` as a new file named only once complete; False when it exists already or
    unnamed files cannot be made here (the caller then renames a temporary file)."""
    folder = os.path.dirname(path) or "."
    try:
        try:
            fd = os.open(folder, _UNNAMED_FILE, 0o644)
        except FileNotFoundError:
            os.makedirs(folder, exist_ok=True)
            fd = os.open(folder, _UNNAMED_FILE, 0o644)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            raise
        _UNNAMED[0] = False  # no O_TMPFILE on this file system
        return False
    try:
        write_all(fd, (data,))
        # linkat(AT_SYMLINK_FOLLOW) on /proc/self/fd names the open file. A dir fd makes
        # os.link call linkat, which honours follow_symlinks; the path being absolute, which
        # fd does not matter
        os.link(f"/proc/self/fd/{fd}", path, src_dir_fd=fd, follow_symlinks=True)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.EXDEV, errno.EPERM, errno.EOPNOTSUPP):
            raise
        _UNNAMED[0] = False  # no /proc, or it cannot link: rename temporary files instead
        return False
    finally:
        os.close(fd)
    return True


@contextlib.contextmanager
def atomic(path: Path | str) -> Iterator[str]:
    """A temporary name next to `path`, renamed onto it when the block ends without error."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = temporary_name(path)
    try:
        yield tmp
        replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def temporary_name(path: Path | str) -> str:
    """`dir/.name.<pid>.tmp`: beside the file (one file system, so the rename is cheap), hidden,
    and distinct per process."""
    head, _, name = os.fspath(path).rpartition("/")
    return f"{head}/.{name}.{os.getpid()}.tmp" if head else f".{name}.{os.getpid()}.tmp"


SET_ASIDE_BYTES = 1 << 20


def set_aside(path: str) -> str | None:
    """Give a file of a MB or more that is about to be replaced a second, hidden name (which
    is returned), so that the rename does not wait while the kernel frees its blocks (7-8 ms
    for a key source's 8 MB file, on every tick of its sensor); the caller removes that name
    once it delays no one. Should the process end first, the name is the leftover `.tmp` of a
    process that is gone, which `barca gc` removes."""
    try:
        if os.stat(path).st_size < SET_ASIDE_BYTES:
            return None
        aside = temporary_name(f"{path}.replaced")
        os.link(path, aside)
    except OSError:  # nothing there yet, no hard links here, a name left from before: the
        return None  # rename frees the blocks itself
    return aside


def replace(tmp: str, path: Path | str) -> None:
    """Rename into place; a directory squatting on the artifact's name is moved aside first."""
    try:
        os.replace(tmp, path)
    except IsADirectoryError:
        _move_aside(Path(path))
        os.replace(tmp, path)


def digest_file(path: str) -> tuple[int, str]:
    """(size in bytes, blake2b-16 hex digest) of a file's bytes."""
    h = hashlib.blake2b(digest_size=16)
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def _move_aside(path: Path) -> None:
    """A directory where an artifact belongs: remove it if empty, else rename it, never delete."""
    try:
        path.rmdir()
        return
    except OSError:
        pass
    n = 1
    target = path.with_name(path.name + ".moved-aside")
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.moved-aside-{n}")
    path.rename(target)
    logging.getLogger("barca").warning("moved directory %s aside to %s", path, target.name)


def read_bytes(path: Path | str) -> bytes:
    """A file's bytes through plain `os` calls: a batch call or `get --json` reads one small
    result per key, and `open()`'s file object costs twice the read (~35 us against ~12 us
    a small file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_stored(path: str) -> bytes:
    """A result's bytes at a local path: its file, or for a packed result
    (`<pack>@<offset>:<length>`, store.packs) its range of the pack."""
    file, offset, length = split_range(path)
    return read_bytes(path) if offset is None else read_range(file, offset, length)


def read_range(path: Path | str, offset: int, length: int) -> bytes:
    """`length` bytes of a file from `offset` (a packed result, store.packs); a file shorter
    than that is an error, never a short value."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.pread(fd, length, offset)
        while len(data) < length:
            more = os.pread(fd, length - len(data), offset + len(data))
            if not more:
                raise OSError(f"{path} ends before byte {offset + length}")
            data += more
        return data
    finally:
        os.close(fd)
