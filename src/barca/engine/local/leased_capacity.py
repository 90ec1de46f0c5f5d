"""A ledger client's share of its server's `--capacity` (`[server] shared_capacity`): the
same budget as `shared_capacity` gives a server's own runs, reached over HTTP because this
machine may be another one (server.routes_capacity is the other end).

The executor calls it exactly as it calls `SharedBudget`: `take` never blocks (it says
whether the units are here, and asks for what is missing, one ask at a time), `give` hands
units back, and `fileno` is a pipe the executor watches with its workers, written to when an
ask was granted. Two threads do the HTTP, so that a slow network never stalls the executor:
one waits on the ask (`want`, long-polled, sent again while it waits in line), the other
sends the gives and keeps the lease alive (`renew`) meanwhile. The server gives the lease
back, with all it holds, when it has not heard from it for its `lease_seconds`: a client that
dies holds nothing for long.

Should the lease be lost mid-run (the server went away or forgot it), the run goes on
without the shared limit, as a server's run does when its server stops, and says so once.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Callable

import orjson

from barca.errors import InfraError

WAIT_SECONDS = 4.0  # one `want` request waits this long for its grant, then is sent again
TIMEOUT_SECONDS = 10.0  # beyond the wait, for any request
CLOSE_SECONDS = 5.0  # how long closing waits for the lease to be given back


class LeasedBudget:
    def __init__(self, url: str, headers: dict[str, str], say: Callable[[str], None]) -> None:
        import httpx

        self.url, self.say = url.rstrip("/"), say
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=TIMEOUT_SECONDS)
        self.lease, seconds = self._open()
        self.renew_every = seconds / 3
        self.read_end, self.write_end = os.pipe()
        os.set_blocking(self.read_end, False)
        self.lock = threading.Lock()
        self.spare = 0  # granted, not taken yet
        self.asked = 0  # units of the ask in flight
        self.number = 0  # the asks' numbers, as the server knows them
        self.granted = False  # the ask in flight was granted (the executor is told)
        self.gone: str | None = None  # why there is no shared limit any more
        self.closing = threading.Event()
        self.asking = threading.Event()
        self.outbox: queue.Queue = queue.Queue()
        self.sender = threading.Thread(target=self._send_loop, daemon=True)
        self.asker = threading.Thread(target=self._ask_loop, daemon=True)
        self.sender.start()
        self.asker.start()

    def _open(self) -> tuple[str, float]:
        import httpx

        try:
            response = self.http.post("/capacity/leases", content=b"{}",
                                      headers={"Content-Type": "application/json"})
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            self.http.close()
            raise InfraError(f"cannot share the capacity of the server {self.url}: {exc}",
                             "check that it runs, or set shared_capacity = false in [server] "
                             "of barca.toml, or pass --local") from None
        if response.status_code != 201:
            self.http.close()
            raise InfraError(f"the server {self.url} gives no capacity lease: "
                             f"{body.get('error') if isinstance(body, dict) else body}",
                             body.get("remediation") if isinstance(body, dict) else None)
        return body["lease"], float(body["lease_seconds"])

    # -- what the executor calls (its thread) --------------------------------------------------

    def fileno(self) -> int:
        return self.read_end

    def take(self, units: int) -> bool:
        """Hold `units` more now if they were granted; else ask for them (once) and say no."""
        with self.lock:
            if self.gone is not None or units <= 0:
                return True
            if self.spare >= units:
                self.spare -= units
                return True
            if not self.asked:
                self.asked, self.number = units - self.spare, self.number + 1
                self.asking.set()
            return False

    def give(self, units: int) -> None:
        if units > 0 and self.gone is None:
            self.outbox.put(units)

    def readable(self) -> None:
        """An ask was granted, or the lease lost (the pipe was written to)."""
        try:
            os.read(self.read_end, 4096)
        except BlockingIOError:
            pass
        with self.lock:
            if self.granted:
                self.spare += self.asked
                self.asked, self.granted = 0, False

    def close(self) -> None:
        """Give the lease back (what it holds goes with it)."""
        with self.lock:  # no thread writes to the pipe from now on
            self.closing.set()
        self.asking.set()
        self.outbox.put(None)
        self.sender.join(CLOSE_SECONDS)
        self.http.close()
        for fd in (self.read_end, self.write_end):
            os.close(fd)

    # -- the threads ----------------------------------------------------------------------------

    def _ask_loop(self) -> None:
        while True:
            self.asking.wait()
            if self.closing.is_set():
                return
            with self.lock:
                number, units = self.number, self.asked
            answer = self._call("want", {"ask": number, "units": units,
                                         "wait_seconds": WAIT_SECONDS}, WAIT_SECONDS)
            if answer is None:
                return
            if answer.get("granted"):
                with self.lock:
                    self.granted = True
                    self.asking.clear()
                self._wake()

    def _send_loop(self) -> None:
        while True:
            try:
                units = self.outbox.get(timeout=self.renew_every)
            except queue.Empty:
                units = 0
            if units is None:  # closing
                import httpx

                try:
                    self.http.delete(f"/capacity/leases/{self.lease}", timeout=CLOSE_SECONDS)
                except httpx.HTTPError:  # the server expires it
                    pass
                return
            if self.closing.is_set():
                continue
            if self._call("give" if units else "renew", {"units": units} if units else {},
                          0.0) is None:
                return

    def _call(self, verb: str, body: dict, wait: float) -> dict | None:
        """POST to the lease; None once the lease is lost (said once) or closing."""
        import httpx

        if self.gone is not None or self.closing.is_set():
            return None
        why = None
        try:
            response = self.http.post(f"/capacity/leases/{self.lease}/{verb}",
                                      content=orjson.dumps(body),
                                      headers={"Content-Type": "application/json"},
                                      timeout=TIMEOUT_SECONDS + wait)
            if response.status_code == 200:
                return response.json()
            why = f"{response.status_code} {response.json().get('error', '')}"
        except (httpx.HTTPError, ValueError) as exc:
            why = str(exc) or type(exc).__name__
        if self.closing.is_set():
            return None
        with self.lock:
            first, self.gone = self.gone is None, why
        if first:
            self.say(f"[barca] warning: lost the capacity lease on the server {self.url} "
                     f"({why}): this run's steps go on without the server's --capacity")
            self._wake()
        return None

    def _wake(self) -> None:
        with self.lock:
            if not self.closing.is_set():
                os.write(self.write_end, b"!")
