"""Whole commands through the warm pool: the launcher's side of it.

Client: `barca get` and `barca run` are handed to the project's warm pool when one is up. A
process forked from it, with barca and the pipeline's libraries already imported, runs the
command on this terminal's stdin, stdout and stderr; this process forwards signals and exits
with its exit code. That skips most of Python's start-up cost on every tick, so this side
imports only what reaching the pool takes (os, the C halves of socket, json and signal: no
pathlib, typing, enum or re; `tests/e2e/test_warm_pool.py` holds it to that). When none is
up, it starts one before the command runs here (`_start_pool_for`), so that the pool's imports
overlap the command's own.

Server: the pool's own process runs this module (`python -m barca.cli.warm_launcher ROOT KEY
IDLE_SECONDS [MODULE ...]`, started by `engine.local.warm_pool`), which serves the engine's
fork server and teaches it to run a command with the CLI's entry point, after rehearsing
the parsing of one (`_rehearse`).
"""

from __future__ import annotations

import os
import sys


def run_in_warm_pool(argv: list[str], idle: float, identity: str | None = None) -> int | None:
    """The command's exit code, or None when no warm pool took it (run it here).
    `identity`: the project's pool identity, when the caller computed it already."""
    from barca.engine.local import warm_pool
    from barca.project_root import root_of

    root = root_of(os.getcwd())
    pool = warm_pool.WarmPool.connect(root, identity)
    if pool is None:
        _start_pool_for(argv, root, idle, identity)
        return None
    try:
        return _run_command(pool, argv, idle, root)
    finally:
        pool.close()


def _start_pool_for(argv: list[str], root: str, idle: float, identity: str | None) -> None:
    """Start the project's warm pool now, for a command that runs here and will want workers:
    it imports the pipeline's libraries while this process imports barca and reads the
    project, instead of after (the run waits for it before its first worker). Not for a dry
    run, nor a run on Ray; only when the command names its pipeline files."""
    files = [a for a in argv[1:] if a.endswith(".py") and not a.startswith("-")]
    if not files or "--dry-run" in argv:
        return
    executor = _option(argv, "--executor") or os.environ.get("BARCA_EXECUTOR") or \
        _configured_executor(root)
    if (executor or "local") != "local":
        return
    from pathlib import Path

    from barca.engine.local import warm_pool

    if not warm_pool.unresponsive():
        warm_pool.start_pool_process(Path(root), warm_pool.top_level_imports(Path(root), files),
                                     idle, identity)


def _option(argv: list[str], name: str) -> str | None:
    """The value of `--name V` or `--name=V` in argv, if given."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1:]
    return None


def _configured_executor(root: str) -> str | None:
    """barca.toml's `[executor] kind`, if set (a bad file is the command's to report)."""
    try:
        with open(os.path.join(root, "barca.toml"), "rb") as fh:
            import tomllib

            section = tomllib.load(fh).get("executor")
    except (OSError, ValueError):
        return None
    kind = section.get("kind") if isinstance(section, dict) else None
    return kind if isinstance(kind, str) else None


def _run_command(pool, argv: list[str], idle: float, root: str) -> int | None:
    import _signal  # `signal` without its wrapper module, which imports enum

    from barca.engine.local.pool_messages import (Exited, Forked, RunCommand, receive,
                                                  resource_limits, send)

    # Ctrl-C and kill reach the run, which records itself cancelled; one that comes before
    # the pool says which process runs it is passed on then, not lost with the run going on
    forked, pending = [], []

    def forward(signum: int, _frame) -> None:
        if forked:
            os.kill(forked[0], signum)
        else:
            pending.append(signum)

    signals = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)
    previous = {sig: _signal.signal(sig, forward) for sig in signals}
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
        umask = os.umask(0)
        os.umask(umask)
        send(pool.sock, RunCommand("cli", argv, os.getcwd(), dict(os.environ), umask, idle,
                                   resource_limits()), [0, 1, 2])
        pool.sock.settimeout(None)  # a run takes as long as it takes
        message, _ = receive(pool.sock)
    except (OSError, EOFError, ValueError):
        message = None
    if not isinstance(message, Forked):  # refused: run it here, or stop as asked
        for sig, handler in previous.items():
            _signal.signal(sig, handler)
        for signum in pending:
            os.kill(os.getpid(), signum)
        return None
    pid = message.pid
    forked.append(pid)
    for signum in pending:
        os.kill(pid, signum)
    while not isinstance(message, Exited):
        try:
            message, _ = receive(pool.sock)
        except (OSError, EOFError, ValueError):
            return _died(root, pid)
    return message.code


def _died(root: str, pid: int) -> int:
    """The forked run ended without an exit code (killed: the OOM killer, say): ask the pool
    how, and say so."""
    from barca.engine.local import warm_pool

    how = warm_pool.child_exit(root, pid)
    sys.stderr.write(f"error: the process running this command (pid {pid}) ended "
                     f"{'by ' + how if how.startswith('SIG') else how or 'without an exit status'}"
                     "\n  finished steps are kept; run the command again (BARCA_WARM_SECONDS=0 "
                     "runs it in this process)\n")
    return 3


def _run_entry(entry: str, argv: list[str]) -> int:
    """Run a command here, in a process the pool forked: `barca ARGV`, or a server's run
    (`barca.cli.served_run`); its exit code, as Python itself would exit with it (an uncaught
    error prints its traceback)."""
    try:
        if entry == "served_run":
            from barca.cli.served_run import main as served_run

            return served_run()
        from barca.cli.app import main

        main(argv)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:  # noqa: BLE001 - reported like an uncaught error would be
        import traceback

        traceback.print_exc()
        return 1
    return 0


def _rehearse() -> None:
    """Parse `get` and `run` as a command does, without running them, so that what click
    and the ABCs it checks against cache on first use (about 1 ms and 200 copied pages per
    command) is cached in the pool, not worked out again in every forked command."""
    from barca.cli.app import cli

    for name in ("get", "run"):
        group = cli.make_context("barca", [name, "pipeline.py", "--json"])
        command = cli.get_command(group, name)
        if command is not None:
            command.make_context(name, ["pipeline.py", "--json"], parent=group)


def _serve() -> None:
    from barca.engine.local import fork_server

    fork_server.main(sys.argv[1:], _run_entry, _rehearse)


if __name__ == "__main__":
    _serve()
