"""The warm pool, client side: get workers forked from a process that already imported the
libraries the pipeline uses.

A tick that runs one key would otherwise start a fresh interpreter and import pandas or duckdb
again (most of a second on a small machine) for a step that takes milliseconds. So workers are
forked from one background process per project (the fork server, `fork_server`) that has
imported the third-party modules the pipeline uses and then waits: each child is a clean copy
of it that imports the project's own code from source, as a freshly started worker would. A
run that finds no fork server starts one, preloading what the pipeline files import at their
top level (and what earlier runs' workers imported), and waits until it answers; every run
then teaches it the modules its workers imported on top (pandas through DuckDB's `.df()`,
say). Forked workers share the fork server's pages of those libraries, so each one also costs
less memory than a fresh interpreter that imports them itself. The fork server exits after
`BARCA_WARM_SECONDS` without a request (default 900; 0 turns the pool off), and as soon as
anything that shaped its imports changes: the interpreter, barca's own files, the installed
packages or the environment variables. Its identity hashes all of these, so a run never
reaches a fork server that is out of date, and a project keeps one: the newest.

The socket and the fork server's list of modules live in a private directory under the system
temp directory (mode 0700), never in the project's `.barca/`. Linux only (SOCK_SEQPACKET with
file-descriptor passing, pidfds); elsewhere every worker is started fresh.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import sys
from pathlib import Path
from typing import Any, Iterable, NamedTuple

_MAX_MESSAGE = 1 << 20
# The pool's process is the launcher's (barca.cli.warm_launcher): it serves this module's
# requests through `fork server` and can also run whole commands. Started by name, never imported.
POOL_PROCESS = "barca.cli.warm_launcher"


def supported() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open") \
        and hasattr(socket, "send_fds")


def state_dir() -> Path | None:
    """The user's private directory for fork server sockets: `$XDG_RUNTIME_DIR/barca`, else
    `$TMPDIR/barca-UID`; None if neither is safe to use (then workers start fresh)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    temp = next((d for d in map(os.environ.get, ("TMPDIR", "TEMP", "TMP"))
                 if d and os.path.isdir(d)), "/tmp")  # tempfile's order, without importing it
    candidates = [Path(runtime) / "barca"] if runtime and os.path.isabs(runtime) else []
    candidates.append(Path(temp) / f"barca-{os.getuid()}")
    return next((path for path in candidates if _is_private_dir(path)), None)


def _is_private_dir(path: Path) -> bool:
    """Created if missing; then a real directory (not a symlink to one: it is opened with
    O_NOFOLLOW and checked on the open descriptor), ours, and closed to everyone else."""
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return st.st_uid == os.getuid() and not st.st_mode & 0o077


def peer_is_us(sock: socket.socket) -> bool:
    """Whether the process at the other end of a Unix socket runs as this user (SO_PEERCRED):
    checked on every connection, in both directions, so that a socket swapped in by another
    user is never talked to."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return False
    return struct.unpack("3i", creds)[1] == os.getuid()


# Shell bookkeeping that differs between terminals and never shapes what a library does.
_VOLATILE = frozenset({"_", "OLDPWD", "PWD", "SHLVL", "COLUMNS", "LINES", "TERM",
                       "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "COLORTERM", "SSH_CLIENT",
                       "SSH_CONNECTION", "SSH_TTY", "TMUX_PANE", "WINDOWID"})


def identity(root: Path) -> str:
    """What a forked process inherits from the fork server, hashed: if any of it changes, the
    fork server no longer stands in for a freshly started `barca` or worker."""
    import site

    import barca

    h = hashlib.blake2b(digest_size=16)

    def add(*parts: object) -> None:
        h.update(repr(parts).encode())

    add(os.path.realpath(sys.executable), sys.prefix, os.path.realpath(root), sys.version)
    # a library may read the environment once, at import: any change needs a new fork server
    add(sorted((k, v) for k, v in os.environ.items()
               if k not in _VOLATILE and not k.startswith("BARCA_")))
    dirs = [*site.getsitepackages(), site.getusersitepackages(),
            os.path.dirname(os.__file__),  # the standard library
            os.path.realpath(sys.executable),
            # what PYTHONPATH adds to sys.path: installing into one changes its directory
            *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    for directory in dirs:
        add(directory, _stamp(directory))
    package = os.path.dirname(barca.__file__)
    for folder, subdirs, files in os.walk(package):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                add(name, _stamp(os.path.join(folder, name)))
    return h.hexdigest()


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def paths(directory: Path, key: str) -> tuple[Path, Path]:
    """The socket and the lock file (holding the pid) of the fork server with this identity."""
    stem = directory / key[:24]
    return stem.with_suffix(".sock"), stem.with_suffix(".lock")


def project_paths(directory: Path, root: Path) -> tuple[Path, Path]:
    """The project's owner file, naming its newest fork server (an older one, say of an environment
    since changed, sees it is no longer named and exits, so a project keeps at most one), and
    the modules its workers imported, kept for the next fork server."""
    stem = directory / hashlib.blake2b(os.path.realpath(root).encode(),
                                       digest_size=12).hexdigest()
    return stem.with_suffix(".owner"), stem.with_suffix(".imports")


# -- messages: typed, JSON on the wire (never pickle: nothing read from a socket is executed).
# NamedTuples and the json module, because the `barca` launcher imports this on every tick.

class Hello(NamedTuple):
    """Client -> pool: are you there? Answered by `Welcome`."""


class Welcome(NamedTuple):
    modules: list[str]  # what the pool has imported
    pid: int


class ForkWorker(NamedTuple):
    """Client -> pool, with four fds (the worker's pipe ends, stdout, stderr): fork a worker."""

    root: str
    env: dict[str, str]


class RunCommand(NamedTuple):
    """Client -> pool, with stdin, stdout and stderr: fork a process that runs `barca ARGV`."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    umask: int


class Forked(NamedTuple):
    pid: int


class Exited(NamedTuple):
    """Pool -> client, after `RunCommand`: the command's exit code."""

    code: int


class Preload(NamedTuple):
    """Client -> pool: import these third-party modules for later workers."""

    modules: list[str]


class Refused(NamedTuple):
    reason: str


MESSAGES = {cls.__name__: cls for cls in (Hello, Welcome, ForkWorker, RunCommand, Forked,
                                          Exited, Preload, Refused)}
_CHECKS = {"str": lambda v: isinstance(v, str),
           "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
           "list[str]": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
           "dict[str, str]": lambda v: isinstance(v, dict) and all(
               isinstance(x, str) for x in (*v, *v.values()))}


def encode(message: Any) -> bytes:
    return json.dumps({"type": type(message).__name__, **message._asdict()}).encode()


def decode(data: bytes) -> Any:
    """A message, its fields checked against their declared types; ValueError otherwise."""
    try:
        fields = json.loads(data)
        cls = MESSAGES[fields.pop("type")]
        message = cls(**fields)
    except (KeyError, TypeError, AttributeError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(f"malformed warm pool message: {exc}") from exc
    for name, hint in cls.__annotations__.items():
        kind = getattr(hint, "__forward_arg__", hint)  # the annotation's text
        if not _CHECKS[kind](getattr(message, name)):
            raise ValueError(f"warm pool message {cls.__name__}.{name} is not {kind}")
    return message


def send(sock: socket.socket, message: Any, fds: Iterable[int] = ()) -> None:
    data = encode(message)
    if len(data) > _MAX_MESSAGE:
        raise OSError("warm pool message too large")
    socket.send_fds(sock, [data], list(fds))


def receive(sock: socket.socket, max_fds: int = 0) -> tuple[Any, list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MESSAGE, max_fds)
    if not data:
        for fd in fds:
            os.close(fd)
        raise EOFError("warm pool closed the connection")
    try:
        return decode(data), fds
    except ValueError:
        for fd in fds:
            os.close(fd)
        raise


def expect(message: Any, cls: type) -> Any:
    if isinstance(message, Refused):
        raise OSError(f"warm pool refused: {message.reason}")
    if not isinstance(message, cls):
        raise ValueError(f"warm pool answered {type(message).__name__}, not {cls.__name__}")
    return message


class WarmPool:
    """A connection to this project's fork server."""

    def __init__(self, sock: socket.socket, modules: frozenset[str], pid: int) -> None:
        self.sock = sock
        self.modules = modules  # what the fork server has imported
        self.pid = pid

    @classmethod
    def connect(cls, root: Path, key: str | None = None) -> "WarmPool | None":
        """This project's fork server, if one is up and current; None otherwise (start workers
        fresh)."""
        directory = state_dir() if supported() else None
        if directory is None:
            return None
        sock_path, _ = paths(directory, key or identity(root))
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.settimeout(5.0)
            sock.connect(str(sock_path))
            if not peer_is_us(sock):
                raise OSError(f"{sock_path} is served by another user")
            send(sock, Hello())
            welcome = expect(receive(sock)[0], Welcome)
        except (OSError, EOFError, ValueError):
            sock.close()
            return None
        return cls(sock, frozenset(welcome.modules), welcome.pid)

    def fork_worker(self, root: Path, env: dict[str, str], fds: tuple[int, ...]) -> int:
        """A new worker on these pipe ends (worker's read, worker's write); returns its pid."""
        send(self.sock, ForkWorker(str(root), env), [*fds, 1, 2])
        return expect(receive(self.sock)[0], Forked).pid

    def learn(self, modules: set[str]) -> None:
        """Ask the fork server to import modules workers needed that it does not have yet."""
        new = sorted(modules - self.modules)
        if new:
            try:
                send(self.sock, Preload(new))
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


def start_pool_process(root: Path, modules: set[str], idle_seconds: float,
                 key: str | None = None) -> Any:
    """Start a fork server for this project (of identity `key`, computed if not given) that imports
    `modules` in the background; its process (a `subprocess.Popen`), or None where no fork server
    can run."""
    import subprocess

    directory = state_dir() if supported() else None
    if directory is None:
        return None
    try:
        return subprocess.Popen([sys.executable, "-P", "-m", POOL_PROCESS, str(root),
                                 key or identity(root), repr(idle_seconds), *sorted(modules)],
                                cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    except OSError:
        return None  # workers start fresh


def start_and_connect(root: Path, modules: set[str], idle_seconds: float,
                      timeout: float = 60.0) -> WarmPool | None:
    """Start this project's fork server and wait until it answers (a fresh worker would spend that
    time importing the same libraries); None if it exits or does not answer within `timeout`
    seconds, and workers start fresh."""
    import time

    key = identity(root)
    process = start_pool_process(root, modules, idle_seconds, key)
    if process is None:
        return None
    _, lock_path = paths(state_dir() or Path(), key)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pool = WarmPool.connect(root, key)
        if pool is not None:
            return pool
        # ours exits at once if a fork server of this identity is already starting: wait for it
        if process.poll() is not None and not _holder_alive(lock_path):
            return None
        time.sleep(0.02)
    return None


def _holder_alive(lock_path: Path) -> bool:
    """Whether the fork server whose pid the lock file holds is running (a stale file's pid may
    since belong to another process)."""
    try:
        return POOL_PROCESS.encode() in Path(f"/proc/{int(lock_path.read_text())}/cmdline"
                                              ).read_bytes()
    except (OSError, ValueError):
        return False


def top_level_imports(root: Path, files: Iterable[str]) -> set[str]:
    """What a fork server started for a run preloads before it has learned anything: the modules the
    pipeline files import at their top level, and pyarrow, which barca writes tables with (and
    pandas imports). The fork server skips the project's own modules among them."""
    import ast

    names = {"pyarrow"}
    for file in files:
        try:
            tree = ast.parse((root / file).read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        for stmt in tree.body:
            if isinstance(stmt, ast.Import):
                names.update(alias.name.partition(".")[0] for alias in stmt.names)
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                names.add(stmt.module.partition(".")[0])
    return names
