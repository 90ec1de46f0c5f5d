"""A stored value as a person reads it in a terminal (`barca get --pretty`): a table's first
rows and its shape rather than the JSON pointer to its file (`_barca_artifact`), which is
what the JSON contract gives and what scripts follow, but tells a person nothing about the
value itself. Only the rows shown are read: a table of millions of rows costs one batch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from barca.engine.result import RunResult

PREVIEW_ROWS = 10
CELL_WIDTH = 40


@dataclass(frozen=True)
class TablePreview:
    path: str  # as the report shows it (relative to the project)
    format: str
    size_bytes: int | None
    num_rows: int
    columns: list[str]
    rows: list[list[str]]  # the first PREVIEW_ROWS rows, each cell one short line

    def heading(self) -> list[str]:
        size = "" if self.size_bytes is None else f", {self.size_bytes:,} bytes"
        return [f"{self.format} table, {self.num_rows:,} row{'s' if self.num_rows != 1 else ''}"
                f" x {len(self.columns)} column{'s' if len(self.columns) != 1 else ''}{size}",
                f"file: {self.path}"]

    def more(self) -> str | None:
        rest = self.num_rows - len(self.rows)
        return None if rest <= 0 else \
            f"... {rest:,} more rows (-o path gives the file; barca sql queries it)"


def pointer(value: Any) -> dict[str, Any] | None:
    """The `_barca_artifact` pointer a report gives for a non-JSON result, or None."""
    if isinstance(value, dict) and len(value) == 1 and isinstance(
            value.get("_barca_artifact"), dict):
        return value["_barca_artifact"]
    return None


def pointer_line(found: dict[str, Any]) -> str:
    """A pointer as one line: where the result is, its format and size."""
    size = "" if found.get("size_bytes") is None else f", {found['size_bytes']:,} bytes"
    return f"{found['path']} ({found['format']}{size})"


def table_preview(result: RunResult, node_id: str, found: dict[str, Any]) -> TablePreview | None:
    """The first rows of an unpartitioned node's current table result (parquet or csv), or
    None when it is no table or cannot be read (the pointer is shown instead)."""
    located = result.key_of(node_id, "")
    if located is None or located[1] not in ("parquet", "csv"):
        return None
    try:
        path = result.store.local_path(located[0])
        num_rows, columns, batch = _first_rows(path, located[1])
    except Exception:  # a damaged or missing file: the pointer still says where it was
        return None
    rows = [[_cell(v) for v in row] for row in batch]
    return TablePreview(found["path"], located[1], found.get("size_bytes"), num_rows, columns,
                        rows)


def _first_rows(path: str, fmt: str) -> tuple[int, list[str], list[tuple[Any, ...]]]:
    """(row count, column names, the first rows as tuples); a parquet file's count is in its
    footer, so only one batch of it is read."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        source = pq.ParquetFile(path)
        first = next(source.iter_batches(batch_size=PREVIEW_ROWS), None)
        num_rows, names = source.metadata.num_rows, source.schema_arrow.names
    else:
        import pyarrow.csv as pcsv

        table = pcsv.read_csv(path)
        num_rows, names, first = table.num_rows, table.column_names, table.slice(0, PREVIEW_ROWS)
    if first is None:
        return num_rows, names, []
    columns = [first.column(i).to_pylist() for i in range(first.num_columns)]
    return num_rows, names, list(zip(*columns))[:PREVIEW_ROWS]


def _cell(value: Any) -> str:
    text = "null" if value is None else str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= CELL_WIDTH else text[:CELL_WIDTH - 1] + "…"


def table_rows(path: str, fmt: str) -> tuple[int, list[str], list[list[str]]]:
    """(row count, column names, the first PREVIEW_ROWS rows as short cells) of a parquet
    or csv file: a table's preview wherever it is shown (the web UI's key page)."""
    num_rows, columns, batch = _first_rows(path, fmt)
    return num_rows, columns, [[_cell(v) for v in row] for row in batch]
