"""The warm pool, client side: get workers forked from a process that already imported the
libraries the pipeline uses.

A tick that runs one key would otherwise start a fresh interpreter and import pandas or duckdb
again (most of a second on a small machine) for a step that takes milliseconds. So workers are
forked from one background process per project (the fork server, `fork_server`) that has
imported the third-party modules the pipeline uses and then waits: each child is a clean copy
of it that imports the project's own code from source, as a freshly started worker would. A
`get` or `run` that finds no fork server starts one at once, before it imports the rest of
barca and reads the project, preloading what the named pipeline files import at their top
level (and what earlier runs' workers imported); its run waits until it answers. Every run
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

import os
import sys

import _blake2  # hashlib's blake2b without hashlib, which loads OpenSSL
import _socket  # `socket` without its wrapper module, which imports enum and selectors

from barca.engine.local.pool_address import paths, peer_is_us, state_dir
from barca.engine.local.pool_messages import (ForkWorker, Forked, Hello, Preload, Reaped, Status,
                                              Welcome, expect, receive, resource_limits, send)

TYPE_CHECKING = False  # typing and pathlib are not imported for it: the launcher imports this
if TYPE_CHECKING:
    from pathlib import Path
    from subprocess import Popen
    from typing import Iterable

HANDSHAKE_SECONDS = 1.0  # a pool that has not answered by then is stopped or stuck: go fresh
# A pool that has answered may still be busy when asked for a worker (importing, or on a
# starved machine): a fresh worker would spend that time importing the same. Past this, stuck.
REQUEST_SECONDS = 30.0


def supported() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open") \
        and hasattr(_socket, "SCM_RIGHTS")


# Shell bookkeeping that differs between terminals and never shapes what a library does.
_VOLATILE = frozenset({"_", "OLDPWD", "PWD", "SHLVL", "COLUMNS", "LINES", "TERM",
                       "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "COLORTERM", "SSH_CLIENT",
                       "SSH_CONNECTION", "SSH_TTY", "TMUX_PANE", "WINDOWID"})


_INHERITED: dict[str, tuple[dict[str, str], str]] = {}  # root -> (environment, identity)


def inherit_identity(root: str, key: str) -> None:
    """In a command the pool forked: its identity is the pool's while its environment stays
    the one it was given (the client found the pool by computing it a moment ago), which
    spares the run's worker start and its kept answer a stat of every file of barca."""
    _INHERITED[os.path.realpath(root)] = (dict(os.environ), key)


def identity(root: str | Path, environ: dict[str, str] | None = None) -> str:
    """What a forked process inherits from the fork server, hashed: if any of it changes, the
    fork server no longer stands in for a freshly started `barca` or worker. `environ` is the
    environment the process was started with (the fork server's own changes as libraries
    import: polars sets _RJEM_MALLOC_CONF, say); the current one by default."""
    if environ is None and _INHERITED:
        known = _INHERITED.get(os.path.realpath(root))
        if known is not None and known[0] == os.environ:
            return known[1]
    import site

    import barca

    h = _blake2.blake2b(digest_size=16)

    def add(*parts: object) -> None:
        h.update(repr(parts).encode())

    add(os.path.realpath(sys.executable), sys.prefix, os.path.realpath(root), sys.version)
    # a library may read the environment once, at import: any change needs a new fork server
    add(sorted((k, v) for k, v in (os.environ if environ is None else environ).items()
               if k not in _VOLATILE and not k.startswith("BARCA_")))
    dirs = [*site.getsitepackages(), site.getusersitepackages(),
            os.path.dirname(os.__file__),  # the standard library
            os.path.realpath(sys.executable),
            # what PYTHONPATH adds to sys.path: installing into one changes its directory
            *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    for directory in dirs:
        add(directory, stamp(directory))

    sources: list[object] = []  # barca's own files, each one's stamp, hashed at once

    def add_sources(folder: str) -> None:
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError:
            return
        for entry in entries:
            if entry.name.endswith(".py"):
                try:
                    st = entry.stat()
                    sources.extend((entry.name, st.st_mtime_ns, st.st_size))
                except OSError:
                    sources.extend((entry.name, None))
            elif entry.name != "__pycache__" and entry.is_dir(follow_symlinks=False):
                sources.append(entry.name)
                add_sources(entry.path)

    add_sources(os.path.dirname(barca.__file__))
    add(sources)
    return h.hexdigest()


def stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class WarmPool:
    """A connection to this project's fork server."""

    def __init__(self, sock: _socket.socket, modules: frozenset[str], pid: int) -> None:
        self.sock = sock
        self.modules = modules  # what the fork server has imported
        self.pid = pid

    @classmethod
    def connect(cls, root: str | Path, key: str | None = None) -> WarmPool | None:
        """This project's fork server, if one is up and current; None otherwise (start workers
        fresh). One that does not answer within HANDSHAKE_SECONDS is reported once on stderr
        (see `unresponsive`)."""
        directory = state_dir() if supported() else None
        if directory is None:
            return None
        sock_path, lock_path = paths(directory, key or identity(root))
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        try:
            sock.settimeout(HANDSHAKE_SECONDS)
            sock.connect(sock_path)
            if not peer_is_us(sock):
                raise OSError(f"{sock_path} is served by another user")
            send(sock, Hello())
            welcome = expect(receive(sock)[0], Welcome)
            sock.settimeout(REQUEST_SECONDS)
        except TimeoutError:
            sock.close()
            _note_unresponsive(lock_path)
            return None
        except (OSError, EOFError, ValueError):
            sock.close()
            return None
        return cls(sock, frozenset(welcome.modules), welcome.pid)

    def fork_worker(self, root: str | Path, env: dict[str, str], fds: tuple[int, int],
                    idle: float) -> int:
        """A new worker on these pipe ends (worker's read, worker's write), under this
        process's resource limits; returns its pid."""
        send(self.sock, ForkWorker(str(root), env, idle, resource_limits()), [*fds, 2])
        return expect(receive(self.sock)[0], Forked).pid

    def exit_status(self, pid: int) -> str:
        """How a child of the fork server ended ("code 3", "SIGSEGV", ...); "" if unknown."""
        try:
            send(self.sock, Status(pid))
            return expect(receive(self.sock)[0], Reaped).exit
        except (OSError, EOFError, ValueError):
            return ""

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


def child_exit(root: str | Path, pid: int) -> str:
    """How a process the project's fork server forked ended ("code 3", "SIGKILL ..."), asked
    of the fork server after the client lost it; "" when nobody can say."""
    pool = WarmPool.connect(root)
    if pool is None:
        return ""
    try:
        return pool.exit_status(pid)
    finally:
        pool.close()


_unresponsive: list[int] = []  # the pid of a pool that did not answer, once found


def unresponsive() -> bool:
    """Whether this process met a pool that did not answer: then it neither waits for it
    again nor starts another (that one holds the project's lock)."""
    return bool(_unresponsive)


def _note_unresponsive(lock_path: str) -> None:
    from barca.engine.local.pool_registry import read

    if _unresponsive:
        return
    info = read(lock_path)
    _unresponsive.append(info.pid if info else 0)
    which = f"the warm pool (pid {info.pid})" if info else "the warm pool"
    state = " is stopped and" if info and info.stopped else ""
    sys.stderr.write(f"note: {which}{state} did not answer within {HANDSHAKE_SECONDS:g} s; "
                     "workers start fresh (`barca pool stop` ends it)\n")


def start_pool_process(root: Path, modules: set[str], idle_seconds: float,
                       key: str | None = None) -> Popen | None:
    """Start a fork server for this project (of identity `key`, computed if not given) that
    imports `modules` in the background; its process (a `subprocess.Popen`), or None where no
    fork server can run."""
    import subprocess

    from barca.engine.local.pool_registry import POOL_PROCESS

    directory = state_dir() if supported() else None
    if directory is None or unresponsive():
        return None
    key = key or identity(root)
    try:
        process = subprocess.Popen([sys.executable, "-P", "-m", POOL_PROCESS, str(root), key,
                                    repr(idle_seconds), *sorted(modules)],
                                   cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True,
                                   close_fds=True)
    except OSError:
        return None  # workers start fresh
    _started[key] = process
    return process


_started: dict[str, Popen] = {}  # identity -> the fork server this process started last


def start_and_connect(root: Path, modules: set[str], idle_seconds: float,
                      timeout: float = 60.0) -> WarmPool | None:
    """Start this project's fork server and wait until it answers (a fresh worker would spend
    that time importing the same libraries); None if it exits or does not answer within
    `timeout` seconds, and workers start fresh."""
    import time

    from barca.engine.local.pool_registry import read

    key = identity(root)
    _, lock_path = paths(state_dir() or "", key)
    # one may be starting already, by this command before it read the project or by another
    # command: wait for it rather than start a second, which would find its lock taken and exit
    process = _started.get(key)
    if process is None or process.poll() is not None:
        process = None if read(lock_path) else start_pool_process(root, modules, idle_seconds,
                                                                  key)
        if process is None and read(lock_path) is None:
            return None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pool = WarmPool.connect(root, key)
        if pool is not None:
            return pool
        # ours exits at once if a fork server of this identity is already starting: wait for
        # it, unless it is one that does not answer
        if unresponsive() or (process is None or process.poll() is not None) and \
                read(lock_path) is None:
            return None
        time.sleep(0.02)
    return None


def top_level_imports(root: Path, files: Iterable[str]) -> set[str]:
    """What a fork server started for a run preloads before it has learned anything: the modules the
    pipeline files import at their top level, and pyarrow, which barca writes tables with, when
    they import a table library (else a worker that writes one teaches the pool), with the
    libraries their calls convert results to (`LAZY_IMPORTS`). The fork server skips the
    project's own modules among them. A pool without pyarrow holds ~30 MB less, which a server
    that keeps its pool for hours pays all along."""
    import ast

    names: set[str] = set()
    called: set[str] = set()
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
        called.update(node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call)
                      and isinstance(node.func, ast.Attribute) and node.func.attr in LAZY_IMPORTS)
    if not names & TABLE_LIBRARIES:
        return names
    return names | {"pyarrow"} | {LAZY_IMPORTS[attr] for attr in called}


TABLE_LIBRARIES = {"pandas", "polars", "duckdb", "pyarrow"}
# a table library's conversions import their target on first call: a pipeline calling DuckDB's
# `.df()` would import pandas in every worker's first step (0.4 s each), the pool does it once
LAZY_IMPORTS = {"df": "pandas", "fetchdf": "pandas", "fetch_df": "pandas",
                "to_pandas": "pandas", "pl": "polars", "to_polars": "polars"}
