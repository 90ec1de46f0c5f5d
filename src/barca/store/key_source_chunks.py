"""A key source's keys and values as of its latest success, stored chunk by chunk.

At 200,000 keys a sensor's packed keys and values are megabytes, and a tick usually changes one
chunk of them. The coordinator tells the sensor's step the digest of every chunk it has stored
here; the step sends back only the chunks whose digest differs, and the coordinator rebuilds
the whole columns from those and the stored ones. Only changed chunks are written back.
"""

from __future__ import annotations

import sqlite3
from typing import Sequence

from barca.packed_columns import chunk_digest

PARTS = ("keys", "values", "order")  # order: see engine.protocol.PackedColumns


class SourceChunks:
    """The stored chunks of one key source: digests first (read before its step starts), then
    the bytes (read while it runs), each checked against its digest."""

    def __init__(self, digests: dict[str, list[bytes]]) -> None:
        self.digests = digests
        self.data: dict[str, list[bytes | None]] = {}

    @classmethod
    def read_digests(cls, conn: sqlite3.Connection | None, node_id: str) -> "SourceChunks":
        digests: dict[str, list[bytes]] = {part: [] for part in PARTS}
        if conn is not None:
            for part, chunk, digest in conn.execute(
                    "SELECT part, chunk, digest FROM key_source_chunk WHERE node_id = ? "
                    "ORDER BY part, chunk", (node_id,)):
                if part in digests and chunk == len(digests[part]):  # a gap ends what is known
                    digests[part].append(digest)
        return cls(digests)

    def known(self) -> tuple[tuple[bytes, ...], ...]:
        """What the step is told: the digests of the stored keys, values and order chunks."""
        return tuple(tuple(self.digests[part]) for part in PARTS)

    def load(self, conn: sqlite3.Connection | None, node_id: str) -> None:
        """The bytes of each chunk whose digest was told; one that does not match it (another
        run wrote meanwhile, or the row was damaged) is left out."""
        self.data = {part: [None] * len(self.digests[part]) for part in PARTS}
        if conn is None or not any(self.digests.values()):
            return
        for part, chunk, data in conn.execute(
                "SELECT part, chunk, data FROM key_source_chunk WHERE node_id = ?", (node_id,)):
            told = self.digests.get(part, [])
            if chunk < len(told) and chunk_digest(data) == told[chunk]:
                self.data[part][chunk] = data

    def holds(self, part: str, i: int, digest: bytes) -> bool:
        """Whether chunk i of `part` is stored with this digest and its bytes checked."""
        told, data = self.digests.get(part, []), self.data.get(part, [])
        return i < len(told) and told[i] == digest and i < len(data) and data[i] is not None

    def rebuild(self, sent: Sequence[bytes | None], part: str) -> tuple[bytes, ...] | None:
        """The whole column: sent chunks where the step sent one, stored ones elsewhere; None
        when a stored chunk the step relied on could not be read."""
        stored = self.data.get(part, [])
        out = []
        for i, chunk in enumerate(sent):
            if chunk is None:
                chunk = stored[i] if i < len(stored) else None
                if chunk is None:
                    return None
            out.append(chunk)
        return tuple(out)


def save(conn: sqlite3.Connection, node_id: str, columns: dict[str, tuple[Sequence[bytes],
         Sequence[bytes]]], before: SourceChunks) -> None:
    """Store the key source's columns (part -> (chunks, digests)), writing only the chunks
    not already stored, as `before` read and checked them."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for part in PARTS:
            chunks, digests = columns.get(part, ((), ()))
            conn.executemany(
                "INSERT OR REPLACE INTO key_source_chunk (node_id, part, chunk, digest, data) "
                "VALUES (?, ?, ?, ?, ?)",
                [(node_id, part, i, digests[i], chunks[i]) for i in range(len(chunks))
                 if not before.holds(part, i, digests[i])])
            conn.execute("DELETE FROM key_source_chunk WHERE node_id = ? AND part = ? AND "
                         "chunk >= ?", (node_id, part, len(chunks)))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
