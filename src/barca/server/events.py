"""A run's events, numbered from 1, for the clients that follow it (server-sent events).

Reader threads append; asyncio streams wait. A client that reconnects with `Last-Event-ID`
gets what followed it. The log is bounded: past MAX_EVENTS the oldest are dropped and a
client that missed them gets one `gap` event saying how many.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any

import orjson

MAX_EVENTS = 20_000
KEEPALIVE_SECONDS = 15.0


class EventLog:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.events: collections.deque[tuple[int, dict]] = collections.deque(maxlen=MAX_EVENTS)
        self.last_id = 0
        self.closed = False
        self.lock = threading.Lock()
        self.changed = asyncio.Event()  # made in the loop: runs start from the loop's thread
        self.waking = False  # a wake-up is already on its way to the loop

    def append(self, event: dict[str, Any]) -> None:
        with self.lock:
            self.last_id += 1
            self.events.append((self.last_id, event))
            if self.waking:
                return  # one wake-up serves a burst (200,000 keys' events)
            self.waking = True
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self._set)
        except RuntimeError:
            pass  # the loop is gone: the server is stopping

    def _set(self) -> None:
        with self.lock:
            self.waking = False
        self.changed.set()
        self.changed = asyncio.Event()

    def after(self, event_id: int) -> list[tuple[int, dict]]:
        with self.lock:
            events = list(self.events)
        missed = events[0][0] - event_id - 1 if events else 0
        out = [(i, e) for i, e in events if i > event_id]
        if missed > 0 and event_id >= 0:
            out.insert(0, (events[0][0] - 1, {"type": "gap", "missed": missed}))
        return out

    async def follow(self, event_id: int):
        """What follows `event_id`, as it comes; ends after the log is closed. Yields None
        every KEEPALIVE_SECONDS of silence."""
        while True:
            changed = self.changed
            batch = self.after(event_id)
            for item in batch:
                event_id = item[0]
                yield item
            if self.closed and not self.after(event_id):
                return
            if batch:
                continue
            try:
                await asyncio.wait_for(changed.wait(), KEEPALIVE_SECONDS)
            except asyncio.TimeoutError:
                yield None


def sse(event_id: int, event: dict) -> bytes:
    return b"id: %d\ndata: %s\n\n" % (event_id, orjson.dumps(event))
