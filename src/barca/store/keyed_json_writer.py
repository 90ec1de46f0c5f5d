"""Writing a key source's keyed-json result from its packed chunks, in a thread.

The file is one JSON object {"keys": [...], "order": [...], "values": [...]} in key order;
"order" (each key's position in the dict's own order) is there only when that is not the key
order (store.artifacts reads it). It is written from the packed chunks the step has already
made, so a tick never encodes the whole dict again, and it becomes the key's result only whole
(a staged file, committed). The keys and the order are known once the keys are sorted, so
they come first; the values follow chunk by chunk as the step packs them, which leaves little
to write once the last one is packed.
"""

from __future__ import annotations

import os
import threading
from queue import SimpleQueue
from typing import Sequence

from barca.fd_writes import write_all
from barca.store.artifact_store import ArtifactStore

_Parts = list[bytes | memoryview]


class KeyedJsonWriter:
    """Writes a keyed-json result in a thread while the caller works on: the keys and the
    order at once, then each chunk of values as it is added. The thread writes with `writev`
    (barca.fd_writes), which lets go of the GIL, so the bytes are written in parallel and never
    copied. The result appears in the store only complete."""

    def __init__(self, store: ArtifactStore, key: str, key_chunks: Sequence[bytes],
                 order_chunks: Sequence[bytes] | None = None) -> None:
        self._store, self._key = store, key
        self._tmp = store.staging(key)
        self._fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._error: list[BaseException] = []
        self._size = 0
        self._values = 0  # chunks of values added so far
        self._queue: SimpleQueue[_Parts | None] = SimpleQueue()
        head: _Parts = [b'{"keys":[', *_items(key_chunks), b"]"]
        if order_chunks is not None:
            head += [b',"order":[', *_items(order_chunks), b"]"]
        self._put([*head, b',"values":['])
        self._thread = threading.Thread(target=self._write, daemon=True)
        self._thread.start()

    def add(self, chunk: bytes) -> None:
        """Write the next chunk of values (the JSON array of a run of them, in key order)."""
        items = memoryview(chunk)[1:-1]
        self._put([b",", items] if self._values else [items])
        self._values += 1

    def close(self) -> int:
        """End the file and wait for the result to be in place; returns its size in bytes."""
        self._put([b"]}"])
        self._stop(keep=True)
        if self._error:
            raise self._error[0]
        return self._size

    def abort(self) -> None:
        """Stop, leaving nothing behind (an earlier result under the key stays as it was)."""
        self._stop(keep=False)

    def _put(self, parts: _Parts) -> None:
        self._size += sum(map(len, parts))
        self._queue.put(parts)

    def _write(self) -> None:
        """Write what was put, as it comes: all that waits in one `writev`, until None."""
        while True:
            parts = self._queue.get()
            if parts is None:
                return
            done = False
            while not self._queue.empty() and not done:
                more = self._queue.get()
                done = more is None
                parts += more or []
            try:
                if not self._error:
                    write_all(self._fd, parts)
            except BaseException as exc:  # noqa: BLE001 - raised again by close()
                self._error.append(exc)
            if done:
                return

    def _stop(self, keep: bool) -> None:
        self._queue.put(None)
        self._thread.join()
        os.close(self._fd)
        if keep and not self._error:
            self._store.commit(self._tmp, self._key)
        else:
            self._store.discard(self._tmp)


def _items(chunks: Sequence[bytes]) -> _Parts:
    """The chunks' items as the inside of one JSON array: each chunk without its brackets."""
    parts: _Parts = []
    for i, chunk in enumerate(chunks):
        if i:
            parts.append(b",")
        parts.append(memoryview(chunk)[1:-1])
    return parts
