"""The warm pool, server side: a background process that imports a project's libraries once and
forks workers from that state (see `barca.engine.local.warm_pool` for why and when).

Its process is started as `python -m barca.cli.warm_launcher ROOT KEY IDLE_SECONDS [MODULE ...]`
with the project root as its working directory, so its `sys.path` is the one a fresh worker
would get; the launcher calls `main` here with a function that runs a whole command, which a
`RunCommand` request forks a child to run. It never imports the
project's own modules: a forked child imports those from source, so code edits need no
restart. One fork server per identity: a second one finds the lock taken and exits.
"""

from __future__ import annotations

import fcntl
import gc
import io
import importlib
import importlib.util
import os
import selectors
import signal
import socket
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from barca.engine.local import warm_pool, worker
from barca.engine.local.project_code import is_project_file
from barca.engine.local.warm_pool import (ForkWorker, Forked, Hello, Preload, Refused,
                                          RunCommand, Welcome)

RunArgv = Callable[[list[str]], int]  # runs `barca ARGV` in this process; its exit code

CHECK_SECONDS = 5.0  # how often the fork server checks that its identity still holds


class ForkServer:
    def __init__(self, root: Path, key: str, idle: float, directory: Path, lock: Any,
                 run_argv: RunArgv | None = None) -> None:
        self.root, self.key, self.idle, self.directory = root, key, idle, directory
        self.lock = lock  # held while this fork server lives; a child must not keep it
        self.run_argv = run_argv
        self.modules: set[str] = set()
        self.selector = selectors.DefaultSelector()

    def preload(self, names: list[str]) -> None:
        """Import third-party modules now, so forked workers start with them."""
        for name in names:
            if name in self.modules or not name.isidentifier():
                continue
            self.modules.add(name)
            try:
                spec = importlib.util.find_spec(name)
                origin = spec.origin if spec is not None else None
                if origin and is_project_file(str(self.root), origin):
                    continue  # the project's own code is always imported fresh, in the child
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - a module that fails here loads in the worker
                continue
        for module_name, module in list(sys.modules.items()):
            origin = getattr(module, "__file__", None)
            if origin and is_project_file(str(self.root), origin):
                del sys.modules[module_name]
        # What is loaded now lives as long as the fork server: keep it out of the cyclic
        # collector, so that children do not traverse (and so copy) it at each full collection.
        gc.freeze()

    def serve(self, listener: socket.socket) -> None:
        self.selector.register(listener, selectors.EVENT_READ, None)
        last_request = last_check = time.monotonic()
        while True:
            now = time.monotonic()
            if now - last_request >= self.idle:
                return
            if now - last_check >= CHECK_SECONDS:
                last_check = now
                if not self.root.is_dir() or not self.is_owner() or \
                        warm_pool.identity(self.root) != self.key:
                    return
            timeout = min(CHECK_SECONDS, self.idle - (now - last_request))
            for key, _ in self.selector.select(max(0.0, timeout)):
                last_request = time.monotonic()
                if key.data is None:
                    conn, _ = listener.accept()
                    if not warm_pool.peer_is_us(conn):
                        conn.close()  # another user: never served
                        continue
                    conn.setblocking(True)
                    self.selector.register(conn, selectors.EVENT_READ, "client")
                else:
                    self._answer(key.fileobj)

    def is_owner(self) -> bool:
        """Whether this is still the project's newest fork server."""
        owner, _ = warm_pool.project_paths(self.directory, self.root)
        try:
            return owner.read_text() == str(os.getpid())
        except OSError:
            return False

    def _answer(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            message, fds = warm_pool.receive(conn, max_fds=4)
            if isinstance(message, Hello):
                warm_pool.send(conn, Welcome(sorted(self.modules), os.getpid()))
            elif isinstance(message, ForkWorker) and len(fds) == 4:
                warm_pool.send(conn, Forked(self._fork_worker(message, fds)))
            elif isinstance(message, RunCommand) and len(fds) == 3 and self.run_argv:
                warm_pool.send(conn, Forked(self._fork_command(conn, message, fds)))
            elif isinstance(message, Preload):
                self.preload(message.modules)
                self.save_modules()
            else:
                warm_pool.send(conn, Refused(f"cannot serve {type(message).__name__} "
                                             f"with {len(fds)} descriptors"))
        except (OSError, EOFError, ValueError):
            self.selector.unregister(conn)
            conn.close()
        finally:
            for fd in fds:
                os.close(fd)

    def _fork_worker(self, request: ForkWorker, fds: list[int]) -> int:
        pid = os.fork()
        if pid:
            return pid
        try:  # the child: become a fresh worker of the requesting run
            self._leave_server(keep=None)
            os.setsid()  # the run stops a worker and whatever it started with one killpg
            in_fd, out_fd, stdout, stderr = fds
            devnull = os.open(os.devnull, os.O_RDONLY)
            _take_stdio((devnull, stdout, stderr), request.env, request.root)
            worker.run(in_fd, out_fd, Path(request.root))
        finally:
            os._exit(0)

    def _fork_command(self, conn: socket.socket, request: RunCommand, fds: list[int]) -> int:
        pid = os.fork()
        if pid:
            return pid
        code = 1
        try:  # the child: run `barca ARGV` as the client process would have
            self._leave_server(keep=conn)
            os.umask(request.umask)
            _take_stdio(fds, request.env, request.cwd)
            sys.argv = ["barca", *request.argv]
            assert self.run_argv is not None
            code = self.run_argv(request.argv)
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            try:
                warm_pool.send(conn, warm_pool.Exited(int(code)))
            finally:
                os._exit(int(code))

    def _leave_server(self, keep: socket.socket | None) -> None:
        """In a forked child: let go of the fork server's sockets, lock and signal handling."""
        for key in list(self.selector.get_map().values()):
            if key.fileobj is not keep:
                key.fileobj.close()
        self.selector.close()
        self.lock.close()
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def save_modules(self) -> None:
        _, modules_path = warm_pool.project_paths(self.directory, self.root)
        _write_atomically(modules_path, "\n".join(sorted(self.modules)))


def _take_stdio(fds: list[int] | tuple[int, ...], env: dict, cwd: str) -> None:
    """Make the caller's stdin/stdout/stderr, environment and directory this process's own."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    encoding, errors = sys.__stdout__.encoding, sys.__stdout__.errors
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False),
                                                 encoding=encoding, errors=errors)
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding=encoding, errors=errors,
        line_buffering=os.isatty(1))
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding=encoding, errors="backslashreplace",
        line_buffering=True)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv: list[str], run_argv: RunArgv | None = None) -> None:
    """Serve as the fork server described by `argv` (ROOT KEY IDLE_SECONDS [MODULE ...]); with
    `run_argv`, also run whole commands."""
    root, key, idle, names = Path(argv[0]), argv[1], float(argv[2]), argv[3:]
    directory = warm_pool.state_dir()
    if directory is None or idle <= 0:
        return
    sock_path, lock_path = warm_pool.paths(directory, key)
    owner_path, modules_path = warm_pool.project_paths(directory, root)
    lock = open(lock_path, "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another fork server serves this identity
    lock.truncate(0)
    lock.write(str(os.getpid()))
    lock.flush()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork.*")
    _forget_old_projects(directory)
    _import_barca()
    server = ForkServer(root, key, idle, directory, lock, run_argv)
    try:
        saved = modules_path.read_text().split()
    except OSError:
        saved = []
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        server.preload(sorted(set(saved) | set(names)))
        server.save_modules()
        sock_path.unlink(missing_ok=True)
        listener.bind(str(sock_path))
        os.chmod(sock_path, 0o600)
        listener.listen(16)
        _write_atomically(owner_path, str(os.getpid()))
        server.serve(listener)
    finally:
        listener.close()
        sock_path.unlink(missing_ok=True)
        if server.is_owner():
            owner_path.unlink(missing_ok=True)
        lock_path.unlink(missing_ok=True)  # still locked by us: no other fork server holds it


def _import_barca() -> None:
    """All of barca, so that a forked `get` starts with its imports done."""
    import pkgutil

    import barca

    for info in pkgutil.walk_packages(barca.__path__, "barca."):
        if not info.name.endswith("__main__"):
            try:
                importlib.import_module(info.name)
            except Exception:  # noqa: BLE001 - an optional part missing its library
                continue


def _forget_old_projects(directory: Path, days: float = 30) -> None:
    """Module lists of projects without a run for a month (deleted temp projects, say)."""
    cutoff = time.time() - days * 86400
    for path in directory.glob("*.imports"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
        except OSError:
            pass

