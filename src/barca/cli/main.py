"""Entry point of the `barca` command.

A plain `get` whose answer is kept is answered at once (`barca.cli.quick_get`). Otherwise `get`
and `run` are handed to the project's warm pool when one is up (see
`barca.cli.warm_launcher`); neither path takes a command for a server or a configured server's
ledger (`_remote`). Without a pool, and for every other command, the command runs here.
Nothing heavy is imported before that choice is made.
"""

from __future__ import annotations

import os
import sys

DELEGATED = ("get", "run")


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0].endswith(".py"):
        argv = ["get", *argv]  # `barca pipeline.py` is `barca get pipeline.py`
    delegated = bool(argv) and argv[0] in DELEGATED
    if not delegated:  # a quick answer is for `--help`, `-h` or `--version` alone
        from barca.cli.top_help import quick_answer

        answer = quick_answer(argv)
        if answer is not None and _answered(answer + "\n"):
            return
    remote = delegated and _remote(argv)
    identity = None  # the project's, once computed: its warm pool is found by it
    if argv and argv[0] == "get" and not remote:
        from barca.cli.quick_get import quick_get

        answered, identity = quick_get(argv)
        if answered:
            os._exit(0)  # written straight to the descriptor: nothing buffered or to tear down
    idle = _warm_seconds() if delegated and not remote else 0.0
    if idle:
        from barca.cli.warm_launcher import run_in_warm_pool

        code = run_in_warm_pool(argv, idle, identity)
        if code is not None:  # what it printed, the pool's child printed
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)  # nothing here needs tearing down: a millisecond and more saved
    from barca.cli.app import main as run_here

    run_here(argv)


def _remote(argv: list[str]) -> bool:
    """Whether this get/run goes to a server, or to a configured server's ledger
    (`server_config.configured_server`: BARCA_SERVER or `[server] url`): then neither a kept
    answer nor the warm pool takes it, since the server must be named, checked and sent the
    posts it missed, and the ledger decides the cache, never a local answer. A bad setting
    counts as a server: the command reports it."""
    if "--local" in argv:
        return False
    if "--server" in argv or any(a.startswith("--server=") for a in argv):
        return True
    from barca.server_config import configured_server

    try:
        return configured_server() is not None
    except Exception as exc:
        from barca.errors import BarcaError

        if isinstance(exc, BarcaError):  # a bad setting: the command reports it
            return True
        raise


def _answered(text: str) -> bool:
    """Write a quick answer; False when stdout cannot take it (a full disk, a terminal that
    hung up): then click's path answers, and reports that as for every command (exit 3). It
    goes straight to the descriptor, leaving no buffered copy to fail again at exit; a reader
    that is gone (`| head`) wanted no more."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # stdout replaced by a caller: it takes it
        sys.stdout.write(text)
        return True
    data = text.encode(sys.stdout.encoding or "utf-8", sys.stdout.errors or "strict")
    try:
        while data:
            data = data[os.write(fd, data):]
    except BrokenPipeError:
        pass
    except OSError:
        return False
    return True


def _warm_seconds() -> float:
    """BARCA_WARM_SECONDS, 0 when the pool is off; a bad value is reported by the command."""
    from barca.engine.local import warm_seconds
    from barca.errors import UsageError

    try:
        return warm_seconds()
    except UsageError:
        return 0.0


if __name__ == "__main__":
    main()
