"""How a node's state snapshot is stored: a small JSON header and its per-key columns as
chunks (one row per chunk, see store.metadata), so that a change at one key rewrites one
chunk of the columns it touches. The planner sees only the decoded `NodeState`.
"""

from __future__ import annotations

from typing import Any, Sequence

import orjson

from barca.packed_columns import CHUNK, HashColumn, JsonColumn
from barca.state import NodeState


def state_columns(state: NodeState) -> dict[str, Sequence[bytes]]:
    """Each per-key column of a snapshot as its chunks (CHUNK keys each), stored one row per
    chunk so that a change at one key rewrites one chunk of the columns it touches."""
    columns: dict[str, Sequence[bytes]] = {"keys": state.keys.chunks,
                                           "run_hash": state.run_hash.chunks}
    for i, column in enumerate(state.signature):
        columns[f"sig{i}"] = column.chunks
    if state.output_hash is not None:
        columns["output_hash"] = state.output_hash.chunks
    if state.where is not None:
        columns["where"] = state.where.chunks
    return columns


def encode_header(state: NodeState) -> bytes:
    """Everything of a snapshot but its per-key columns."""
    return orjson.dumps({
        "n": len(state), "context": state.context, "contexts": state.contexts,
        "fmt": state.fmt, "parts": state.parts, "failed": state.failed,
        "signature": ["json" if isinstance(c, JsonColumn) else "hash" for c in state.signature],
        "output_hash": state.output_hash is not None, "where": state.where is not None})


def decode_state(header_bytes: bytes, columns: dict[str, Sequence[bytes]]) -> NodeState:
    """A snapshot from its header and its columns' chunks (as `state_columns` gave them)."""
    header = orjson.loads(header_bytes)
    n = header["n"]

    def column(name: str, kind: str) -> Any:
        chunks = columns.get(name, ())
        if len(chunks) != -(-n // CHUNK):
            raise ValueError(f"column {name} has {len(chunks)} chunks for {n} keys")
        if kind == "json":
            return JsonColumn(chunks=chunks, n=n)
        hashes = HashColumn(chunks=chunks)
        if len(hashes) != n:
            raise ValueError(f"column {name} has {len(hashes)} hashes for {n} keys")
        return hashes

    signature = tuple(column(f"sig{i}", kind) for i, kind in enumerate(header["signature"]))
    output = column("output_hash", "hash") if header["output_hash"] else None
    where = column("where", "json") if header.get("where") else None  # older: no packs
    return NodeState(column("keys", "json"), column("run_hash", "hash"), header["context"],
                     header["contexts"], signature, header["fmt"], output, header["parts"],
                     header["failed"], where)
