"""Writing a key source's keyed-json result from its packed chunks, in two threads.

The file is one JSON object {"keys": [...], "order": [...], "values": [...]} in key order;
"order" (each key's position in the dict's own order) is there only when that is not the key
order (store.artifacts reads it). It is written from the packed chunks the step has already
made, so a tick never encodes the whole dict again, and it becomes the key's result only whole
(a staged file, committed). The keys and the order are known once the keys are sorted, so they
are written first, while the values are packed; what is left to write after that is the
values alone.
"""

from __future__ import annotations

import os
import threading
from typing import Sequence

from barca.fd_writes import write_all
from barca.store.artifact_store import ArtifactStore


class KeyedJsonWriter:
    """Writes a keyed-json result from packed chunks (each the JSON array of a run of keys or
    values) in two threads while the caller works on: the keys and the order as soon as the
    keys are sorted, the values once they are packed. Each thread writes with `writev`
    (barca.fd_writes), which lets go of the GIL, so the bytes are written in parallel and never
    copied. The result appears in the store only complete."""

    def __init__(self, store: ArtifactStore, key: str, key_chunks: Sequence[bytes],
                 order_chunks: Sequence[bytes] | None = None) -> None:
        self._store, self._key = store, key
        self._tmp = store.staging(key)
        self._fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._error: list[BaseException] = []
        self._size = 0
        order = [] if order_chunks is None else [b',"order":[', *_items(order_chunks), b"]"]
        self._thread = self._start([b'{"keys":[', *_items(key_chunks), b"]", *order,
                                    b',"values":['])

    def finish(self, value_chunks: Sequence[bytes]) -> None:
        """Start writing the values, which end the file."""
        self._thread.join()
        self._thread = self._start([*_items(value_chunks), b"]}"])

    def close(self) -> int:
        """Wait for the result to be in place; returns its size in bytes."""
        self._thread.join()
        self._end(keep=not self._error)
        if self._error:
            raise self._error[0]
        return self._size

    def abort(self) -> None:
        """Stop, leaving nothing behind (an earlier result under the key stays as it was)."""
        self._thread.join()
        self._end(keep=False)

    def _start(self, parts: list[bytes | memoryview]) -> threading.Thread:
        self._size += sum(map(len, parts))
        thread = threading.Thread(target=self._write, args=(parts,), daemon=True)
        thread.start()
        return thread

    def _write(self, parts: list[bytes | memoryview]) -> None:
        try:
            if not self._error:
                write_all(self._fd, parts)
        except BaseException as exc:  # noqa: BLE001 - raised again by close()
            self._error.append(exc)

    def _end(self, keep: bool) -> None:
        os.close(self._fd)
        if keep:
            self._store.commit(self._tmp, self._key)
        else:
            self._store.discard(self._tmp)


def _items(chunks: Sequence[bytes]) -> list[bytes | memoryview]:
    """The chunks' items as the inside of one JSON array: each chunk without its brackets."""
    parts: list[bytes | memoryview] = []
    for i, chunk in enumerate(chunks):
        if i:
            parts.append(b",")
        parts.append(memoryview(chunk)[1:-1])
    return parts
