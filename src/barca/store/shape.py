"""What a stored result looks like, read from its file without loading it as a value.

parquet: rows and columns (with their Arrow types) from the footer; json: a list's length
(and its rows' keys, each with the JSON types seen under it), a dict's keys; csv: its header
(every column a string) and rows; pickle: the class it holds, from the opcodes, never
unpickled. `barca status` shows it; anything unreadable becomes a `note`.

With `sample` (`barca status --sample N`): the first N rows of a table or list, the first N
entries of a dict, or the whole value of any other JSON; each row's keys in alphabetical
order, columns in file order. Never for a pickle: reading one runs its code.
"""

from __future__ import annotations

import pickletools
from pathlib import Path
from typing import Any

JSON_LIMIT = 16 * 1024 * 1024  # a bigger json result is not parsed just to be described
KEYS_SHOWN = 100


def artifact_shape(path: Path, fmt: str | None, sample: int | None = None) -> dict[str, Any]:
    try:
        if fmt == "parquet":
            return _parquet(path, sample)
        if fmt == "json":
            return _json(path, sample)
        if fmt == "csv":
            return _csv(path, sample)
        if fmt == "pickle":
            return {"type": _pickled_class(path)}
    except Exception as exc:  # noqa: BLE001 - a shape is a courtesy: say why there is none
        return {"note": f"unreadable: {type(exc).__name__}: {exc}"}
    return {"note": f"format {fmt} is not described"}


def _parquet(path: Path, sample: int | None) -> dict[str, Any]:
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    meta = file.metadata
    schema = meta.schema.to_arrow_schema()
    out: dict[str, Any] = {"type": "table", "rows": meta.num_rows,
                           "columns": [{"name": f.name, "type": str(f.type)} for f in schema]}
    if sample:  # the first row group holds the first rows: nothing past it is read
        rows = file.read_row_group(0).slice(0, sample).to_pylist() if meta.num_row_groups \
            else []
        out["sample"] = [_sorted_row(r) for r in rows]
    return out


def _json(path: Path, sample: int | None) -> dict[str, Any]:
    import orjson

    if path.stat().st_size > JSON_LIMIT:
        return {"note": f"json over {JSON_LIMIT // (1024 * 1024)} MB, not read"}
    value = orjson.loads(path.read_bytes())
    out: dict[str, Any]
    if isinstance(value, list):
        out = {"type": "list", "rows": len(value)}
        if value and all(isinstance(v, dict) for v in value[:100]):
            out["columns"] = _json_columns(value[:100])
        if sample:
            out["sample"] = [_sorted_row(v) for v in value[:sample]]
        return out
    if isinstance(value, dict):
        out = {"type": "dict", "keys": list(value)[:KEYS_SHOWN], "key_count": len(value)}
        if sample:
            out["sample"] = dict(list(value.items())[:sample])
        return out
    out = {"type": type(value).__name__}
    if sample:
        out["sample"] = value
    return out


def _json_columns(rows: list[dict]) -> list[dict[str, str]]:
    """Each key of the rows, in first-seen order, with the JSON types seen under it
    (`int`, `str | null`); a row without the key counts as null."""
    seen: dict[str, list[str]] = {}
    for row in rows:
        for key, value in row.items():
            kind = "null" if value is None else type(value).__name__
            kinds = seen.setdefault(key, [])
            if kind not in kinds:
                kinds.append(kind)
    for row in rows:
        for key, kinds in seen.items():
            if key not in row and "null" not in kinds:
                kinds.append("null")
    return [{"name": key, "type": " | ".join(sorted(kinds, key=lambda k: k == "null"))}
            for key, kinds in seen.items()]


def _csv(path: Path, sample: int | None) -> dict[str, Any]:
    """A CSV's header (every value a string until read into a frame) and, when it is small
    enough to read whole, its row count."""
    import csv

    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, [])
        first = [row for _, row in zip(range(sample or 0), reader)]
        out: dict[str, Any] = {"type": "table",
                               "columns": [{"name": n, "type": "string"} for n in header]}
        if path.stat().st_size <= JSON_LIMIT:
            out["rows"] = len(first) + sum(1 for _ in reader)
    if sample:
        out["sample"] = [dict(sorted(zip(header, row))) for row in first]
    return out


def _sorted_row(row: Any) -> Any:
    return dict(sorted(row.items())) if isinstance(row, dict) else row


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
        rows = f"{shape['rows']} rows" if "rows" in shape else "? rows"
        return f"{rows} x {len(shape['columns'])} cols"
    if kind == "list":
        return f"list ({shape['rows']} rows)"
    if kind == "dict":
        n = shape["key_count"]
        return f"dict ({n} key{'s' if n != 1 else ''})"
    return str(kind)
