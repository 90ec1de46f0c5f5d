"""`barca sql QUERY [FILES]`: DuckDB SQL over the stored results, one view per node
(built by store.sql_views).

A node's view reads its latest successful result (even when the code changed since; `barca
status` says whether it is stale). A partitioned node is one view with a leading `partition`
column (`retailer=r7`) over the results of its current keys. Only JSON, parquet and CSV
results are views; a pickle is not. The pipeline is read from source (never imported) and
nothing is recorded. DuckDB is imported only here.

Views whose name the query mentions are built for real; the others are empty placeholders,
so that `show tables` lists everything without reading every file of a large node.
"""

from __future__ import annotations

from typing import Any

import click

from barca.cli.server_option import server_options
from barca.cli.output import bounded, choose_mode, emit, emit_json, note_truncated, table
from barca.views.listing import listing
from barca.printable import note
from barca.engine.driver import open_pipeline
from barca.store.db import connect
from barca.store.history import latest_results
from barca.store.sql_views import node_sources, run_query, unpacked_results

DEFAULT_ROWS = 100

HELP = """Run DuckDB SQL over the stored results: each node is a view named after its function.

\b
A partitioned node has a leading `partition` column (`retailer=r7`); a JSON list of plain
values is one column named `json`; a key source's {key: value} dict has a row per key, with
columns `key` and `value`. Pickled results are not views. Read-only: only SELECT and
EXPLAIN run, and only the stored results can be read. Nothing runs and nothing is recorded.
\b
Examples:
  barca sql "select * from summary"
  barca sql "select partition, count(*) from scored group by 1" pipeline.py
  barca sql "show tables"
"""


@click.command("sql", help=HELP)
@server_options
@click.argument("query")
@click.argument("files", nargs=-1)
@click.option("-l", "--limit", type=click.IntRange(min=1), metavar="N",
              help=f"Print at most N rows (default {DEFAULT_ROWS}).")
@click.option("--all", "all_rows", is_flag=True, help="Print every row (not with --limit).")
@click.option("--json", "json_flag", is_flag=True, help="JSON output (default when stdout is "
              "not a terminal).")
@click.option("--pretty", is_flag=True, help="Human output (default in a terminal).")
@click.option("--env", "env_name", metavar="NAME", help="Read the results of environment NAME "
              "(or set BARCA_ENV).")
def sql_command(query, files, limit, all_rows, json_flag, pretty, env_name) -> None:
    mode = choose_mode(json_flag, pretty)
    rows_shown = bounded(limit, all_rows, DEFAULT_ROWS)
    loaded = open_pipeline(list(files), env_name)
    conn = connect(loaded.project.db_path, create=False)
    states = latest_results(conn, loaded.graph.order)
    warnings: list[str] = []
    hint = producer_hint(list(files), env_name)
    with unpacked_results(loaded.project.artifacts_dir) as unpack:
        found = node_sources(loaded.graph, states, loaded.project.root, warnings, unpack)
        for warning in warnings:
            note(warning)
        columns, rows, total = run_query(query, found, rows_shown, hint,
                                         [loaded.project.artifacts_dir])
    print_rows(mode, columns, rows, total)


def print_rows(mode: str, columns: list[str], rows: list[dict[str, Any]], total: int) -> None:
    """A query's answer as `barca sql` prints it in `mode`."""
    if mode == "json":
        emit_json(listing({"columns": columns}, "rows", rows, total, "rows"), indent=True,
                  default=_json_value)
        return
    if not columns:
        emit("OK")
        return
    emit(table(columns, [[_cell(r[c]) for c in columns] for r in rows]))
    note_truncated(len(rows), total, "rows")


def producer_hint(files: list[str], env_name: str | None) -> str:
    extra = [*files, *(["--env", env_name] if env_name else [])]
    return " ".join(extra)


def _json_value(value: Any) -> Any:
    """orjson's fallback: decimals as numbers, bytes as hex, anything else as text."""
    import decimal

    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return str(value)


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)
