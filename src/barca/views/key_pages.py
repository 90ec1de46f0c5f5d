"""One key of a node as the web UI's key page shows it (`GET /assets/{id}/attempts`,
`GET /assets/{id}/value`): its attempts newest first, each with its run and, failed, the
error and the user's frames of its traceback; and a preview of its stored value (JSON
pretty-printed, a table's first rows), read within a bound so that a huge value costs little.
A key is named by its label (`retailer=r7`), as every answer writes it; "" names an
unpartitioned node's one result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import barca.store.history as history
from barca.discover.model import Definition
from barca.store.db import Connection
from barca.store.history_keys import key_attempts
from barca.views.server_runs import key_named, packed_bytes
from barca.views.times import iso_time
from barca.views.value_preview import table_rows

PREVIEW_BYTES = 1 << 20   # a JSON value read whole up to this size, else only its size is said
PREVIEW_CHARS = 20_000    # of the pretty-printed text


def _key(node: Definition, label: str) -> str:
    return key_named(node, label) if node.dimensions else ""


def attempts_json(conn: Connection | None, node: Definition, label: str, limit: int,
                  run_id: str | None = None) -> dict[str, Any]:
    rows = key_attempts(conn, node.node_id, _key(node, label), limit, run_id) if conn else []
    return {"node_id": node.node_id, "key": label if node.dimensions else None,
            "attempts": [_attempt(r) for r in rows]}


def _attempt(row: history.StepRow) -> dict[str, Any]:
    return {"run_id": row.run_id, "step_id": row.step_id, "status": row.status,
            "attempts": row.attempts, "elapsed_seconds": row.elapsed_seconds,
            "created_at": iso_time(row.created_at), "error_type": row.error_type,
            "error_message": row.error_message, "error_traceback": row.error_traceback,
            "worker_exit": row.worker_exit, "format": row.format, "size_bytes": row.size_bytes}


def value_json(conn: Connection | None, root: Path, node: Definition,
               label: str) -> dict[str, Any]:
    """The preview of the key's newest stored value: `kind` json (`text`, `truncated`),
    table (`num_rows`, `columns`, `rows`), none (never stored) or opaque (a format the
    preview does not read, or a value past the size bound: `reason`)."""
    rows = key_attempts(conn, node.node_id, _key(node, label), 50) if conn else []
    found = next((r for r in rows if r.status == "success" and r.artifact_path), None)
    if found is None:
        return {"kind": "none", "reason": "no stored value: the key has no successful attempt"
                " among its last 50"}
    head = {"run_id": found.run_id, "created_at": iso_time(found.created_at),
            "format": found.format, "size_bytes": found.size_bytes}
    try:
        return {**head, **_preview(root, found.artifact_path, found.format)}
    except Exception as exc:  # a damaged or removed file: say so, the rest of the page stands
        return {**head, "kind": "opaque", "reason": f"the stored value cannot be read: {exc}"}


def _preview(root: Path, path: str, fmt: str | None) -> dict[str, Any]:
    packed = packed_bytes(root, path)
    full = (root / path).resolve()
    if packed is None and not full.is_relative_to((root / ".barca").resolve()):
        return {"kind": "opaque", "reason": "the value is stored outside this project"}
    if fmt in ("parquet", "csv") and packed is None:
        num_rows, columns, rows = table_rows(str(full), fmt)
        return {"kind": "table", "num_rows": num_rows, "columns": columns, "rows": rows}
    if fmt not in ("json", "keyed-json"):
        return {"kind": "opaque", "reason": f"a {fmt} value has no preview here"}
    if packed is None and full.stat().st_size > PREVIEW_BYTES:
        return {"kind": "opaque", "reason": f"a JSON value over {PREVIEW_BYTES:,} bytes is not "
                                            "previewed"}
    data = packed if packed is not None else full.read_bytes()
    text = json.dumps(json.loads(data), indent=2, ensure_ascii=False)
    return {"kind": "json", "text": text[:PREVIEW_CHARS], "truncated": len(text) > PREVIEW_CHARS}
