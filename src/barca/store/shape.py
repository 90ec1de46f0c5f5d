"""What a stored result looks like, read from its file without loading it as a value.

parquet: rows and columns from the footer; json: a list's length (and its rows' keys), a
dict's keys; pickle: the class it holds, from the opcodes, never unpickled. `barca status`
shows it; anything unreadable becomes a `note`.
"""

from __future__ import annotations

import pickletools
from pathlib import Path
from typing import Any

JSON_LIMIT = 16 * 1024 * 1024  # a bigger json result is not parsed just to be described
KEYS_SHOWN = 100


def artifact_shape(path: Path, fmt: str | None) -> dict[str, Any]:
    try:
        if fmt == "parquet":
            return _parquet(path)
        if fmt == "json":
            return _json(path)
        if fmt == "pickle":
            return {"type": _pickled_class(path)}
    except Exception as exc:  # noqa: BLE001 - a shape is a courtesy: say why there is none
        return {"note": f"unreadable: {type(exc).__name__}: {exc}"}
    return {"note": f"format {fmt} is not described"}


def _parquet(path: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    meta = pq.read_metadata(path)
    schema = meta.schema.to_arrow_schema()
    return {"type": "table", "rows": meta.num_rows,
            "columns": [{"name": f.name, "type": str(f.type)} for f in schema]}


def _json(path: Path) -> dict[str, Any]:
    import orjson

    if path.stat().st_size > JSON_LIMIT:
        return {"note": f"json over {JSON_LIMIT // (1024 * 1024)} MB, not read"}
    value = orjson.loads(path.read_bytes())
    if isinstance(value, list):
        out: dict[str, Any] = {"type": "list", "rows": len(value)}
        if value and all(isinstance(v, dict) for v in value[:100]):
            out["columns"] = list(dict.fromkeys(k for v in value[:100] for k in v))
        return out
    if isinstance(value, dict):
        return {"type": "dict", "keys": list(value)[:KEYS_SHOWN], "key_count": len(value)}
    return {"type": type(value).__name__}


def _pickled_class(path: Path) -> str:
    """The first class a pickle names (GLOBAL or STACK_GLOBAL), else the type of its value."""
    strings: list[str] = []
    first = None
    with path.open("rb") as fh:
        for op, arg, _ in pickletools.genops(fh):
            if op.name == "GLOBAL":
                return str(arg).replace(" ", ".")
            if op.name == "STACK_GLOBAL" and len(strings) >= 2:
                return f"{strings[-2]}.{strings[-1]}"
            if isinstance(arg, str):
                strings.append(arg)
            if first is None and op.name not in ("PROTO", "FRAME"):
                first = op.name
    return {"EMPTY_DICT": "dict", "EMPTY_LIST": "list", "EMPTY_TUPLE": "tuple",
            "EMPTY_SET": "set"}.get(first or "", "object")


def shape_text(shape: dict[str, Any] | None) -> str:
    """The SHAPE column: `3 rows x 2 cols`, `dict (1 key)`, `pandas.DataFrame`, `? (note)`."""
    if not shape:
        return "-"
    if "note" in shape:
        return f"? ({shape['note']})"
    kind = shape.get("type")
    if kind == "table":
        return f"{shape['rows']} rows x {len(shape['columns'])} cols"
    if kind == "list":
        return f"list ({shape['rows']} rows)"
    if kind == "dict":
        n = shape["key_count"]
        return f"dict ({n} key{'s' if n != 1 else ''})"
    return str(kind)
