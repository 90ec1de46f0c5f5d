"""The warm pool, server side: a background process that imports a project's libraries once and
forks workers from that state (see `barca.engine.local.warm_pool` for why and when).

Its process is `python -m barca.cli.warm_launcher ROOT KEY IDLE_SECONDS [MODULE ...]` in the
project root, so its `sys.path` is a fresh worker's; the launcher calls `main` here with a
function that runs a whole command, which a `RunCommand` forks a child to run. It never
imports the project's own modules: a child imports those from source (edits need no restart).

What a forked child gets must be what a fresh process would:
- the caller's environment, directory, umask and resource limits (refused, so the caller runs
  fresh, when a hard limit is above the pool's own);
- no library code older than its files: the pool stamps every file it loaded from outside the
  installed packages (an editable install, a PYTHONPATH directory) and, if one changed,
  refuses the next request and exits;
- nothing of the pool's: its sockets, lock and signal handlers are let go in the child
  (`forked_child`: how a child becomes a worker or a command), and the pool keeps no copy of
  a client's connection, so a client sees the end of its command the moment it dies.
The pool reaps its children itself (pidfds) and tells a client how one ended (`Status`). One
pool per identity (a second finds the lock taken and exits), a few per user at most.
"""

from __future__ import annotations

import collections
import fcntl
import gc
import importlib
import importlib.util
import os
import selectors
import signal
import socket
import sys
import sysconfig
import time
import warnings
from pathlib import Path
from typing import Any, Callable, NamedTuple

from barca.engine.local import forked_child, pool_address, pool_registry, spares, warm_pool
from barca.engine.local.rest_of_barca import RestOfBarca
from barca.engine.local.pool_messages import (ForkWorker, Forked, Hello, Preload, Reaped,
                                              Refused, RunCommand, Status, Welcome,
                                              describe_exit, exceeds_own_limits, receive, send)
from barca.engine.worker.project_code import is_project_file

CHECK_SECONDS = 5.0  # how often the fork server checks that its identity still holds
EXITS_KEPT = 256  # how many children's exit statuses the fork server remembers


class ForkServer:
    def __init__(self, root: Path, key: str, idle: float, directory: Path, lock: Any,
                 environ: dict[str, str], run_argv: forked_child.RunArgv | None = None,
                 rehearse: Callable[[], None] | None = None) -> None:
        self.root, self.key, self.idle, self.directory = root, key, idle, directory
        self.lock = lock  # held while this fork server lives; a child must not keep it
        # environ: as started, its identity's, whatever imports change later
        self.run_argv, self.rehearse, self.environ = run_argv, rehearse, environ
        self.modules: set[str] = set()
        self.stamps: dict[str, tuple[int, int] | None] = {}  # loaded files outside installs
        self.exits: collections.OrderedDict[int, str] = collections.OrderedDict()
        self.selector = selectors.DefaultSelector()
        self.servers: set[int] = set()  # pids of the `barca serve`s whose runs it serves
        self.all_of_barca = False  # the commands' half too (`import_rest_when_quiet`)
        self.rest = RestOfBarca()
        self.spares = spares.Spares(self.selector, self._watch)

    def serve_for(self, served_by: str | None) -> bool:
        """Wait for runs only as long as the server `served_by` names lives (a SERVED_BY
        value from the pool's or a request's environment); False if it is already gone."""
        if not served_by:
            return True
        found = pool_registry.open_server(served_by)
        if found is None:
            return False
        pid, pidfd = found
        if pid in self.servers:
            os.close(pidfd)
        else:
            self.servers.add(pid)
            self.selector.register(pidfd, selectors.EVENT_READ, _Server(pid))
        return True

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
        self._settle()

    def import_rest_when_quiet(self, quiet_since: float) -> float | None:
        """Import the rest of barca when it costs the runs nothing (engine.local.rest_of_barca).
        Seconds until the next slice; None once done."""
        if self.all_of_barca:
            return None
        wait = self.rest.import_some(quiet_since)
        if wait is not None:
            return wait
        self.all_of_barca = True
        self._settle()
        return None

    def _settle(self) -> None:
        """After imports: what a forked child must find worked out, and what the pool checks."""
        try:  # after every import: an ABC registered since voids what ABCs had cached
            if self.rehearse is not None and self.all_of_barca:
                self.rehearse()
        except Exception:  # noqa: BLE001 - a command then works it out itself
            pass
        seen = self.stamps  # a file is stamped when first loaded: a later edit stays seen
        self.stamps = {path: seen[path] if path in seen else warm_pool.stamp(path)
                       for path in _files_outside_installs()}
        forked_child.work_out_ahead(str(self.root))
        # loaded for good: out of the cyclic collector, so children never traverse (copy) it
        gc.freeze()
        self.spares.drop()  # forked before these imports

    def changed_file(self) -> str | None:
        """A file this pool loaded from outside the installed packages that changed since."""
        return next((path for path, seen in self.stamps.items()
                     if warm_pool.stamp(path) != seen), None)

    def serve(self, listener: socket.socket) -> None:
        self.selector.register(listener, selectors.EVENT_READ, None)
        last_request = last_check = time.monotonic()
        while True:
            now = time.monotonic()
            if now - last_request >= self.idle:
                return
            if now - last_check >= CHECK_SECONDS:
                last_check = now
                if not self.root.is_dir() or not self.is_owner() or self.changed_file() or \
                        warm_pool.identity(self.root, self.environ) != self.key:
                    return
            timeout = min(CHECK_SECONDS, self.idle - (now - last_request))
            rest = self.import_rest_when_quiet(last_request)
            if rest is None:  # every import done: children forked ahead (`spares`)
                rest = self.spares.fork_when_quiet(now - last_request, self._inherited,
                                                   self.run_argv)
            wait = timeout if rest is None else min(timeout, rest)
            for key, _ in self.selector.select(max(0.0, wait)):
                if isinstance(key.data, _Server):  # a server it serves for is gone
                    self.selector.unregister(key.fd)
                    os.close(key.fd)
                    self.servers.discard(key.data.pid)
                    if not self.servers:
                        return
                    continue
                if isinstance(key.data, int):  # a child's pidfd: it exited
                    self._reap(key.data, key.fd)
                    continue
                if isinstance(key.data, spares.Spare):  # its channel closed: it died
                    self.spares.died(key)
                    continue
                last_request = time.monotonic()
                os.utime(self.lock.fileno())  # when it last served: `barca pool`, eviction
                if key.data is None:
                    conn, _ = listener.accept()
                    if not pool_address.peer_is_us(conn):
                        conn.close()  # another user: never served
                        continue
                    conn.setblocking(True)
                    self.selector.register(conn, selectors.EVENT_READ, "client")
                elif not self._answer(key.fileobj):
                    return

    def is_owner(self) -> bool:
        """Whether this is still the project's newest fork server."""
        owner, _ = pool_registry.project_paths(self.directory, self.root)
        try:
            return owner.read_text() == str(os.getpid())
        except OSError:
            return False

    def _answer(self, conn: socket.socket) -> bool:
        """Serve one request; False when this fork server must exit (it went stale)."""
        fds: list[int] = []
        try:
            message, fds = receive(conn, max_fds=3)
            if isinstance(message, Hello):
                if changed := self.changed_file():
                    send(conn, Refused(f"{changed} changed since the warm pool loaded it"))
                    return False
                send(conn, Welcome(sorted(self.modules), os.getpid()))
            elif isinstance(message, (ForkWorker, RunCommand)) and len(fds) == 3 and (
                    self.run_argv or isinstance(message, ForkWorker)):
                self.serve_for(message.env.get(pool_registry.SERVED_BY))
                self._set_idle(message.idle)
                self.spares.heed(message.env)
                too_high = exceeds_own_limits(message.limits)
                if too_high:
                    send(conn, Refused(f"the caller's limit on {too_high} is above the pool's"))
                elif isinstance(message, ForkWorker):
                    send(conn, Forked(self._fork_worker(message, fds)))
                else:
                    send(conn, Forked(self._fork_command(conn, message, fds)))
                    self._drop(conn)  # the child holds the only copy: its end is the client's
            elif isinstance(message, Status):
                send(conn, Reaped(message.pid, self._exit_of(message.pid)))
            elif isinstance(message, Preload):
                self.preload(message.modules)
                self.save_modules()
            else:
                send(conn, Refused(f"cannot serve {type(message).__name__} "
                                   f"with {len(fds)} descriptors"))
        except (OSError, EOFError, ValueError):
            self._drop(conn)
        finally:
            for fd in fds:
                os.close(fd)
        return True

    def _drop(self, conn: socket.socket) -> None:
        try:
            self.selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()

    def _set_idle(self, idle: float) -> None:
        """A run's BARCA_WARM_SECONDS applies to the pool it uses."""
        if idle > 0 and idle != self.idle:
            self.idle = idle
            _rewrite(self.lock, pool_registry.describe(self.root, idle))

    def _watch(self, pid: int) -> int:
        try:
            self.selector.register(os.pidfd_open(pid), selectors.EVENT_READ, pid)
        except OSError:
            pass  # already gone: `_exit_of` reaps it on demand
        return pid

    def _reap(self, pid: int, pidfd: int) -> None:
        self.selector.unregister(pidfd)
        os.close(pidfd)
        self._remember(pid)

    def _remember(self, pid: int) -> bool:
        try:
            done, status, usage = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            done = 0
        if not done:
            return False
        self.spares.ended(pid, usage.ru_minflt)
        self.exits[pid] = describe_exit(os.waitstatus_to_exitcode(status))
        while len(self.exits) > EXITS_KEPT:
            self.exits.popitem(last=False)
        return True

    def _exit_of(self, pid: int, wait: float = 1.0) -> str:
        """How child `pid` ended (asked when its pipes close: it may not be reapable yet)."""
        deadline = time.monotonic() + wait
        while pid not in self.exits and time.monotonic() < deadline:
            if not self._remember(pid):
                time.sleep(0.01)
        return self.exits.get(pid, "")

    def _inherited(self) -> forked_child.Inherited:
        return forked_child.Inherited(self.selector, self.lock, (str(self.root), self.key))

    def _fork_worker(self, request: ForkWorker, fds: list[int]) -> int:
        if (spare := self.spares.hand(request, fds)) is not None:
            return spare
        pid = os.fork()
        if pid:
            return self._watch(pid)
        forked_child.run_worker(self._inherited(), request, fds)

    def _fork_command(self, conn: socket.socket, request: RunCommand, fds: list[int]) -> int:
        if (spare := self.spares.hand(request, [*fds, conn.fileno()])) is not None:
            return spare
        pid = os.fork()
        if pid:
            return self._watch(pid)
        forked_child.run_command(self._inherited(), conn, request, fds, self.run_argv)

    def save_modules(self) -> None:
        _, modules_path = pool_registry.project_paths(self.directory, self.root)
        _write_atomically(modules_path, "\n".join(sorted(self.modules)))


class _Server(NamedTuple):
    """Selector data of a server's pidfd (a child's is its pid, a client's "client")."""

    pid: int


def _installed_dirs() -> tuple[str, ...]:
    """Where installed code lives: the standard library and site-packages. A change there
    changes the pool's identity (`warm_pool.identity`), so it is not stamped file by file."""
    import site

    import barca

    dirs = {*sysconfig.get_paths().values(), *site.getsitepackages(),
            site.getusersitepackages(), os.path.dirname(barca.__file__)}
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs if d)


def _files_outside_installs() -> list[str]:
    installed = _installed_dirs()
    files = []
    for module in list(sys.modules.values()):
        origin = getattr(module, "__file__", None)
        if origin and not os.path.realpath(origin).startswith(installed):
            files.append(origin)
    return files


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _rewrite(lock: Any, text: str) -> None:
    lock.seek(0)
    lock.truncate(0)
    lock.write(text)
    lock.flush()


def main(argv: list[str], run_argv: forked_child.RunArgv | None = None,
         rehearse: Callable[[], None] | None = None) -> None:
    """Serve as the fork server described by `argv` (ROOT KEY IDLE_SECONDS [MODULE ...]); with
    `run_argv`, also run whole commands. `rehearse`, called once the pool has imported what
    it preloads, works out now what every command would otherwise work out again in its
    child (caches only: nothing a command could tell from a fresh process's)."""
    from barca.engine.local import settings

    environ = dict(os.environ)
    root, key, idle, names = Path(argv[0]), argv[1], float(argv[2]), argv[3:]
    directory = pool_registry.state_dir()
    if directory is None or idle <= 0:
        return
    sock_path, lock_path = pool_registry.paths(directory, key)
    owner_path, modules_path = pool_registry.project_paths(directory, root)
    lock = open(lock_path, "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another fork server serves this identity
    _rewrite(lock, pool_registry.describe(root, idle))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork.*")
    _forget_old_projects(directory)
    try:
        pool_registry.evict_beyond(settings.max_pools(), os.getpid(), directory)
    except Exception:  # noqa: BLE001 - a bad BARCA_WARM_POOLS is reported by the run
        pool_registry.evict_beyond(pool_registry.default_limit(), os.getpid(), directory)
    server = ForkServer(root, key, idle, directory, lock, environ, run_argv, rehearse)
    if not server.serve_for(environ.get(pool_registry.SERVED_BY)):
        lock_path.unlink(missing_ok=True)  # the server that started it is gone already
        return
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
        for path in (sock_path, pool_registry.copies_path(lock_path)):
            path.unlink(missing_ok=True)
        if server.is_owner():
            owner_path.unlink(missing_ok=True)
        lock_path.unlink(missing_ok=True)  # still locked by us: no other fork server holds it


def _forget_old_projects(directory: Path, days: float = 30) -> None:
    """Module lists of projects without a run for a month (deleted temp projects, say)."""
    cutoff = time.time() - days * 86400
    for path in directory.glob("*.imports"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
        except OSError:
            pass
