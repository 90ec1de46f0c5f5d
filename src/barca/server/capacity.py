"""`barca serve --capacity N`: one budget of `weight=` units shared by the steps of every run
of the server, on top of each run's own capacity.

Each run is a process of its own with its own worker pool (`engine.local.pool`); before a
worker takes a step heavier than what it holds, the run asks the server for the difference
over a Unix socket in the server's private spool (`engine.local.shared_capacity`, the other
end), and gives units back when a worker's lease is empty. Asks are served first come, first
served across runs, with the head reserved: only the oldest ask may be granted, so a light
step never overtakes a heavy one that waits. A step heavier than the whole budget is granted
once nothing else holds any: it runs alone. A run that ends, or dies, closes its connection
and everything it held or asked for goes with it. The budget lives in memory only.

Lines on the socket: the run sends `want N` and `give N`, the server answers each `want`
with `ok` once granted. A connection is matched to its run by the peer's pid
(`SO_PEERCRED`), and refused from another user.
"""

from __future__ import annotations

import asyncio
import collections
import os
import socket
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

MAX_LINE = 64


@dataclass(eq=False)
class _Run:
    writer: asyncio.StreamWriter
    run_id: str | None
    held: int = 0
    asks: collections.deque = field(default_factory=collections.deque)  # (units, since)


class SharedCapacity:
    """The budget, its socket and who holds what; used on the event loop only."""

    def __init__(self, total: int, path: Path, run_of_pid: Callable[[int], str | None]) -> None:
        self.total, self.path, self.run_of_pid = total, path, run_of_pid
        self.in_use = 0
        self.runs: set[_Run] = set()
        self.line: collections.deque[tuple[_Run, int, float]] = collections.deque()
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self.server = await asyncio.start_unix_server(self._serve, path=str(self.path),
                                                      limit=MAX_LINE)
        os.chmod(self.path, 0o600)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

    def describe(self) -> dict:
        """`/queue`'s `capacity`: the budget, the units in use, who holds them and the steps
        waiting for room, oldest first."""
        now = time.monotonic()
        return {"total": self.total, "source": "--capacity", "in_use": self.in_use,
                "runs": [{"run_id": r.run_id, "units": r.held} for r in self.runs if r.held],
                "waiting": [{"run_id": r.run_id, "weight": units,
                             "waiting_seconds": round(now - since, 3)}
                            for r, units, since in self.line]}

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = _peer(writer)
        if peer is None or peer[1] != os.getuid():
            writer.close()
            return
        run = _Run(writer, self.run_of_pid(peer[0]))
        self.runs.add(run)
        try:
            while True:
                try:
                    line = await reader.readline()
                except (ValueError, ConnectionError):  # a line past MAX_LINE, a reset
                    break
                if not line:
                    break
                self._said(run, line.split())
        finally:
            self.runs.discard(run)
            self.in_use -= run.held
            self.line = collections.deque(a for a in self.line if a[0] is not run)
            writer.close()
            self._grant()

    def _said(self, run: _Run, words: list[bytes]) -> None:
        if len(words) != 2 or not words[1].isdigit() or int(words[1]) < 1:
            return
        units = int(words[1])
        if words[0] == b"want":
            self.line.append((run, units, time.monotonic()))
        elif words[0] == b"give":
            units = min(units, run.held)
            run.held -= units
            self.in_use -= units
        self._grant()

    def _grant(self) -> None:
        """Grant the oldest asks while they fit (a step heavier than the budget once
        nothing else holds any)."""
        while self.line:
            run, units, _ = self.line[0]
            if self.in_use and self.in_use + units > self.total:
                return
            self.line.popleft()
            run.held += units
            self.in_use += units
            run.writer.write(b"ok\n")


def _peer(writer: asyncio.StreamWriter) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of a Unix socket."""
    sock = writer.get_extra_info("socket")
    try:
        pid, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                          struct.calcsize("3i")))
    except (OSError, AttributeError):
        return None
    return pid, uid
