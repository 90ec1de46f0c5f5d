"""Connections a client cannot hold forever: uvicorn's HTTP/1.1 protocol with a deadline for a
request's headers and a cap on open connections.

uvicorn closes an idle kept-alive connection, but not one that sends half a request line and
then trickles (a slowloris: 1,500 such connections were held indefinitely). Here a connection
whose request has not been fully headed within HEADER_SECONDS of its opening, or of its
previous answer, is closed; past MAX_CONNECTIONS open at once, the
oldest that has not sent a whole request head is closed to make room (a new one only when
every open one is being answered). Bodies have their own deadline (`guard.BODY_SECONDS`).
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_SECONDS = 10.0
MAX_CONNECTIONS = 256


class BoundedH11Protocol(H11Protocol):
    header_timer: asyncio.TimerHandle | None = None
    opened_at: float = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.opened_at = self.loop.time()
        if len(self.connections) > MAX_CONNECTIONS and not self._evict_a_silent_one():
            transport.close()
            return
        self._arm()

    def _evict_a_silent_one(self) -> bool:
        """Make room by closing the oldest connection that has not sent a whole request head
        (a stalled client's, not one being answered); False if every one is busy."""
        silent = [c for c in self.connections if c is not self and
                  isinstance(c, BoundedH11Protocol) and c.conn.their_state is h11.IDLE and
                  not c.transport.is_closing()]
        if not silent:
            return False
        min(silent, key=lambda c: c.opened_at).transport.close()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()  # a kept-alive connection's next request gets the same deadline

    def _arm(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
        self.header_timer = self.loop.call_later(HEADER_SECONDS, self._headers_late)

    def _headers_late(self) -> None:
        """Close the connection if it still has not sent a whole request head (h11 stays
        IDLE on the client's side until the head is complete)."""
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()
