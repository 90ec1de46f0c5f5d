"""Whether the process that wrote a row (a `running` run, a step lease) still runs.

A row names its process by pid, host and the kernel's start time of that pid: pids are reused,
so a live process with the same pid but another start time is not the owner. Off Linux there
is no start time to read (`process_start` gives None) and only the pid is checked. A process
on another host cannot be checked from here and counts as alive.
"""

from __future__ import annotations

import os


def process_start(pid: int) -> str | None:
    """The kernel's start time of a process (field 22 of /proc/PID/stat), None off Linux."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def owner_gone(pid: int | None, host: str | None, proc_start: str | None) -> bool:
    """True when the process a row names certainly no longer runs."""
    import socket  # here: a kept `get` answer records its row with `process_start` alone

    if pid is None or host != socket.gethostname():
        return False
    if not pid_running(pid):
        return True
    return proc_start is not None and os.path.exists("/proc/self/stat") and \
        process_start(pid) != proc_start


def pid_running(pid: int) -> bool:
    """Whether a process with this pid runs. An exited process its parent has not reaped yet
    (a zombie: a killed run's orphaned worker, until init reaps it) does not."""
    if os.path.exists("/proc/self/stat"):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
