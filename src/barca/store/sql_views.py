"""The SQL views `barca sql` queries: which stored file each node's view reads, and DuckDB
views over them. Read-only over the results; what a query may reach beyond them is DuckDB's
configuration (see run_query).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from barca.discover.model import Definition
from barca.errors import InfraError, UsageError
from barca.graph import Graph
from barca.planner.keys import key_label, keys_from_value, static_keys
from barca.store.history import Latest
from barca.store.local_files import read_stored, write_bytes
from barca.store.packs import is_packed

NO_RESULT = Latest((), (), (), ())
READERS = {"json": "read_json_auto", "keyed-json": "read_json_auto", "parquet": "read_parquet",
           "csv": "read_csv_auto"}
_MAX_JSON_BYTES = (1 << 31) - 1  # DuckDB's limit; its default (16 MB) is a few 100,000 keys


@dataclass(frozen=True, slots=True)
class Source:
    """What a node's view reads: (partition label or None, path, format) per result file."""

    view: str
    node_id: str
    name: str
    kind: str
    files: tuple[tuple[str | None, str, str], ...]
    problem: str | None = None  # "pickle" | "no_result"


# -- which file each view reads -------------------------------------------------------------

def node_sources(graph: Graph, states: dict[str, Latest], root: Path, warnings: list[str],
                 unpack: Callable[[Path], str] | None = None) -> list[Source]:
    """Each node's view: its current keys' files, absolute (DuckDB reads them from any
    directory; a packed result, `unpack`ed to a file of its own: `unpacked_results`). A
    warning for the user is appended to `warnings`."""
    names: dict[str, list[str]] = {}
    for node_id in graph.order:
        names.setdefault(graph.nodes[node_id].name.lower(), []).append(node_id)
    clashes = sorted(n for ids in names.values() if len(ids) > 1 for n in ids)
    if clashes:
        warnings.append(clash_warning(clashes))
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
                path = root / state.paths[i]
                results.append((label, unpack(path) if unpack and is_packed(state.paths[i])
                                else str(path), state.formats[i]))
        problem = None if results else "no_result"
        if any(fmt not in READERS for _, _, fmt in results):
            problem = "pickle"
        view = node_id if node_id in clashes else d.name
        out.append(Source(view, node_id, d.name, d.kind, tuple(results), problem))
    return out


def clash_warning(clashes: list[str]) -> str:
    """Said when nodes share a name (`clashes`: their ids, sorted)."""
    return (f"barca: several nodes share a name; their views are named by full id: "
            f"{', '.join(clashes)}")


@contextlib.contextmanager
def unpacked_results(artifacts: Path) -> Iterator[Callable[[Path], str]]:
    """Packed results (store.packs) copied one file each, for the length of a query: DuckDB
    reads files. They go in a private directory under the results (the only place a query
    may read), named as a live process's temporary files, which `gc` leaves alone."""
    folder = tempfile.mkdtemp(prefix=f".sql-{os.getpid()}-", dir=artifacts) \
        if artifacts.is_dir() else None
    count = 0

    def unpack(path: Path) -> str:
        nonlocal count
        count += 1
        copy = f"{folder}/.r{count}.{os.getpid()}.tmp"
        write_bytes(read_stored(str(path)), copy)
        return copy

    try:
        yield unpack
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


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

def run_query(query: str, sources: list[Source], limit: int | None, hint: str,
              readable: Sequence[Path]) -> tuple[list[str], list[dict[str, Any]], int]:
    """Run a read-only query over the views. DuckDB may read files under the `readable`
    directories (the results) and nothing else: no other file, no writing, no ATTACH, no
    extension installed or loaded, and the query cannot change those settings back."""
    try:
        import duckdb
    except ImportError as exc:
        raise InfraError("barca sql needs duckdb, which is not installed",
                         "pip install duckdb") from exc
    _check_read_only(duckdb, query, sources)
    conn = duckdb.connect(config={"autoinstall_known_extensions": False,
                                  "autoload_known_extensions": False})
    for source in sources:
        if source.problem is None:
            _create_view(conn, source, _mentioned(source.view, query), hint)
    conn.execute(f"SET allowed_directories = [{', '.join(_text(str(d)) for d in readable)}]")
    conn.execute("SET enable_external_access = false")
    conn.execute("SET lock_configuration = true")
    try:
        rel = conn.sql(query)
        if rel is None:
            return [], [], 0
        result = rel.arrow()
        result = result.read_all() if hasattr(result, "read_all") else result
    except duckdb.CatalogException as exc:
        raise _catalog_error(str(exc), sources, hint) from None
    except duckdb.PermissionException as exc:
        raise UsageError(f"barca sql reads only the stored results: {exc}",
                         "query the views instead (barca sql \"show tables\" lists them)"
                         ) from None
    except duckdb.Error as exc:
        raise UsageError(f"SQL error: {exc}", _views_text(sources)) from None
    total = result.num_rows
    shown = result.slice(0, limit) if limit is not None else result
    columns = list(shown.column_names)
    values = [shown.column(i).to_pylist() for i in range(len(columns))]
    rows = [dict(zip(columns, row)) for row in zip(*values)] if columns else []
    return columns, rows, total


READ_ONLY_STATEMENTS = ("SELECT", "EXPLAIN")  # SHOW, DESCRIBE, SUMMARIZE, VALUES are SELECTs


def _check_read_only(duckdb: Any, query: str, sources: list[Source]) -> None:
    """Refuse anything but reading: COPY, ATTACH, CREATE, INSERT, SET, INSTALL, LOAD, ..."""
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise UsageError(f"SQL error: {exc}", _views_text(sources)) from None
    if not statements:  # "", ";", a comment: it used to print an empty table, exit 0
        raise UsageError("the query has no statement", _views_text(sources))
    for statement in statements:
        kind = statement.type.name
        if kind not in READ_ONLY_STATEMENTS:
            raise UsageError(f"barca sql runs read-only queries; a {kind} statement is refused",
                             "write a SELECT over the views; stored results change only "
                             "through barca get and barca run")


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


def _producer(source: Source, hint: str) -> str:
    command = "run" if source.kind == "task" else "get"
    return f"barca {command} {source.name} {hint}".rstrip()
