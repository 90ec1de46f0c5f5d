"""`barca sql QUERY [FILES]`: DuckDB SQL over the stored results, one view per node.

A node's view reads its latest successful result (even when the code changed since; `barca
status` says whether it is stale). A partitioned node is one view with a leading `partition`
column (`retailer=r7`) over the results of its current keys. Only JSON, parquet and CSV
results are views; a pickle is not. The pipeline is read from source (never imported) and
nothing is recorded. DuckDB is imported only here.

Views whose name the query mentions are built for real; the others are empty placeholders,
so that `show tables` lists everything without reading every file of a large node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from barca.cli.output import choose_mode, emit, emit_json, listing, note, note_truncated, table
from barca.discover.model import Definition
from barca.errors import InfraError, UsageError
from barca.graph import Graph
from barca.engine.driver import open_pipeline
from barca.plan.keys import key_label, keys_from_value, static_keys
from barca.store.db import connect
from barca.store.history import Latest, latest_results

NO_RESULT = Latest((), (), (), ())
READERS = {"json": "read_json_auto", "keyed-json": "read_json_auto", "parquet": "read_parquet",
           "csv": "read_csv_auto"}
_MAX_JSON_BYTES = (1 << 31) - 1  # DuckDB's limit; its default (16 MB) is a few 100,000 keys
DEFAULT_ROWS = 100

HELP = """Run DuckDB SQL over the stored results: each node is a view named after its function.

\b
A partitioned node has a leading `partition` column (`retailer=r7`); a JSON list of plain
values is one column named `json`; a key source's {key: value} dict has a row per key, with
columns `key` and `value`. Pickled results are not views. Nothing runs and nothing
is recorded.
\b
Examples:
  barca sql "select * from summary"
  barca sql "select partition, count(*) from scored group by 1" pipeline.py
  barca sql "show tables"
"""


@dataclass(frozen=True, slots=True)
class Source:
    """What a node's view reads: (partition label or None, path, format) per result file."""

    view: str
    node_id: str
    name: str
    kind: str
    files: tuple[tuple[str | None, str, str], ...]
    problem: str | None = None  # "pickle" | "no_result"


@click.command("sql", help=HELP)
@click.argument("query")
@click.argument("files", nargs=-1)
@click.option("-l", "--limit", type=click.IntRange(min=1), default=DEFAULT_ROWS,
              show_default=True, metavar="N", help="Print at most N rows.")
@click.option("--all", "all_rows", is_flag=True, help="Print every row.")
@click.option("--json", "json_flag", is_flag=True, help="JSON output (default when stdout is "
              "not a terminal).")
@click.option("--pretty", is_flag=True, help="Human output (default in a terminal).")
@click.option("--env", "env_name", metavar="NAME", help="Read the results of environment NAME "
              "(or set BARCA_ENV).")
def sql_command(query, files, limit, all_rows, json_flag, pretty, env_name) -> None:
    mode = choose_mode(json_flag, pretty)
    loaded = open_pipeline(list(files), env_name)
    conn = connect(loaded.project.db_path, create=False)
    states = latest_results(conn, loaded.graph.order)
    found = node_sources(loaded.graph, states, loaded.project.root)
    hint = _get_hint(list(files), env_name)
    columns, rows, total = run_query(query, found, None if all_rows else limit, hint)
    if mode == "json":
        emit_json(listing({"columns": columns}, "rows", rows, total, "rows"), indent=True,
                  default=_json_value)
        return
    if not columns:
        emit("OK")
        return
    emit(table(columns, [[_cell(r[c]) for c in columns] for r in rows]))
    note_truncated(len(rows), total, "rows")


# -- which file each view reads -------------------------------------------------------------

def node_sources(graph: Graph, states: dict[str, Latest], root: Path) -> list[Source]:
    names: dict[str, list[str]] = {}
    for node_id in graph.order:
        names.setdefault(graph.nodes[node_id].name.lower(), []).append(node_id)
    clashes = sorted(n for ids in names.values() if len(ids) > 1 for n in ids)
    if clashes:
        note(f"barca: several nodes share a name; their views are named by full id: "
             f"{', '.join(clashes)}")
    memo: dict[str, list[str] | None] = {}
    out = []
    for node_id in graph.order:
        d = graph.nodes[node_id]
        state = states.get(node_id, NO_RESULT)
        keys = current_keys(d, graph, states, root, memo)
        keys = list(state.keys) if keys is None else keys
        results = []
        index = {k: i for i, k in enumerate(state.keys)}
        for key in keys:
            i = index.get(key)
            if i is not None and state.paths[i]:
                label = key_label(d, key) if d.dimensions else None
                results.append((label, str(root / state.paths[i]), state.formats[i]))
        problem = None if results else "no_result"
        if any(fmt not in READERS for _, _, fmt in results):
            problem = "pickle"
        view = node_id if node_id in clashes else d.name
        out.append(Source(view, node_id, d.name, d.kind, tuple(results), problem))
    return out


def current_keys(d: Definition, graph: Graph, states: dict[str, Latest],
                 root: Path, memo: dict[str, list[str] | None]) -> list[str] | None:
    """The node's keys as of its stored state; None when they cannot be known without
    running user code (a `partitions(<expression>)` dimension): then every stored key."""
    if d.node_id in memo:
        return memo[d.node_id]
    keys: list[str] | None
    if not d.dimensions:
        keys = [""]
    elif all(dim.kind == "static" for dim in d.dimensions):
        keys = static_keys(d, {})
    elif any(dim.kind == "expr" for dim in d.dimensions):
        keys = None
    else:
        source = graph.nodes[d.dimensions[0].source]
        keys = _source_keys(source, graph, states, root, memo)
    memo[d.node_id] = keys
    return keys


def _source_keys(source: Definition, graph: Graph, states: dict[str, Latest],
                 root: Path, memo: dict) -> list[str] | None:
    state = states.get(source.node_id, NO_RESULT)
    if source.dimensions:
        keys = current_keys(source, graph, states, root, memo)
        return list(state.keys) if keys is None else keys
    i = state.find("")
    if i is None or state.formats[i] not in ("json", "keyed-json") or not state.paths[i]:
        return []
    from barca.store.artifacts import read_value

    try:
        return keys_from_value(read_value(root / state.paths[i], state.formats[i]))[0]
    except (OSError, TypeError, ValueError):
        return []


# -- DuckDB ---------------------------------------------------------------------------------

def run_query(query: str, sources: list[Source], limit: int | None, hint: str
              ) -> tuple[list[str], list[dict[str, Any]], int]:
    try:
        import duckdb
    except ImportError as exc:
        raise InfraError("barca sql needs duckdb, which is not installed",
                         "pip install duckdb") from exc
    conn = duckdb.connect()
    for source in sources:
        if source.problem is None:
            _create_view(conn, source, _mentioned(source.view, query), hint)
    try:
        rel = conn.sql(query)
        if rel is None:
            return [], [], 0
        result = rel.arrow()
        result = result.read_all() if hasattr(result, "read_all") else result
    except duckdb.CatalogException as exc:
        raise _catalog_error(str(exc), sources, hint) from None
    except duckdb.Error as exc:
        raise UsageError(f"SQL error: {exc}", _views_text(sources)) from None
    total = result.num_rows
    shown = result.slice(0, limit) if limit is not None else result
    columns = list(shown.column_names)
    values = [shown.column(i).to_pylist() for i in range(len(columns))]
    rows = [dict(zip(columns, row)) for row in zip(*values)] if columns else []
    return columns, rows, total


def _mentioned(view: str, query: str) -> bool:
    pattern = r"(?<![A-Za-z0-9_])" + re.escape(view) + r"(?![A-Za-z0-9_])"
    return re.search(pattern, query, re.IGNORECASE) is not None


def _create_view(conn: Any, source: Source, real: bool, hint: str) -> None:
    import duckdb

    name = _ident(source.view)
    if not real:
        conn.execute(f"CREATE VIEW {name} AS SELECT NULL AS barca_placeholder WHERE false")
        return
    try:
        conn.execute(f"CREATE VIEW {name} AS {view_sql(source)}")
    except duckdb.Error as exc:
        raise UsageError(f"cannot read the stored result of '{source.view}' "
                         f"({source.node_id}): {exc}",
                         f"compute it again with: {_producer(source, hint)}") from None


def view_sql(source: Source) -> str:
    """The SELECT a view runs: one file, or every key's file with its label in front."""
    label, path, fmt = source.files[0]
    if fmt == "keyed-json":  # a key source's dict: a row per key
        return (f'SELECT unnest(keys) AS key, unnest("values") AS value FROM read_json_auto('
                f"{_text(path)}, maximum_object_size = {_MAX_JSON_BYTES})")
    if label is None:
        return f"SELECT * FROM {READERS[fmt]}({_text(path)})"
    parts = []
    for fmt in sorted({f for _, _, f in source.files}):
        group = [(lab, p) for lab, p, f in source.files if f == fmt]
        paths = "[" + ", ".join(_text(p) for _, p in group) + "]"
        labels = "[" + ", ".join(_text(lab or "") for lab, _ in group) + "]"
        parts.append(f"SELECT map({paths}, {labels})[_barca_file] AS partition, "
                     f"* EXCLUDE (_barca_file) FROM {READERS[fmt]}({paths}, "
                     f"filename = '_barca_file', union_by_name = true)")
    return " UNION ALL BY NAME ".join(parts)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _catalog_error(message: str, sources: list[Source], hint: str) -> UsageError:
    match = re.search(r"Table with name (.+?) does not exist", message)
    if not match:
        return UsageError(f"SQL error: {message}", _views_text(sources))
    wanted = match.group(1).strip('"').lower()
    for source in sources:
        if wanted not in (source.view.lower(), source.name.lower(), source.node_id.lower()):
            continue
        if source.problem == "pickle":
            return UsageError(f"'{source.view}' ({source.node_id}) is stored as a pickle, which "
                              "SQL cannot read",
                              "return a table (pandas, polars, Arrow, DuckDB), a dict or a list "
                              "so that it is stored as parquet or JSON")
        return UsageError(f"'{source.view}' ({source.node_id}) has no stored result yet",
                          f"compute it with: {_producer(source, hint)}")
    return UsageError(f"unknown view '{match.group(1)}'", _views_text(sources))


def _views_text(sources: list[Source]) -> str:
    views = sorted(s.view for s in sources if s.problem is None)
    if not views:
        return "no node has a stored JSON, parquet or CSV result yet; run `barca get` first"
    return "views: " + ", ".join(views)


def _get_hint(files: list[str], env_name: str | None) -> str:
    extra = [*files, *(["--env", env_name] if env_name else [])]
    return " ".join(extra)


def _producer(source: Source, hint: str) -> str:
    command = "run" if source.kind == "task" else "get"
    return f"barca {command} {source.name} {hint}".rstrip()


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
