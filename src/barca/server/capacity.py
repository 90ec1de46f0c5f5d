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

A machine that runs its own steps against this server's ledger may ask to share the budget
too (`[server] shared_capacity`, engine.local.leased_capacity): over HTTP, since it may be
another machine (server.routes_capacity). It holds a LEASE, which stands for its connection:
its asks wait in the same line as the server's runs', and everything it holds goes when it
gives the lease back, or when it has not been heard from for LEASE_SECONDS (a client killed,
or cut off, holds nothing for long).
"""

from __future__ import annotations

import asyncio
import collections
import os
import secrets
import socket
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

MAX_LINE = 64
LEASE_SECONDS = 10.0  # a lease not heard from for this long is given back
MAX_WAIT_SECONDS = LEASE_SECONDS / 2  # the longest one `want` waits (the lease stays alive)
MAX_LEASES = 256  # leases at once (each is a client's run)


@dataclass(eq=False)
class _Run:
    """A run holding units: a server's run on the socket (`writer`), or a client's lease."""

    writer: asyncio.StreamWriter | None
    run_id: str | None
    held: int = 0
    asks: collections.deque = field(default_factory=collections.deque)  # (units, since)
    lease: str | None = None
    seen: float = 0.0  # monotonic time a lease was last heard from
    asked: int = 0  # the number its client gave a lease's last ask (one at a time) ...
    granted: int = 0  # ... and that of its last ask granted
    changed: asyncio.Event | None = None  # set when a lease's ask is granted


class UnknownLease(KeyError):
    """A lease this server does not hold (never given, given back, or expired)."""


class SharedCapacity:
    """The budget, its socket and who holds what; used on the event loop only."""

    def __init__(self, total: int, path: Path, run_of_pid: Callable[[int], str | None]) -> None:
        self.total, self.path, self.run_of_pid = total, path, run_of_pid
        self.in_use = 0
        self.runs: set[_Run] = set()
        self.line: collections.deque[tuple[_Run, int, float]] = collections.deque()
        self.server: asyncio.AbstractServer | None = None
        self.leases: dict[str, _Run] = {}
        self._expiry: asyncio.Task | None = None

    async def start(self) -> None:
        self.server = await asyncio.start_unix_server(self._serve, path=str(self.path),
                                                      limit=MAX_LINE)
        os.chmod(self.path, 0o600)
        self._expiry = asyncio.create_task(self._expire())

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        if self._expiry is not None:
            self._expiry.cancel()

    # -- a client's lease (server.routes_capacity) --------------------------------------------

    def open_lease(self, run_id: str | None) -> str:
        if len(self.leases) >= MAX_LEASES:
            raise OverflowError(f"{MAX_LEASES} leases are held already")
        lease = secrets.token_hex(12)
        run = _Run(None, run_id, lease=lease, seen=time.monotonic(), changed=asyncio.Event())
        self.leases[lease] = run
        self.runs.add(run)
        return lease

    def heard(self, lease: str) -> _Run:
        """The lease's holder, heard from now; UnknownLease if it has none."""
        run = self.leases.get(lease)
        if run is None:
            raise UnknownLease(lease)
        run.seen = time.monotonic()
        return run

    async def want(self, lease: str, ask: int, units: int, wait: float) -> bool:
        """The lease's ask number `ask` for `units` more (asked once: the same number asked
        again waits for the same ask), waited for up to `wait` seconds: granted or not."""
        run = self.heard(lease)
        if ask > run.asked:
            if run.granted < run.asked:
                raise ValueError(f"ask {run.asked} of this lease is still waiting")
            run.asked = ask
            self.line.append((run, units, time.monotonic()))
            self._grant()
        deadline = time.monotonic() + min(max(wait, 0.0), MAX_WAIT_SECONDS)
        while run.granted < ask and self.leases.get(lease) is run:
            run.changed.clear()
            try:
                await asyncio.wait_for(run.changed.wait(), deadline - time.monotonic())
            except asyncio.TimeoutError:
                break
        run.seen = time.monotonic()
        return run.granted >= ask

    def give(self, lease: str, units: int) -> int:
        """Units the lease's holder no longer uses; what it still holds."""
        run = self.heard(lease)
        self._said(run, [b"give", str(units).encode()])
        return run.held

    def close_lease(self, lease: str) -> None:
        run = self.leases.get(lease)
        if run is not None:
            self._gone(run)

    async def _expire(self) -> None:
        """Give back the leases not heard from for LEASE_SECONDS."""
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for run in [r for r in self.leases.values() if now - r.seen > LEASE_SECONDS]:
                self._gone(run)

    def _gone(self, run: _Run) -> None:
        """A run's connection closed, or a lease ended: all it held or asked for goes."""
        self.runs.discard(run)
        if run.lease is not None:
            self.leases.pop(run.lease, None)
            run.changed.set()  # a `want` waiting for it answers now
        self.in_use -= run.held
        run.held = 0
        self.line = collections.deque(a for a in self.line if a[0] is not run)
        self._grant()

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
            self._gone(run)
            writer.close()

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
            if run.writer is not None:
                run.writer.write(b"ok\n")
            else:
                run.granted = run.asked
                run.changed.set()


def _peer(writer: asyncio.StreamWriter) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of a Unix socket."""
    sock = writer.get_extra_info("socket")
    try:
        pid, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                          struct.calcsize("3i")))
    except (OSError, AttributeError):
        return None
    return pid, uid
