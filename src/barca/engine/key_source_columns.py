"""A key source's keys and values in the coordinator, for one run.

Before a key source's step starts, its stored chunks' digests are read and told to the step
(barca.store.key_source_chunks); while it runs, the stored bytes are read and checked. The step
sends back only the chunks that changed, and the whole columns are rebuilt here from those and
the stored ones. At the end of the run, what changed is stored for the next tick.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Callable, Sequence

import orjson

from barca.packed_columns import JsonColumn, chunk_digest
from barca.engine.protocol import Known, PackedColumns
from barca.planner.keys import keys_from_value
from barca.store import key_source_chunks
from barca.store.artifact_store import ArtifactStore
from barca.store.artifacts import read_result
from barca.store.key_source_chunks import SourceChunks


class SourceColumns:
    """The key sources' columns of one run: stored (as read) and current (as rebuilt)."""

    def __init__(self) -> None:
        self.stored: dict[str, SourceChunks] = {}  # of the key sources that run
        self.current: dict[str, PackedColumns] = {}

    def read_digests(self, conn: sqlite3.Connection | None, node_ids: Sequence[str]) -> None:
        """Before their steps are submitted: what each step will be told."""
        for node_id in node_ids:
            self.stored[node_id] = SourceChunks.read_digests(conn, node_id)

    def known(self, node_id: str) -> Known:
        chunks = self.stored.get(node_id)
        return chunks.known() if chunks is not None else ((), (), ())

    def load(self, conn: sqlite3.Connection | None, node_ids: Sequence[str]) -> None:
        """While their steps run: the stored bytes, each checked against its digest."""
        for node_id in node_ids:
            self.stored[node_id].load(conn, node_id)

    def take(self, node_id: str, packed: PackedColumns) -> None:
        """A step's outcome: its chunks, with the stored ones where it sent none. When a stored
        chunk could not be read, nothing is kept and `columns` reads the file instead."""
        stored = self.stored.get(node_id, SourceChunks({}))
        sent = {"keys": packed.keys, "values": packed.values, "order": packed.order}
        rebuilt = {part: stored.rebuild(chunks, part) for part, chunks in sent.items()
                   if chunks is not None}
        if None not in rebuilt.values():
            self.current[node_id] = packed._replace(**rebuilt)

    def columns(self, node_id: str, read_file: Callable[[], Any]
                ) -> tuple[JsonColumn, JsonColumn | None, JsonColumn | None]:
        """The keys, (for a dict) values and the dict's order (None when sorted, see
        PackedColumns); `read_file()` gives (keys, values, order) as stored when no step sent
        them. Read from the file, they are kept too, so that the end of a run that ran the
        source stores them and its next step sends only what changed."""
        packed = self.current.get(node_id)
        if packed is not None:
            n = packed.count
            return JsonColumn(chunks=packed.keys, n=n, ascending=packed.values is not None), \
                None if packed.values is None else JsonColumn(chunks=packed.values, n=n), \
                None if packed.order is None else JsonColumn(chunks=packed.order, n=n)
        keys, values, order = (None if c is None else JsonColumn(c) for c in read_file())
        assert keys is not None  # a source always has keys, perhaps none
        keys.ascending = values is not None  # a dict's keys are sorted
        self.current[node_id] = PackedColumns(
            len(keys), keys.chunks, _chunks(values), _digests(keys), _digests(values),
            _chunks(order), _digests(order))
        return keys, values, order

    def save(self, conn: sqlite3.Connection) -> None:
        """Store the columns of the key sources that ran, only the chunks that changed."""
        for node_id, stored in self.stored.items():
            packed = self.current.get(node_id)
            if packed is not None:
                key_source_chunks.save(conn, node_id, {
                    "keys": (packed.keys, packed.key_digests),
                    "values": (packed.values or (), packed.value_digests),
                    "order": (packed.order or (), packed.order_digests)}, stored)


def stored_columns(store: ArtifactStore, key: str, fmt: str
                   ) -> tuple[list[str], list[Any] | None, list[int] | None]:
    """A key source's keys, values and order as its result holds them (keyed-json, see
    store.keyed_json_writer), or as derived from a list (or older dict) result."""
    if fmt == "keyed-json":
        columns = orjson.loads(store.get(key))
        return columns["keys"], columns["values"], columns.get("order")
    keys, by_key, order = keys_from_value(read_result(store, key, fmt))
    return keys, None if by_key is None else [by_key[k] for k in keys], order


def _chunks(column: JsonColumn | None) -> tuple[bytes, ...] | None:
    return None if column is None else column.chunks


def _digests(column: JsonColumn | None) -> tuple[bytes, ...]:
    return () if column is None else tuple(map(chunk_digest, column.chunks))
