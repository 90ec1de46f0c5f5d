"""A server's children (`barca.cli.served_run`): its runs, and the reads it answers in a
process of their own (`/state`, `/list`, `/nodes`, the read-only commands of `--server`
clients).

A child is forked from the project's warm pool when one is up (barca and the pipeline's
libraries already imported: a tick costs a fork), else started as a fresh Python. Either way
the child checks, records and prints as the command typed in a terminal would, and a crash
in it (a library that segfaults, the OOM killer) ends that run, never the server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from barca.engine.local import settings, warm_pool
from barca.engine.local.pool_messages import (Exited, Forked, RunCommand, receive,
                                              resource_limits, send)


class CommandProcess:
    """A running command: its pid, a way to signal it, and its exit code when it ends."""

    def __init__(self, pid: int, popen: subprocess.Popen | None = None,
                 pool: warm_pool.WarmPool | None = None, root: Path | None = None) -> None:
        self.pid, self.popen, self.pool, self.root = pid, popen, pool, root

    def signal(self, signum: int) -> None:
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    def wait(self) -> int:
        """Block until the command ends; its exit code (128 + N for a signal N; 3 when the
        pool cannot say how its child ended)."""
        if self.popen is not None:
            code = self.popen.wait()
            return 128 - code if code < 0 else code
        assert self.pool is not None and self.root is not None
        try:
            while True:
                message, _ = receive(self.pool.sock)
                if isinstance(message, Exited):
                    return message.code
        except (OSError, EOFError, ValueError):
            return self._died()
        finally:
            self.pool.close()

    def _died(self) -> int:
        """The forked command ended without reporting (killed): its status, from the pool."""
        how = warm_pool.child_exit(self.root, self.pid)
        if how.startswith("code "):
            return int(how.split()[1])
        name = how.split()[0] if how.startswith("SIG") else ""
        return 128 + signal.Signals[name].value if name in signal.Signals.__members__ else 3


def start_served_run(root: Path, env: dict[str, str], fds: tuple[int, int, int]
                     ) -> CommandProcess:
    """Start a server's child (`barca.cli.served_run`) in `root` with `env` on these stdin
    (its order), stdout (its events) and stderr descriptors (the caller keeps and closes its
    copies): forked from the warm pool when one is up, else `python -m barca.cli.served_run`."""
    idle = settings.warm_seconds()
    pool = warm_pool.WarmPool.connect(root) if idle else None
    if pool is not None:
        try:
            umask = os.umask(0)
            os.umask(umask)
            send(pool.sock, RunCommand("served_run", [], str(root), dict(env), umask, idle,
                                       resource_limits()), list(fds))
            pool.sock.settimeout(None)
            message, _ = receive(pool.sock)
            if isinstance(message, Forked):
                return CommandProcess(message.pid, pool=pool, root=root)
        except (OSError, EOFError, ValueError):
            pass
        pool.close()  # refused (its code changed, a limit): start this one fresh
    popen = subprocess.Popen([sys.executable, "-m", "barca.cli.served_run"], cwd=root,
                             env=env, stdin=fds[0], stdout=fds[1], stderr=fds[2],
                             close_fds=True)
    return CommandProcess(popen.pid, popen=popen)
