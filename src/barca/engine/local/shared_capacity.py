"""A run's share of its server's capacity (`barca serve --capacity`, `server.capacity` is the
other end): the local executor holds the server's units as well as its own before a worker
takes a heavier step, and gives them back when the worker's lease is empty.

The server names its socket in BARCA_SHARED_CAPACITY in the environment of its runs (never of
their workers: a step that starts a run of its own must not wait for units its caller holds).
Asking never blocks: `take` says whether the units are there, and asks the server for what is
missing (one ask at a time); the answer arrives on the socket, which the executor watches with
its workers, and the next `take` finds the units. Units granted and not taken yet are kept
for the next step. Should the server go away, the run goes on without a shared limit.
"""

from __future__ import annotations

import os
import socket

from barca.errors import InfraError

SHARED_CAPACITY_ENV = "BARCA_SHARED_CAPACITY"


class SharedBudget:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.spare = 0  # granted, not taken yet
        self.asked = 0  # the ask in flight
        self.gone = False  # the server closed the socket: no shared limit any more
        self.buffer = b""

    @classmethod
    def connect(cls) -> "SharedBudget | None":
        """This run's share, when its server has a capacity; None otherwise."""
        path = os.environ.get(SHARED_CAPACITY_ENV)
        if not path:
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError as exc:
            sock.close()
            raise InfraError(f"the server's capacity at {path} does not answer: {exc}",
                             "the server that started this run has stopped; start the run "
                             "again") from None
        sock.setblocking(False)
        return cls(sock)

    def fileno(self) -> int:
        return self.sock.fileno()

    def take(self, units: int) -> bool:
        """Hold `units` more now if they were granted; else ask for them (once) and say no."""
        if self.gone or units <= 0:
            return True
        if self.spare >= units:
            self.spare -= units
            return True
        if not self.asked:
            self.asked = units - self.spare
            self._send(f"want {self.asked}\n")
        return False

    def give(self, units: int) -> None:
        if units > 0 and not self.gone:
            self._send(f"give {units}\n")

    def readable(self) -> None:
        """Read the server's answers (the executor's selector saw the socket readable)."""
        try:
            data = self.sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.gone = True
            return
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            if line == b"ok":
                self.spare += self.asked
                self.asked = 0

    def _send(self, text: str) -> None:
        try:
            self.sock.sendall(text.encode())
        except BlockingIOError:
            self.sock.setblocking(True)  # a few bytes: the buffer is never full for long
            self.sock.sendall(text.encode())
            self.sock.setblocking(False)
        except OSError:
            self.gone = True

    def close(self) -> None:
        self.sock.close()
