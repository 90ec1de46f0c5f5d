"""The warm pool's forked children: how a child of the fork server becomes what a fresh process
would have been, a worker of the requesting run (`run_worker`) or a whole `barca` command
(`run_command`).

A child first lets go of everything of the fork server's (its listener, clients' connections,
pidfds, lock and signal handlers), then takes the caller's limits, stdin/stdout/stderr,
environment and directory. Neither function returns: the child exits when its work ends.
"""

from __future__ import annotations

import _thread
import io
import os
import select
import selectors
import signal
import socket
import sys
from pathlib import Path
from typing import Any, Callable, NamedTuple, NoReturn

from barca.engine.local import (page_copies, pool_registry, settings, warm_heap, warm_pool,
                                worker)
from barca.engine.local.pool_messages import (Exited, ForkWorker, RunCommand, apply_limits,
                                              receive, send)
from barca.engine.worker import import_paths, peak_memory
from barca.errors import UsageError

RunArgv = Callable[[str, list[str]], int]  # runs an entry (RunCommand) here; its exit code
_ANSWERED = [False]  # a command's exit code is sent: the client's end is no longer its end


class Inherited(NamedTuple):
    """What a child inherits of the fork server: what it must let go of, and its identity."""

    selector: selectors.BaseSelector  # its listener, clients' connections and pidfds
    lock: Any  # the identity's lock file: held while the fork server lives
    identity: tuple[str, str]  # (project root, warm_pool.identity of it)


def work_out_ahead(root: str) -> None:
    """What every child would work out the same, worked out once by the fork server before it
    forks them: where the loaded modules came from, and which are loaded."""
    import_paths.remember_entries(root)
    worker.remember_loaded()


def wait_as_spare(inherited: Inherited, channel: socket.socket, run_argv: RunArgv | None,
                  heap: int = 0, copies: int = 0) -> NoReturn:
    """A child forked before any request asked for it (the fork off the request's path): it
    lets go of the fork server's things now, meanwhile makes its own up to `copies` of the
    pool's pages the last command wrote (engine.local.page_copies) and `heap` bytes of new
    memory ready (engine.local.warm_heap), then waits on `channel` for the one request it
    serves, a worker's (its three fds) or a command's (those and the client's connection), as
    a child forked for it would. The server closing `channel` unused ends it."""
    try:
        _let_go(inherited, keep=None)
        name = _name_process(pool_registry.SPARE_NAME)  # `ps` shows what waits
        page_copies.remember_inherited()

        def asked() -> bool:
            return bool(select.select([channel], [], [], 0)[0])

        page_copies.copy_ahead(str(pool_registry.copies_path(inherited.lock.name)), copies, asked)
        warm_heap.prepare(heap, asked)
        request, fds = receive(channel, max_fds=4)
        channel.close()
        if name:
            _name_process(name)
    except BaseException:  # noqa: BLE001 - its channel closed (the pool let it go), or a signal
        os._exit(0)
    if isinstance(request, ForkWorker):
        run_worker(inherited, request, fds, let_go=False)
    run_command(inherited, socket.socket(fileno=fds[3]), request, fds[:3], run_argv,
                let_go=False)


def _name_process(name: str) -> str:
    """Set this process's name (`ps`, /proc/PID/comm); the one it had ("" if unknown)."""
    try:
        with open("/proc/self/comm", "r+") as comm:
            before = comm.read().strip()
            comm.seek(0)
            comm.write(name)
        return before
    except OSError:
        return ""


def run_worker(inherited: Inherited, request: ForkWorker, fds: list[int],
               let_go: bool = True) -> NoReturn:
    """Become a fresh worker of the requesting run (`fds`: its pipes and stderr)."""
    try:
        if let_go:
            _let_go(inherited, keep=None)
        apply_limits(request.limits)
        os.setsid()  # the run stops a worker and whatever it started with one killpg
        in_fd, out_fd, stderr = fds
        devnull = os.open(os.devnull, os.O_RDWR)
        _take_stdio((devnull, os.dup(devnull), stderr), request.env, request.root)
        peak_memory.forked()  # its steps' peaks are read with getrusage alone
        worker.run(in_fd, out_fd, Path(request.root))
    finally:
        os._exit(0)


def run_command(inherited: Inherited, conn: socket.socket, request: RunCommand,
                fds: list[int], run_argv: RunArgv | None, let_go: bool = True) -> NoReturn:
    """Run `barca ARGV` as the client process would have (`fds`: its stdin, stdout, stderr),
    and tell the client its exit code over `conn`."""
    code = 1
    try:
        if let_go:
            _let_go(inherited, keep=conn)
        apply_limits(request.limits)
        os.umask(request.umask)
        _take_stdio(fds, request.env, request.cwd)
        _die_with_client(conn)
        warm_pool.inherit_identity(*inherited.identity)
        from barca.store.db import leave_open_at_exit  # the pool has it once it has the CLI

        leave_open_at_exit()  # this process ends with os._exit: nothing to close before
        sys.argv = ["barca", *request.argv]
        assert run_argv is not None
        code = run_argv(request.entry, request.argv)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - whatever a stream raises (cli.output's
                pass  # InfraError for stdout), this child must still report and exit
        try:
            # the client's stdout and stderr, the project's database: closed before the client
            # exits, not after this process's memory is freed (a caller reading its output
            # to the end would wait for that)
            worker.close_all_but(conn.fileno())
            _ANSWERED[0] = True  # the client may go now: its watcher no longer kills this
            send(conn, Exited(int(code)))
            if _copies_wanted(request.env):  # off the client's path
                page_copies.leave(str(pool_registry.copies_path(inherited.lock.name)))
        finally:
            os._exit(int(code))


def _copies_wanted(env: dict[str, str]) -> bool:
    """BARCA_SPARE_HEAP_MB, as the command was given it, lets spares copy pages ahead."""
    try:
        return settings.spare_heap_bytes(env) > 0
    except UsageError:  # a bad value: the command reported it
        return False


def _let_go(inherited: Inherited, keep: socket.socket | None) -> None:
    """Let go of the fork server's sockets, pidfds, lock and signal handling."""
    for key in list(inherited.selector.get_map().values()):
        if isinstance(key.fileobj, int):
            os.close(key.fd)  # a sibling's or a server's pidfd
        elif key.fileobj is not keep:
            key.fileobj.close()
    inherited.selector.close()
    inherited.lock.close()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _die_with_client(conn: socket.socket) -> None:
    """A command forked for a client ends with it: when the client's end of the connection
    closes (it was killed, say by a scheduler's timeout), this process is killed as the
    client was, and its workers follow when their pipes close. Its run is later shown
    `interrupted`, as a killed fresh run is."""
    def watch() -> None:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN | select.POLLHUP)
        poller.poll()  # the client never writes after `RunCommand`: this is its end
        if not _ANSWERED[0]:
            os.kill(os.getpid(), signal.SIGKILL)

    # a bare thread: threading's would have this thread wait until it has started (half a
    # millisecond or more on every command); this process ends with os._exit, never joins it
    _thread.start_new_thread(watch, ())


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
    for name in [name for name in os.environ if name not in env]:
        del os.environ[name]
    for name, value in env.items():  # mostly the pool's own already (its identity's)
        if os.environ.get(name) != value:
            os.environ[name] = value
    os.chdir(cwd)
